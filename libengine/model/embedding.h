// Embedding: the input layer, token embedding plus (GPT-2) learned position embedding
// (out[b, t] = wte[tokens[b, t]] + wpe[t]). Owns the parameters `wte` [V,C] and `wpe` [maxT,C]
// (none with rotary positions: then the caller passes a zero table in wpe's place, so that the
// same kernel writes out = wte[tokens] + 0 exactly);
// with tied embeddings the output head reads `wte` too, and this module commits its gradient last.
// With `tiles` > 1 the token table is split along the vocabulary (memory-centric tiling) into
// `wte.tile{k}` [V_k, C] covering rows [k·V/tiles, (k+1)·V/tiles), acquired one at a time; every
// position is written once by the tile holding its token, so the output and the gradients are
// bit-identical to the untiled table's. Not the head: see Gpt.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "libengine/core/status.h"
#include "libengine/device/ops.h"
#include "libengine/model/param_source.h"
#include "libengine/model/param_table.h"

namespace zinf::model {

class Embedding {
 public:
  // Adds wte [vocab, channels] (or its `tiles` tiles, 1 <= tiles <= vocab) and wpe
  // [max_positions, channels] (N(0, 0.02), weight decay, group 0).
  // Without `positions` there is no wpe (rotary models).
  Embedding(ParamTable& table, std::int64_t vocab, std::int64_t max_positions, std::int64_t channels,
            std::int64_t tiles = 1, bool positions = true);

  // The token table's tiles in vocabulary order (one: `wte`) and the first row of each.
  const std::vector<ParamId>& wte_tiles() const { return wte_; }
  const std::vector<std::int64_t>& tile_begins() const { return begins_; }
  ParamId wpe() const { return wpe_; }  // kNoPositions without positions
  bool has_positions() const { return wpe_ != kNoPositions; }
  static constexpr ParamId kNoPositions = -1;

  // out [B,T,C] = wte[tokens] + wpe[0:T]. tokens: B*T ids < vocab in device memory. Acquires and
  // releases both tables; fails only when acquiring does. zero_positions: without wpe, a [>=T,C]
  // zero table in the compute dtype (ignored otherwise).
  Status forward(device::Ops& ops, ParamSource& params, Tensor out, std::span<const std::int32_t> tokens,
                 Tensor zero_positions = Tensor()) const;
  // Adds dout's contributions to d(wte) and d(wpe), then commits both: the embedding is the last
  // module of the backward pass, so nothing else adds to them afterwards (the tied head adds its
  // part to wte's buffer earlier and leaves the commit to this call).
  Status backward(device::Ops& ops, GradSink& grads, Tensor dout, std::span<const std::int32_t> tokens) const;

 private:
  std::int64_t vocab_;
  std::vector<ParamId> wte_;
  std::vector<std::int64_t> begins_;
  ParamId wpe_;
};

}  // namespace zinf::model
