#include "libengine/model/mlp.h"

namespace zinf::model {
namespace {

std::optional<TiledLinear> make_gate(ParamTable& table, const std::string& prefix, std::int64_t channels,
                                     std::int64_t ffn_hidden, bool bias, std::int32_t group, std::int64_t tiles,
                                     spec::MlpKind kind) {
  if (kind != spec::MlpKind::kGated) return std::nullopt;
  return TiledLinear(table, prefix + ".gate", channels, ffn_hidden, bias, group, 0.02f, tiles);
}

}  // namespace

// The parameters are added in HF's module order for a gated MLP (gate, up, down), fc first for GELU.
Mlp::Mlp(ParamTable& table, const std::string& prefix, std::int64_t channels, std::int64_t ffn_hidden, bool bias,
         std::int32_t group, float proj_init_std, std::int64_t fc_tiles, std::int64_t proj_tiles, spec::MlpKind kind)
    : gate_(make_gate(table, prefix, channels, ffn_hidden, bias, group, fc_tiles, kind)),
      fc_(table, prefix + ".fc", channels, ffn_hidden, bias, group, 0.02f, fc_tiles),
      proj_(table, prefix + ".proj", ffn_hidden, channels, bias, group, proj_init_std, proj_tiles) {}

Status Mlp::forward(device::Ops& ops, ParamSource& params, Tensor out, Tensor fc, Tensor gate, Tensor act,
                    Tensor inp) const {
  if (gate_) {
    ZINF_RETURN_IF_ERROR(gate_->forward(ops, params, gate, inp));
    ZINF_RETURN_IF_ERROR(fc_.forward(ops, params, fc, inp));
    ops.swiglu_forward(act, gate, fc);
  } else {
    ZINF_RETURN_IF_ERROR(fc_.forward(ops, params, fc, inp));
    ops.gelu_forward(act, fc);
  }
  if (out.data() == nullptr) return Status::ok();
  return proj_.forward(ops, params, out, act);
}

Status Mlp::backward(device::Ops& ops, ParamSource& params, GradSink& grads, Tensor dinp, Tensor dout, Tensor inp,
                     Tensor fc, Tensor gate, Tensor act, Tensor dfc, Tensor dgate, Tensor dact) const {
  ZINF_RETURN_IF_ERROR(proj_.backward(ops, params, grads, dact, device::GradMode::kOverwrite, dout, act));
  // The activation kernels accumulate into their input gradients, and it is those buffers' only
  // contribution: start from zero.
  ops.zero(dfc);
  if (!gate_) {
    ops.gelu_backward(dfc, fc, dact);
    return fc_.backward(ops, params, grads, dinp, device::GradMode::kOverwrite, dfc, inp);
  }
  ops.zero(dgate);
  ops.swiglu_backward(dgate, dfc, dact, gate, fc);
  ZINF_RETURN_IF_ERROR(fc_.backward(ops, params, grads, dinp, device::GradMode::kOverwrite, dfc, inp));
  return gate_->backward(ops, params, grads, dinp, device::GradMode::kAccumulate, dgate, inp);
}

}  // namespace zinf::model
