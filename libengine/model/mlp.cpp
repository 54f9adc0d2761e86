#include "libengine/model/mlp.h"

namespace zinf::model {

Mlp::Mlp(ParamTable& table, const std::string& prefix, std::int64_t channels, std::int64_t ffn_hidden, bool bias,
         std::int32_t group, float proj_init_std, std::int64_t fc_tiles, std::int64_t proj_tiles)
    : fc_(table, prefix + ".fc", channels, ffn_hidden, bias, group, 0.02f, fc_tiles),
      proj_(table, prefix + ".proj", ffn_hidden, channels, bias, group, proj_init_std, proj_tiles) {}

Status Mlp::forward(device::Ops& ops, ParamSource& params, Tensor out, Tensor fc, Tensor act, Tensor inp) const {
  ZINF_RETURN_IF_ERROR(fc_.forward(ops, params, fc, inp));
  ops.gelu_forward(act, fc);
  if (out.data() == nullptr) return Status::ok();
  return proj_.forward(ops, params, out, act);
}

Status Mlp::backward(device::Ops& ops, ParamSource& params, GradSink& grads, Tensor dinp, Tensor dout, Tensor inp,
                     Tensor fc, Tensor act, Tensor dfc, Tensor dact) const {
  ZINF_RETURN_IF_ERROR(proj_.backward(ops, params, grads, dact, device::GradMode::kOverwrite, dout, act));
  // The GELU kernel accumulates into dfc, and it is dfc's only contribution: start from zero.
  ops.zero(dfc);
  ops.gelu_backward(dfc, fc, dact);
  return fc_.backward(ops, params, grads, dinp, device::GradMode::kOverwrite, dfc, inp);
}

}  // namespace zinf::model
