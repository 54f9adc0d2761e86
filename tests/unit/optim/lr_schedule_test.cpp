// LrSchedule at points whose rates are known in closed form: warm-up ramps, the cosine's midpoint
// and end, the linear decay's midpoint, the floor after total_steps; and field-named validation.
#include "libengine/optim/lr_schedule.h"

#include <cmath>
#include <numbers>
#include <string>

#include "tests/catch.h"

namespace zinf::optim {
namespace {

LrSchedule make(LrScheduleKind kind, double lr, std::int64_t warmup, std::int64_t total, double min_ratio) {
  auto schedule = LrSchedule::create(
      {.kind = kind, .lr = lr, .warmup_steps = warmup, .total_steps = total, .min_lr_ratio = min_ratio});
  REQUIRE(schedule.is_ok());
  return *schedule;
}

TEST_CASE("constant schedule: the rate, after a linear warm-up when one is set") {
  const LrSchedule plain = make(LrScheduleKind::kConstant, 3e-4, 0, 0, 0.1);
  CHECK(plain.lr_at(0) == 3e-4);
  CHECK(plain.lr_at(123456) == 3e-4);
  const LrSchedule warm = make(LrScheduleKind::kConstant, 1.0, 4, 0, 0.1);
  CHECK(warm.lr_at(0) == 0.25);
  CHECK(warm.lr_at(1) == 0.5);
  CHECK(warm.lr_at(3) == 1.0);
  CHECK(warm.lr_at(4) == 1.0);
  CHECK(warm.lr_at(1000) == 1.0);
}

TEST_CASE("cosine schedule: warm-up, peak, midpoint, quarter point, floor at and after total_steps") {
  // 10 warm-up steps, then 100 steps of decay from 2.0 to 0.2.
  const LrSchedule s = make(LrScheduleKind::kCosine, 2.0, 10, 110, 0.1);
  CHECK(s.lr_at(0) == Approx(0.2).epsilon(1e-15));
  CHECK(s.lr_at(4) == Approx(1.0).epsilon(1e-15));
  CHECK(s.lr_at(9) == Approx(2.0).epsilon(1e-15));
  CHECK(s.lr_at(10) == Approx(2.0).epsilon(1e-15));
  CHECK(s.lr_at(60) == Approx(1.1).epsilon(1e-14));                                   // cos(pi/2) = 0
  CHECK(s.lr_at(35) == Approx(0.2 + 1.8 * (1 + std::sqrt(0.5)) / 2).epsilon(1e-14));  // cos(pi/4)
  CHECK(s.lr_at(110) == Approx(0.2).epsilon(1e-14));
  CHECK(s.lr_at(5000) == Approx(0.2).epsilon(1e-14));
  // Monotone non-increasing after warm-up.
  for (std::int64_t step = 10; step < 120; ++step) CHECK(s.lr_at(step + 1) <= s.lr_at(step));
}

TEST_CASE("linear schedule: straight line from the peak to min_lr_ratio * lr") {
  const LrSchedule s = make(LrScheduleKind::kLinear, 1.0, 0, 200, 0.0);
  CHECK(s.lr_at(0) == 1.0);
  CHECK(s.lr_at(50) == Approx(0.75).epsilon(1e-15));
  CHECK(s.lr_at(100) == Approx(0.5).epsilon(1e-15));
  CHECK(s.lr_at(200) == 0.0);
  CHECK(s.lr_at(300) == 0.0);
  const LrSchedule floor = make(LrScheduleKind::kLinear, 1.0, 20, 120, 0.5);
  CHECK(floor.lr_at(19) == 1.0);
  CHECK(floor.lr_at(70) == Approx(0.75).epsilon(1e-15));
  CHECK(floor.lr_at(120) == Approx(0.5).epsilon(1e-15));
}

TEST_CASE("schedule names round-trip and unknown names are refused naming the field") {
  for (LrScheduleKind kind : {LrScheduleKind::kConstant, LrScheduleKind::kCosine, LrScheduleKind::kLinear}) {
    auto parsed = lr_schedule_kind_from_name(lr_schedule_kind_name(kind), "optimizer.schedule.kind");
    REQUIRE(parsed.is_ok());
    CHECK(*parsed == kind);
  }
  auto bad = lr_schedule_kind_from_name("exponential", "optimizer.schedule.kind");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message() ==
        "optimizer.schedule.kind: 'exponential' is not a learning-rate schedule; expected constant, cosine or linear");
}

TEST_CASE("invalid schedules are refused with the field named") {
  auto message = [](LrScheduleConfig config) {
    auto schedule = LrSchedule::create(config);
    REQUIRE_FALSE(schedule.is_ok());
    CHECK(schedule.status().code() == ErrorCode::kInvalidArgument);
    return schedule.status().message();
  };
  CHECK(message({.lr = 0}).starts_with("optimizer.lr: 0 "));
  CHECK(message({.lr = NAN}).starts_with("optimizer.lr: "));
  CHECK(message({.warmup_steps = -5}).starts_with("optimizer.schedule.warmup_steps: -5 is negative"));
  CHECK(message({.min_lr_ratio = 1.5}).starts_with("optimizer.schedule.min_lr_ratio: 1.5 is outside [0, 1]"));
  const std::string total = message({.kind = LrScheduleKind::kCosine, .warmup_steps = 100, .total_steps = 100});
  CHECK(total.starts_with("optimizer.schedule.total_steps: 100 must exceed optimizer.schedule.warmup_steps (100)"));
  // A constant schedule does not need total_steps.
  CHECK(LrSchedule::create({.kind = LrScheduleKind::kConstant, .warmup_steps = 100, .total_steps = 0}).is_ok());
}

}  // namespace
}  // namespace zinf::optim
