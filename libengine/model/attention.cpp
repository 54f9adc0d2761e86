#include "libengine/model/attention.h"

namespace zinf::model {

std::int64_t Attention::qkv_width(const spec::ModelShape& shape) { return sizing::qkv_width(shape); }

Attention::Attention(ParamTable& table, const std::string& prefix, const spec::ModelShape& shape, std::int32_t group,
                     float proj_init_std)
    : qkv_(table, prefix + ".qkv.weight", shape.qkv_bias ? prefix + ".qkv.bias" : std::string(), shape.hidden,
           qkv_width(shape), group, 0.02f),
      proj_(table, prefix + ".proj.weight", shape.attn_out_bias ? prefix + ".proj.bias" : std::string(),
            core_width(shape), shape.hidden, group, proj_init_std),
      heads_(shape.heads),
      kv_heads_(shape.kv_heads),
      head_dim_(shape.head_dim),
      rotary_dim_(shape.position == spec::PositionKind::kRotary ? spec::rotary_dim(shape) : 0) {}

Status Attention::forward(device::Ops& ops, ParamSource& params, Tensor out, Tensor qkv, Tensor attn, Tensor lse,
                          Tensor inp, const AttentionWork& work) const {
  ZINF_RETURN_IF_ERROR(qkv_.forward(ops, params, qkv, 0, inp));
  if (rotary_dim_ > 0) {
    // The backend rotates q and k: in place before its attention, or (CPU) inside the kernel's load.
    ops.attention_forward_rope(attn, lse, qkv, work.rope_cos, work.rope_sin, rope_heads());
  } else {
    ops.attention_forward(attn, lse, qkv);
  }
  return proj_.forward(ops, params, out, 0, attn);
}

Status Attention::backward(device::Ops& ops, ParamSource& params, GradSink& grads, Tensor dinp, Tensor dout, Tensor inp,
                           Tensor qkv, Tensor attn, Tensor lse, Tensor dqkv, Tensor dattn,
                           const AttentionWork& work) const {
  ZINF_RETURN_IF_ERROR(proj_.backward(ops, params, grads, dattn, device::GradMode::kOverwrite, dout, 0, attn));
  // The attention kernel accumulates into its dqkv, and it is that buffer's only contribution:
  // start from zero.
  ops.zero(dqkv);
  if (rotary_dim_ > 0) {
    // qkv as attention_forward_rope left it; the q and k gradients come back turned to the projection's.
    ops.attention_backward_rope(dqkv, dattn, qkv, attn, lse, work.rope_cos, work.rope_sin, rope_heads());
  } else {
    ops.attention_backward(dqkv, dattn, qkv, attn, lse);
  }
  return qkv_.backward(ops, params, grads, dinp, device::GradMode::kOverwrite, dqkv, 0, inp);
}

}  // namespace zinf::model
