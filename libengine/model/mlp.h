// Mlp: GPT-2's feed-forward half of a block — `<prefix>.fc` [F,C] → GELU (tanh) → `<prefix>.proj`
// [C,F], F the MLP width (4C for GPT-2). Both linears are TiledLinear, so with more than one tile their
// weights are split along the output features into separately acquired tiles. It keeps no
// activations itself: the block hands in where to save them.
#pragma once

#include <cstdint>
#include <string>

#include "libengine/core/status.h"
#include "libengine/device/ops.h"
#include "libengine/model/param_source.h"
#include "libengine/model/param_table.h"
#include "libengine/model/tiled_linear.h"

namespace zinf::model {

class Mlp {
 public:
  Mlp(ParamTable& table, const std::string& prefix, std::int64_t channels, std::int64_t ffn_hidden, bool bias,
      std::int32_t group, float proj_init_std, std::int64_t fc_tiles, std::int64_t proj_tiles);

  // Saves fc [B,T,F] (pre-activation) and act [B,T,F] = gelu(fc). When `out` is given (defined
  // data), also writes out [B,T,C] = proj(act); a backward-pass recompute leaves it undefined,
  // because proj's backward needs only act and the upstream gradient.
  Status forward(device::Ops& ops, ParamSource& params, Tensor out, Tensor fc, Tensor act, Tensor inp) const;
  // dinp [B,T,C] = the input gradient (OVERWRITTEN); parameter gradients added and committed.
  // dfc and dact [B,T,F] are scratch.
  Status backward(device::Ops& ops, ParamSource& params, GradSink& grads, Tensor dinp, Tensor dout, Tensor inp,
                  Tensor fc, Tensor act, Tensor dfc, Tensor dact) const;

 private:
  TiledLinear fc_;
  TiledLinear proj_;
};

}  // namespace zinf::model
