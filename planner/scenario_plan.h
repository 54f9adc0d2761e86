// The planner's input for a `zinf train` scenario: the scenario's model, sequence, batch, precision,
// activation checkpointing, tiling and clipping as a TrainingSpec, its "zero" section as pinned
// placements and a strategy, and its overlap_optimizer switch as the schedule. `zinf plan
// --scenario` and the train record's plan section both plan a scenario through this one function.
// Pure data conversion; the hardware is the caller's.
#pragma once

#include "libengine/spec/scenario.h"
#include "planner/planner.h"

namespace zinf::planner {

// `ranks`: data-parallel ranks the scenario runs on (its batch is split over them).
PlanInput plan_input_for(const spec::Scenario& scenario, const HardwareProfile& hardware, std::int64_t ranks = 1);

}  // namespace zinf::planner
