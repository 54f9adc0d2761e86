// Plan views: how `zinf plan` shows a plan, a max-params table and a sweep — as a Document for
// people (table/md), the versioned JSON record, and a flat CSV table in base units. Every figure
// shown is formatted from the planner's structs; nothing is recomputed here.
#pragma once

#include <vector>

#include "apps/zinf/output.h"
#include "planner/max_params.h"
#include "planner/planner.h"
#include "planner/sweep.h"

namespace zinf::cli {

// Below this share of a tier's capacity left free, a plan that fits on paper may not in practice
// (allocator fragmentation, the CUDA context, communication buffers are not modelled).
inline constexpr double kMinHeadroom = 0.05;
// One line per tier of a feasible plan that leaves less than kMinHeadroom of it free: "gpu: 96.1% of
// 80.0 GiB used, under 5% headroom; ...". Empty for an infeasible plan (it says so itself).
std::vector<std::string> headroom_warnings(const planner::Plan& plan);

// `hardware_defaulted`: the user gave no --hw, so the view says which profile was assumed.
// `started` (cli::Io::started) is where the record's "conditions" begin.
Rendered render_plan(const planner::Plan& plan, bool hardware_defaulted, const reports::ConditionsSnapshot& started);
Rendered render_max_params(const planner::PlanInput& base, const std::vector<planner::MaxParamsResult>& results,
                           const reports::ConditionsSnapshot& started);
Rendered render_sweep(const std::vector<planner::SweepDimension>& dimensions,
                      const std::vector<planner::SweepPoint>& points, const reports::ConditionsSnapshot& started);

}  // namespace zinf::cli
