// How `zinf plan` names the planner's fields: the one table from planner::field names (and the
// spec's training fields) to the flags a user types, and suggestions written as command lines.
// The planner never sees a flag; everything it says reaches the user through this table.
#pragma once

#include <string>
#include <string_view>

#include "libengine/spec/scenario.h"
#include "planner/planner.h"

namespace zinf::cli {

// The flag for a planner field ("nodes" -> "--nodes"); a field the table does not know is
// returned unchanged, so a new planner field shows its own name rather than nothing.
std::string plan_flag_for(std::string_view field);

// A suggestion as the flags that apply it: "--tiling 2 --nodes 10".
std::string suggestion_command_line(const planner::Suggestion& suggestion);

// The planner's shape rule as a scenario's ShapeResolver: its errors name "scenario.model.params"
// (and the explicit shape as model.layers/hidden/heads).
spec::ShapeResolver scenario_shape_resolver();

}  // namespace zinf::cli
