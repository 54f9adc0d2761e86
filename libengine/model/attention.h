// Attention: the decoder's causal self-attention as a model module — the fused q|k|v projection
// `<prefix>.qkv` [(NH + 2 NKV) hd, C] (rows: the NH query heads, then the NKV key heads, then the
// NKV value heads, each head hd rows), optional rotary embedding of the query and key heads (HF's
// rotate_half layout; the CPU ops apply it inside the attention kernel's Q/K load, others in place
// on the projection's output before the attention), the causal attention kernel on that
// packed q|k|v output (grouped K/V heads read in place by each query head of their group, their
// gradients summed over the group inside the kernel) and the output projection `<prefix>.proj`
// [C, NH hd] (a residual projection: initialised with the smaller std the caller passes). GPT-2 is
// the case NKV = NH, hd = C/NH, learned positions. It keeps no activations itself: the block hands
// in where to save them and the workspace it may overwrite.
#pragma once

#include <cstdint>
#include <string>

#include "libengine/core/status.h"
#include "libengine/device/ops.h"
#include "libengine/model/linear.h"
#include "libengine/model/param_source.h"
#include "libengine/model/param_table.h"
#include "libengine/spec/model_shape.h"
#include "libengine/spec/sizing/activation_layout.h"

namespace zinf::model {

// What the attention needs besides its activations: the rotary tables (fp32 [T, rd/2], empty
// without rotary positions).
struct AttentionWork {
  Tensor rope_cos, rope_sin;
};

class Attention {
 public:
  Attention(ParamTable& table, const std::string& prefix, const spec::ModelShape& shape, std::int32_t group,
            float proj_init_std);

  // Width of the q|k|v projection's output, (NH + 2 NKV) hd, and of the attention core's, NH hd.
  static std::int64_t qkv_width(const spec::ModelShape& shape);
  static std::int64_t core_width(const spec::ModelShape& shape) { return sizing::core_width(shape); }

  // out [B,T,C] = proj(attention(rope(qkv(inp)))); saves qkv [B,T,qkv_width] (as the ops'
  // attention_forward_rope leaves it: rotated in place, or unrotated where the rotation is fused),
  // attn [B,T,NH hd] (the attention core's output, proj's input) and lse [B,NH,T].
  Status forward(device::Ops& ops, ParamSource& params, Tensor out, Tensor qkv, Tensor attn, Tensor lse, Tensor inp,
                 const AttentionWork& work) const;
  // dinp [B,T,C] = the input gradient (OVERWRITTEN) for the upstream gradient dout [B,T,C];
  // parameter gradients added and committed. dqkv [B,T,qkv_width] and dattn [B,T,NH hd] are scratch.
  Status backward(device::Ops& ops, ParamSource& params, GradSink& grads, Tensor dinp, Tensor dout, Tensor inp,
                  Tensor qkv, Tensor attn, Tensor lse, Tensor dqkv, Tensor dattn, const AttentionWork& work) const;

 private:
  device::RopeHeads rope_heads() const { return {heads_ + kv_heads_, head_dim_, rotary_dim_}; }

  Linear qkv_;
  Linear proj_;
  std::int64_t heads_, kv_heads_, head_dim_;
  std::int64_t rotary_dim_;  // 0: learned positions, no rotation
};

}  // namespace zinf::model
