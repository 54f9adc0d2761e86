// OperatorTiling: into how many tiles (memory-centric tiling, ZeRO-Infinity §5.1.3) each tileable
// operator of the GPT model is split — the MLP's two linears of every block and the vocabulary
// projection (the untied head) — and the rule behind `"tiling": "auto"`, which picks per operator
// the smallest number of tiles whose working set fits the device budget for gathered parameters.
//
// The token table wte is tiled over the vocabulary too (for small hidden sizes it and the head are
// the largest operators); with tied embeddings the head reads the same tiles.
// The working set of a tiled operator is one tile's weight, gathered on the device in the storage
// precision while it runs (its fp32 gradient is drawn from the gradient pool, not this budget).
// The parameter coordinator needs the two largest gathered parameters to fit zero.max_live_bytes
// at once (a tile is acquired while the previous one may still be in flight), so auto picks, per
// operator, the smallest t with 2 · bytes(largest tile) <= max_live_bytes, the largest tile being
// ceil(out_features / t) rows of in_features, its element count padded to 32 as the partitioner
// pads slices. Every other gathered parameter (attention weights, the position table) is not
// tiled and must fit half the budget by itself; auto says which does not.
// With parameters resident on the device (stage < 3 or zero.params "device") tiling cannot shrink
// the working set (the whole model is there), so auto leaves every operator untiled.
// Pure data and arithmetic: builds nothing.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "libengine/core/status.h"
#include "libengine/spec/model_shape.h"
#include "libengine/spec/zero_config.h"

namespace zinf::spec {

struct OperatorTiling {
  std::int64_t mlp_fc = 1;     // blocks.*.mlp.fc (and mlp.gate, gated MLPs) [F,C], split over its F outputs
  std::int64_t mlp_proj = 1;   // blocks.*.mlp.proj  [C,F], split over its C outputs
  std::int64_t head = 1;       // the vocabulary projection [V,C]: head.weight, or wte when tied
  std::int64_t embedding = 1;  // the token table wte [V,C], split over the vocabulary
  bool operator==(const OperatorTiling&) const = default;
  // A scenario's integer `tiling`: the MLP linears and the untied head (what it always split); the
  // token table (and so the tied head) stays whole.
  static OperatorTiling uniform(std::int64_t tiles, bool tied_embeddings) {
    return {tiles, tiles, tied_embeddings ? 1 : tiles, 1};
  }
};

// Checks each factor against its operator: 1..out_features, and head == embedding with tied
// embeddings (one table). Errors name `field` ("tiling").
Status validate_tiling(const OperatorTiling& tiling, const ModelShape& shape, std::string_view field);

// The bytes the coordinator gathers for the largest of `tiles` tiles of an [out, in] weight.
std::uint64_t largest_tile_bytes(std::int64_t out_features, std::int64_t in_features, std::int64_t tiles,
                                 std::size_t element_bytes);

// `"tiling": "auto"` for parameters gathered per operator under `max_live_bytes`: per operator the
// smallest t in 1..out_features with 2 · largest_tile_bytes <= max_live_bytes. InvalidArgument
// naming `field` when an operator cannot fit even one row per tile, or when a parameter that is not
// tiled (named in the message) exceeds half the budget. Precondition: validate(shape) is ok.
Result<OperatorTiling> choose_tiling(const ModelShape& shape, std::size_t element_bytes, std::uint64_t max_live_bytes,
                                     std::string_view field);

// What a run's tiling was and why, for the start-of-run line: "auto: mlp.fc 4, mlp.proj 1, head 8
// (each tile at most half of zero.max_live_bytes 8.00 MiB)", "auto: every operator untiled
// (parameters resident on the device)", "4: mlp.fc 4, mlp.proj 4, head 1".
std::string describe_choice(const OperatorTiling& tiling, bool automatic, const ZeroConfig& zero);
// "mlp.fc 4, mlp.proj 1, head 8, embedding 8".
std::string describe(const OperatorTiling& tiling);
// {"mlp_fc": 4, "mlp_proj": 1, "head": 8, "embedding": 8}
nlohmann::json to_json(const OperatorTiling& tiling);

}  // namespace zinf::spec
