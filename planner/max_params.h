// Largest model per strategy: for each training strategy, the biggest GPT-like model (shape rule
// of shape_rule.h) whose states fit the hardware, found by bisection on the parameter count.
#pragma once

#include <cstdint>
#include <vector>

#include "libengine/core/status.h"
#include "planner/planner.h"

namespace zinf::planner {

struct MaxParamsResult {
  Strategy strategy = Strategy::kAuto;
  std::uint64_t max_params = 0;  // 0: not even the smallest shape fits
  bool at_search_limit = false;  // the search ceiling (kMaxParamsSearchLimit) fits: the true maximum is larger
  spec::ModelShape shape;        // the shape at max_params
  spec::StatePlacement placement;
  std::string limit;      // what stops the next size up, in words ("gpu memory per GPU")
  Prediction prediction;  // at max_params
};

inline constexpr double kMaxParamsSearchLimit = 1e16;

// `base` supplies training and hardware (its shape and strategy are ignored). Fails only on
// invalid input.
Result<std::vector<MaxParamsResult>> max_params_per_strategy(const PlanInput& base,
                                                             const std::vector<Strategy>& strategies);

}  // namespace zinf::planner
