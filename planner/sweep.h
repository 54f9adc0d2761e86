// Sweeps: one plan per point of a grid of inputs (`zinf plan --sweep params=1B..100T --nodes 1,2,4`).
//
// A dimension is written key=values, values being a comma list ("1,2,4"), a range ("1..64") or a
// range with a step ("1..64:x2" multiplies, "1..64:+8" adds). Default steps: 1-2-5 per decade for
// params ("1B..100T" = 1B, 2B, 5B, 10B, ... 100T), x2 for everything else. Keys: params, nodes,
// gpus-per-node, micro-batch, seq, tiling, ckpt-interval.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "libengine/core/status.h"
#include "planner/planner.h"

namespace zinf::planner {

enum class SweepKey { kParams, kNodes, kGpusPerNode, kMicroBatch, kSeq, kTiling, kCkptInterval };

std::string_view sweep_key_name(SweepKey key);  // "params", "nodes", ...

struct SweepDimension {
  SweepKey key = SweepKey::kParams;
  std::vector<std::uint64_t> values;  // ascending, no duplicates
};

inline constexpr std::size_t kMaxSweepPoints = 1'000'000;

// "params=1B..100T" → {kParams, [1e9, 2e9, 5e9, ...]}. `field` names the flag in errors.
Result<SweepDimension> parse_sweep_dimension(std::string_view text, std::string_view field);
// Only the values part ("1,2,4", "1..64:x2") of a known key, for flags such as --nodes.
Result<std::vector<std::uint64_t>> parse_sweep_values(SweepKey key, std::string_view text, std::string_view field);

struct SweepPoint {
  PlanInput input;  // the base input with this point's values applied (shape from the rule for params)
  bool feasible = false;
  spec::StatePlacement placement;
  Prediction prediction;  // zeros when infeasible
  Resource bottleneck = Resource::kCompute;
  double worst_fraction = 0;  // used/capacity of the fullest tier of the chosen (or closest) placement
};

// Runs every point of the cross product, first dimension slowest. Fails on invalid input
// (including more than kMaxSweepPoints points) naming the dimension (field::kSweep as `name_field`
// calls it).
Result<std::vector<SweepPoint>> run_sweep(const PlanInput& base, const std::vector<SweepDimension>& dimensions,
                                          const FieldNamer& name_field = own_field_name);

}  // namespace zinf::planner
