#include "libengine/model/linear.h"

#include <optional>

#include "libengine/model/param_scope.h"

namespace zinf::model {

Linear::Linear(ParamTable& table, const std::string& weight_name, const std::string& bias_name,
               std::int64_t in_features, std::int64_t out_features, std::int32_t group, float init_std)
    : in_features_(in_features), out_features_(out_features), owns_weight_(true) {
  weight_ = table.add({.name = weight_name,
                       .shape = Shape{out_features, in_features},
                       .group = group,
                       .init = ParamInit::kNormal,
                       .init_std = init_std,
                       .weight_decay = true});
  bias_ = bias_name.empty() ? kNoBias
                            : table.add({.name = bias_name,
                                         .shape = Shape{out_features},
                                         .group = group,
                                         .init = ParamInit::kZeros,
                                         .init_std = 0.0f,
                                         .weight_decay = false});
}

Linear Linear::shared(ParamId weight, std::int64_t in_features, std::int64_t out_features) {
  return Linear(weight, kNoBias, in_features, out_features, /*owns_weight=*/false);
}

Status Linear::forward(device::Ops& ops, ParamSource& params, Tensor out, std::int64_t out_col_begin,
                       Tensor inp) const {
  ZINF_ASSIGN_OR_RETURN(ScopedParam weight, ScopedParam::acquire(params, weight_));
  if (bias_ == kNoBias) {
    ops.matmul_forward(out, out_col_begin, inp, weight.tensor(), nullptr);
    return Status::ok();
  }
  ZINF_ASSIGN_OR_RETURN(ScopedParam bias, ScopedParam::acquire(params, bias_));
  ops.matmul_forward(out, out_col_begin, inp, weight.tensor(), &bias.tensor());
  return Status::ok();
}

Status Linear::backward(device::Ops& ops, ParamSource& params, GradSink& grads, Tensor dinp, device::GradMode dinp_mode,
                        Tensor dout, std::int64_t dout_col_begin, Tensor inp) const {
  {
    // The backward pass reads the weight only (dinp = dout · weight); the bias is not acquired.
    ZINF_ASSIGN_OR_RETURN(ScopedParam weight, ScopedParam::acquire(params, weight_));
    ZINF_ASSIGN_OR_RETURN(Tensor dweight, grads.grad_buffer(weight_));
    std::optional<Tensor> dbias;
    if (bias_ != kNoBias) {
      ZINF_ASSIGN_OR_RETURN(Tensor buffer, grads.grad_buffer(bias_));
      dbias = buffer;
    }
    ops.matmul_backward(dinp, dinp_mode, dweight, dbias ? &*dbias : nullptr, dout, dout_col_begin, inp,
                        weight.tensor());
  }
  if (owns_weight_) ZINF_RETURN_IF_ERROR(grads.commit(weight_));
  if (bias_ != kNoBias) ZINF_RETURN_IF_ERROR(grads.commit(bias_));
  return Status::ok();
}

}  // namespace zinf::model
