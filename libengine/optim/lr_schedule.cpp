#include "libengine/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "libengine/core/check.h"

namespace zinf::optim {

Result<LrScheduleKind> lr_schedule_kind_from_name(std::string_view name, std::string_view field) {
  for (LrScheduleKind kind : {LrScheduleKind::kConstant, LrScheduleKind::kCosine, LrScheduleKind::kLinear}) {
    if (name == lr_schedule_kind_name(kind)) return kind;
  }
  return Status::invalid_argument(
      fmt::format("{}: '{}' is not a learning-rate schedule; expected constant, cosine or linear", field, name));
}

Result<LrSchedule> LrSchedule::create(const LrScheduleConfig& config) {
  if (!(std::isfinite(config.lr) && config.lr > 0)) {
    return Status::invalid_argument(fmt::format("optimizer.lr: {} is not a positive finite learning rate", config.lr));
  }
  if (config.warmup_steps < 0) {
    return Status::invalid_argument(
        fmt::format("optimizer.schedule.warmup_steps: {} is negative; expected 0 or more steps", config.warmup_steps));
  }
  if (!(config.min_lr_ratio >= 0 && config.min_lr_ratio <= 1)) {
    return Status::invalid_argument(
        fmt::format("optimizer.schedule.min_lr_ratio: {} is outside [0, 1]; it is the final rate as a fraction of "
                    "optimizer.lr",
                    config.min_lr_ratio));
  }
  if (config.kind != LrScheduleKind::kConstant && config.total_steps <= config.warmup_steps) {
    return Status::invalid_argument(
        fmt::format("optimizer.schedule.total_steps: {} must exceed optimizer.schedule.warmup_steps ({}) for a {} "
                    "schedule, which decays over the steps between them",
                    config.total_steps, config.warmup_steps, lr_schedule_kind_name(config.kind)));
  }
  return LrSchedule(config);
}

double LrSchedule::lr_at(std::int64_t step) const {
  ZINF_CHECK(step >= 0, "lr_at: negative step");
  const LrScheduleConfig& c = config_;
  if (step < c.warmup_steps) {
    return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps);
  }
  if (c.kind == LrScheduleKind::kConstant) return c.lr;
  const double progress = std::clamp(
      static_cast<double>(step - c.warmup_steps) / static_cast<double>(c.total_steps - c.warmup_steps), 0.0, 1.0);
  const double min_lr = c.min_lr_ratio * c.lr;
  const double decay =
      c.kind == LrScheduleKind::kCosine ? 0.5 * (1.0 + std::cos(std::numbers::pi * progress)) : 1.0 - progress;
  return min_lr + (c.lr - min_lr) * decay;
}

}  // namespace zinf::optim
