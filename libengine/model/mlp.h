// Mlp: the feed-forward half of a block, in one of two kinds (spec::MlpKind):
// - GELU (GPT-2): `<prefix>.fc` [F,C] → GELU (tanh) → `<prefix>.proj` [C,F];
// - gated SwiGLU (Llama): `<prefix>.gate` [F,C] (HF gate_proj) and `<prefix>.fc` [F,C] (HF up_proj)
//   → silu(gate) * fc → `<prefix>.proj` [C,F] (HF down_proj).
// F is the MLP width (4C for GPT-2, intermediate_size for Llama; any integer). Every linear is a
// TiledLinear, so with more than one tile its weight is split along the output features into
// separately acquired tiles (gate takes fc's tiling). It keeps no activations itself: the block
// hands in where to save them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "libengine/core/status.h"
#include "libengine/device/ops.h"
#include "libengine/model/param_source.h"
#include "libengine/model/param_table.h"
#include "libengine/model/tiled_linear.h"
#include "libengine/spec/model_shape.h"

namespace zinf::model {

class Mlp {
 public:
  Mlp(ParamTable& table, const std::string& prefix, std::int64_t channels, std::int64_t ffn_hidden, bool bias,
      std::int32_t group, float proj_init_std, std::int64_t fc_tiles, std::int64_t proj_tiles,
      spec::MlpKind kind = spec::MlpKind::kGelu);

  bool gated() const { return gate_.has_value(); }

  // Saves fc [B,T,F] (pre-activation; the up projection when gated), gate [B,T,F] (gated only;
  // ignored otherwise) and act [B,T,F] = gelu(fc) or silu(gate) * fc. When `out` is given (defined
  // data), also writes out [B,T,C] = proj(act); a backward-pass recompute leaves it undefined,
  // because proj's backward needs only act and the upstream gradient.
  Status forward(device::Ops& ops, ParamSource& params, Tensor out, Tensor fc, Tensor gate, Tensor act,
                 Tensor inp) const;
  // dinp [B,T,C] = the input gradient (OVERWRITTEN); parameter gradients added and committed.
  // dfc, dact and (gated) dgate [B,T,F] are scratch.
  Status backward(device::Ops& ops, ParamSource& params, GradSink& grads, Tensor dinp, Tensor dout, Tensor inp,
                  Tensor fc, Tensor gate, Tensor act, Tensor dfc, Tensor dgate, Tensor dact) const;

 private:
  std::optional<TiledLinear> gate_;  // declared (so added to the table) first: HF's gate, up, down order
  TiledLinear fc_;
  TiledLinear proj_;
};

}  // namespace zinf::model
