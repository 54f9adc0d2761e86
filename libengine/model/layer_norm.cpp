#include "libengine/model/layer_norm.h"

#include "libengine/model/param_scope.h"

namespace zinf::model {

LayerNorm::LayerNorm(ParamTable& table, const std::string& prefix, std::int64_t channels, std::int32_t group,
                     spec::NormKind kind, float eps)
    : kind_(kind), eps_(eps) {
  weight_ = table.add({.name = prefix + ".weight",
                       .shape = Shape{channels},
                       .group = group,
                       .init = ParamInit::kOnes,
                       .init_std = 0.0f,
                       .weight_decay = false});
  if (kind != spec::NormKind::kLayerNorm) return;
  bias_ = table.add({.name = prefix + ".bias",
                     .shape = Shape{channels},
                     .group = group,
                     .init = ParamInit::kZeros,
                     .init_std = 0.0f,
                     .weight_decay = false});
}

Status LayerNorm::forward(device::Ops& ops, ParamSource& params, Tensor out, Tensor mean, Tensor rstd,
                          Tensor inp) const {
  ZINF_ASSIGN_OR_RETURN(ScopedParam weight, ScopedParam::acquire(params, weight_));
  if (bias_ == kNone) {
    ops.rmsnorm_forward(out, rstd, inp, weight.tensor(), eps_);
    return Status::ok();
  }
  ZINF_ASSIGN_OR_RETURN(ScopedParam bias, ScopedParam::acquire(params, bias_));
  ops.layernorm_forward(out, mean, rstd, inp, weight.tensor(), bias.tensor(), eps_);
  return Status::ok();
}

Status LayerNorm::backward(device::Ops& ops, ParamSource& params, GradSink& grads, Tensor dinp, Tensor dout, Tensor inp,
                           Tensor mean, Tensor rstd) const {
  {
    // The backward pass reads the weight only; the bias is not acquired.
    ZINF_ASSIGN_OR_RETURN(ScopedParam weight, ScopedParam::acquire(params, weight_));
    ZINF_ASSIGN_OR_RETURN(Tensor dweight, grads.grad_buffer(weight_));
    if (bias_ == kNone) {
      ops.rmsnorm_backward(dinp, dweight, dout, inp, weight.tensor(), rstd);
    } else {
      ZINF_ASSIGN_OR_RETURN(Tensor dbias, grads.grad_buffer(bias_));
      ops.layernorm_backward(dinp, dweight, dbias, dout, inp, weight.tensor(), mean, rstd);
    }
  }
  ZINF_RETURN_IF_ERROR(grads.commit(weight_));
  return bias_ == kNone ? Status::ok() : grads.commit(bias_);
}

}  // namespace zinf::model
