// LossScaler: no scaling stays at 1 whatever happens; dynamic scaling halves on overflow (never
// below the minimum) and doubles after growth_interval clean steps, with the run of clean steps
// reset by an overflow; state save/restore; field-named validation.
#include "libengine/optim/loss_scaler.h"

#include <cmath>

#include "tests/catch.h"

namespace zinf::optim {
namespace {

TEST_CASE("no loss scaling: scale 1, unchanged by overflow or clean steps") {
  LossScaler scaler;
  CHECK_FALSE(scaler.dynamic());
  CHECK(scaler.scale() == 1.0f);
  scaler.update(true);
  scaler.update(false);
  CHECK(scaler.scale() == 1.0f);
  auto created = LossScaler::create({.kind = LossScaling::kNone, .initial_scale = 1024});
  REQUIRE(created.is_ok());
  CHECK(created->scale() == 1.0f);  // the other fields are ignored without dynamic scaling
  CHECK(default_loss_scaling(DType::kF16) == LossScaling::kDynamic);
  CHECK(default_loss_scaling(DType::kBF16) == LossScaling::kNone);
  CHECK(default_loss_scaling(DType::kF32) == LossScaling::kNone);
}

TEST_CASE("dynamic loss scaling: starts at 2^16, backs off on overflow, grows after the interval") {
  auto created = LossScaler::create({.kind = LossScaling::kDynamic, .growth_interval = 3});
  REQUIRE(created.is_ok());
  LossScaler scaler = *created;
  CHECK(scaler.dynamic());
  CHECK(scaler.scale() == 65536.0f);
  scaler.update(true);
  CHECK(scaler.scale() == 32768.0f);
  scaler.update(false);
  scaler.update(false);
  CHECK(scaler.scale() == 32768.0f);
  scaler.update(true);  // resets the run of clean steps
  CHECK(scaler.scale() == 16384.0f);
  scaler.update(false);
  scaler.update(false);
  CHECK(scaler.scale() == 16384.0f);
  scaler.update(false);  // third clean step in a row
  CHECK(scaler.scale() == 32768.0f);
  CHECK(scaler.state().clean_steps == 0);
  scaler.update(false);
  CHECK(scaler.state().clean_steps == 1);
}

TEST_CASE("dynamic loss scaling never goes below min_scale") {
  LossScaler scaler = LossScaler::create({.kind = LossScaling::kDynamic, .initial_scale = 8, .min_scale = 2}).value();
  scaler.update(true);
  CHECK(scaler.scale() == 4.0f);
  scaler.update(true);
  CHECK(scaler.scale() == 2.0f);
  scaler.update(true);
  CHECK(scaler.scale() == 2.0f);
  CHECK(scaler.min_scale() == 2.0);
}

TEST_CASE("loss scaler state round-trips and impossible states are refused") {
  LossScaler scaler = LossScaler::create({.kind = LossScaling::kDynamic, .growth_interval = 10}).value();
  scaler.update(true);
  scaler.update(false);
  const LossScalerState saved = scaler.state();
  CHECK(saved.scale == 32768.0);
  CHECK(saved.clean_steps == 1);
  LossScaler resumed = LossScaler::create({.kind = LossScaling::kDynamic, .growth_interval = 10}).value();
  REQUIRE(resumed.set_state(saved).is_ok());
  CHECK(resumed.scale() == 32768.0f);
  for (int i = 0; i < 9; ++i) resumed.update(false);
  CHECK(resumed.scale() == 65536.0f);  // 1 + 9 clean steps reach the interval

  CHECK_FALSE(resumed.set_state({.scale = 0.5, .clean_steps = 0}).is_ok());  // below min_scale 1
  CHECK_FALSE(resumed.set_state({.scale = INFINITY, .clean_steps = 0}).is_ok());
  CHECK_FALSE(resumed.set_state({.scale = 4, .clean_steps = 10}).is_ok());
  LossScaler none;
  CHECK(none.set_state({.scale = 1, .clean_steps = 0}).is_ok());
  CHECK_FALSE(none.set_state({.scale = 1024, .clean_steps = 0}).is_ok());
}

TEST_CASE("invalid dynamic loss scaling settings are refused with the field named") {
  auto message = [](LossScalerConfig config) {
    config.kind = LossScaling::kDynamic;
    auto scaler = LossScaler::create(config);
    REQUIRE_FALSE(scaler.is_ok());
    CHECK(scaler.status().code() == ErrorCode::kInvalidArgument);
    return scaler.status().message();
  };
  CHECK(message({.growth_interval = 0}).starts_with("optimizer.loss_scale.growth_interval: 0 "));
  CHECK(message({.growth_factor = 1}).starts_with("optimizer.loss_scale.growth_factor: 1 "));
  CHECK(message({.backoff_factor = 1}).starts_with("optimizer.loss_scale.backoff_factor: 1 "));
  CHECK(message({.min_scale = 0}).starts_with("optimizer.loss_scale.min_scale: 0 "));
  CHECK(message({.initial_scale = 0.5}).starts_with("optimizer.loss_scale.initial_scale: 0.5 "));
  CHECK(loss_scaling_from_name("dynamic", "f").value() == LossScaling::kDynamic);
  CHECK(loss_scaling_from_name("static", "optimizer.loss_scale.kind").status().message() ==
        "optimizer.loss_scale.kind: 'static' is not a loss scaling; expected none or dynamic");
}

}  // namespace
}  // namespace zinf::optim
