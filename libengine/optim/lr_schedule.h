// LrSchedule: the learning rate of each optimizer step — constant, cosine or linear decay, each
// after an optional linear warm-up. A pure function of the 0-based step number, so a resumed run
// gets the same rates as an uninterrupted one without any state in the checkpoint.
//
//   warm-up   step < warmup_steps:  lr * (step + 1) / warmup_steps   (never 0 on the first step)
//   constant  lr
//   cosine    min + (lr - min) * (1 + cos(pi * p)) / 2
//   linear    min + (lr - min) * (1 - p)
// where p = (step - warmup_steps) / (total_steps - warmup_steps), clamped to [0, 1] (so the rate
// stays at min = min_lr_ratio * lr after total_steps), as nanoGPT and Megatron schedule it.
// What it is not: an optimizer, or a schedule of anything but the rate (beta, weight decay).
#pragma once

#include <cstdint>
#include <string_view>

#include "libengine/core/status.h"
#include "libengine/optim/lr_schedule_kind.h"

namespace zinf::optim {

// The kind named `name`; anything else is InvalidArgument naming `field` and the allowed names.
Result<LrScheduleKind> lr_schedule_kind_from_name(std::string_view name, std::string_view field);

struct LrScheduleConfig {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  double lr = 1e-3;               // peak rate, reached at the end of warm-up
  std::int64_t warmup_steps = 0;  // 0: no warm-up
  std::int64_t total_steps = 0;   // where decay ends (cosine, linear); unused by constant
  double min_lr_ratio = 0.1;      // the rate after decay, as a fraction of lr (cosine, linear)
};

class LrSchedule {
 public:
  // Validates `config`. Errors name the field ("optimizer.schedule.warmup_steps: -5 is negative;
  // expected 0 or more steps"): lr must be positive and finite, warmup_steps >= 0, min_lr_ratio in
  // [0, 1], and for cosine and linear total_steps > warmup_steps.
  static Result<LrSchedule> create(const LrScheduleConfig& config);

  // The rate of 0-based step `step` (>= 0). Thread-safe (const, no state).
  double lr_at(std::int64_t step) const;
  const LrScheduleConfig& config() const { return config_; }

 private:
  explicit LrSchedule(const LrScheduleConfig& config) : config_(config) {}
  LrScheduleConfig config_;
};

}  // namespace zinf::optim
