#include "libengine/model/attention.h"

namespace zinf::model {

Attention::Attention(ParamTable& table, const std::string& prefix, std::int64_t channels, bool qkv_bias, bool out_bias,
                     std::int32_t group, float proj_init_std)
    : qkv_(table, prefix + ".qkv.weight", qkv_bias ? prefix + ".qkv.bias" : std::string(), channels, 3 * channels,
           group, 0.02f),
      proj_(table, prefix + ".proj.weight", out_bias ? prefix + ".proj.bias" : std::string(), channels, channels, group,
            proj_init_std) {}

Status Attention::forward(device::Ops& ops, ParamSource& params, Tensor out, Tensor qkv, Tensor attn, Tensor lse,
                          Tensor inp) const {
  ZINF_RETURN_IF_ERROR(qkv_.forward(ops, params, qkv, 0, inp));
  ops.attention_forward(attn, lse, qkv);
  return proj_.forward(ops, params, out, 0, attn);
}

Status Attention::backward(device::Ops& ops, ParamSource& params, GradSink& grads, Tensor dinp, Tensor dout, Tensor inp,
                           Tensor qkv, Tensor attn, Tensor lse, Tensor dqkv, Tensor dattn) const {
  ZINF_RETURN_IF_ERROR(proj_.backward(ops, params, grads, dattn, device::GradMode::kOverwrite, dout, 0, attn));
  // The attention kernel accumulates into dqkv, and it is dqkv's only contribution: start from zero.
  ops.zero(dqkv);
  ops.attention_backward(dqkv, dattn, qkv, attn, lse);
  return qkv_.backward(ops, params, grads, dinp, device::GradMode::kOverwrite, dqkv, 0, inp);
}

}  // namespace zinf::model
