// Attention: GPT-2's causal self-attention as a model module — the fused QKV projection
// `<prefix>.qkv` [3C,C], the causal multi-head attention kernel (device/ops.h), and the output
// projection `<prefix>.proj` [C,C] (a residual projection: initialised with the smaller std the
// caller passes). It keeps no activations itself: the block hands in where to save them.
#pragma once

#include <cstdint>
#include <string>

#include "libengine/core/status.h"
#include "libengine/device/ops.h"
#include "libengine/model/linear.h"
#include "libengine/model/param_source.h"
#include "libengine/model/param_table.h"

namespace zinf::model {

class Attention {
 public:
  Attention(ParamTable& table, const std::string& prefix, std::int64_t channels, bool qkv_bias, bool out_bias,
            std::int32_t group, float proj_init_std);

  // out [B,T,C] = proj(attention(qkv(inp))); saves qkv [B,T,3C], attn [B,T,C] (the attention
  // core's output, proj's input) and lse [B,NH,T].
  Status forward(device::Ops& ops, ParamSource& params, Tensor out, Tensor qkv, Tensor attn, Tensor lse,
                 Tensor inp) const;
  // dinp [B,T,C] = the input gradient (OVERWRITTEN) for the upstream gradient dout [B,T,C];
  // parameter gradients added and committed. dqkv [B,T,3C] and dattn [B,T,C] are scratch.
  Status backward(device::Ops& ops, ParamSource& params, GradSink& grads, Tensor dinp, Tensor dout, Tensor inp,
                  Tensor qkv, Tensor attn, Tensor lse, Tensor dqkv, Tensor dattn) const;

 private:
  Linear qkv_;
  Linear proj_;
};

}  // namespace zinf::model
