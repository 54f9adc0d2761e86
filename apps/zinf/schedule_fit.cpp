#include "apps/zinf/schedule_fit.h"

#include <algorithm>

#include <fmt/format.h>

namespace zinf::cli {

std::optional<std::string> fit_schedule_warmup(spec::Scenario& scenario, std::int64_t written_steps,
                                               std::string_view flag) {
  spec::LrScheduleConfig& schedule = scenario.optimizer.schedule;
  if (schedule.kind == optim::LrScheduleKind::kConstant || scenario.steps > schedule.warmup_steps) return std::nullopt;
  const std::int64_t before = schedule.warmup_steps;
  // The same fraction of the run as the scenario's (quickstart: 20 of 500 steps = 4%), rounded down,
  // and always leaving one step for the decay. written_steps >= warmup_steps (the loader checks it).
  const std::int64_t scaled = written_steps > 0 ? before * scenario.steps / written_steps : 0;
  schedule.warmup_steps = std::clamp<std::int64_t>(scaled, 0, scenario.steps - 1);
  return fmt::format(
      "note: {} runs {} steps, not more than the scenario's {}-step learning-rate warm-up; warm-up shortened to {} "
      "step{} (the scenario's {} of {} steps, scaled)",
      flag, scenario.steps, before, schedule.warmup_steps, schedule.warmup_steps == 1 ? "" : "s", before,
      written_steps);
}

}  // namespace zinf::cli
