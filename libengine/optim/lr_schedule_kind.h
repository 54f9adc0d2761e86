// LrScheduleKind: the shape of the learning rate over a run (lr_schedule.h). A header of its own,
// with no dependencies, so that the scenario (spec/, which builds nothing) names the schedule with
// the same enum the optimizer's LrSchedule takes: one set of values, no translation.
#pragma once

#include <string_view>

namespace zinf::optim {

enum class LrScheduleKind { kConstant, kCosine, kLinear };

// "constant", "cosine", "linear": the names a scenario's optimizer.schedule.kind takes.
constexpr std::string_view lr_schedule_kind_name(LrScheduleKind kind) {
  switch (kind) {
    case LrScheduleKind::kConstant:
      return "constant";
    case LrScheduleKind::kCosine:
      return "cosine";
    case LrScheduleKind::kLinear:
      return "linear";
  }
  return "?";
}

}  // namespace zinf::optim
