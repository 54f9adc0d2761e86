#include "libengine/optim/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace zinf::optim {
namespace {

// The scale is handed out as a float (it multiplies an fp32 loss); growth stops at the largest
// finite float so that a very long clean run cannot turn it into inf.
constexpr double kMaxScale = static_cast<double>(std::numeric_limits<float>::max());

}  // namespace

std::string_view loss_scaling_name(LossScaling kind) { return kind == LossScaling::kDynamic ? "dynamic" : "none"; }

Result<LossScaling> loss_scaling_from_name(std::string_view name, std::string_view field) {
  if (name == "none") return LossScaling::kNone;
  if (name == "dynamic") return LossScaling::kDynamic;
  return Status::invalid_argument(fmt::format("{}: '{}' is not a loss scaling; expected none or dynamic", field, name));
}

LossScaling default_loss_scaling(DType precision) {
  return precision == DType::kF16 ? LossScaling::kDynamic : LossScaling::kNone;
}

LossScaler::LossScaler(const LossScalerConfig& config) : config_(config) {
  state_.scale = dynamic() ? config.initial_scale : 1.0;
}

Result<LossScaler> LossScaler::create(const LossScalerConfig& config) {
  if (config.kind == LossScaling::kNone) {
    LossScalerConfig none;
    return LossScaler(none);
  }
  if (!(std::isfinite(config.min_scale) && config.min_scale > 0)) {
    return Status::invalid_argument(
        fmt::format("optimizer.loss_scale.min_scale: {} is not a positive finite number", config.min_scale));
  }
  if (!(std::isfinite(config.initial_scale) && config.initial_scale >= config.min_scale &&
        config.initial_scale <= kMaxScale)) {
    return Status::invalid_argument(
        fmt::format("optimizer.loss_scale.initial_scale: {} is not a finite number between min_scale ({}) and {:g}",
                    config.initial_scale, config.min_scale, kMaxScale));
  }
  if (config.growth_interval < 1) {
    return Status::invalid_argument(fmt::format(
        "optimizer.loss_scale.growth_interval: {} is not a positive number of steps", config.growth_interval));
  }
  if (!(std::isfinite(config.growth_factor) && config.growth_factor > 1)) {
    return Status::invalid_argument(
        fmt::format("optimizer.loss_scale.growth_factor: {} must be a finite number above 1", config.growth_factor));
  }
  if (!(config.backoff_factor > 0 && config.backoff_factor < 1)) {
    return Status::invalid_argument(fmt::format(
        "optimizer.loss_scale.backoff_factor: {} must lie strictly between 0 and 1", config.backoff_factor));
  }
  return LossScaler(config);
}

void LossScaler::update(bool found_nonfinite) {
  if (!dynamic()) return;
  if (found_nonfinite) {
    state_.scale = std::max(config_.min_scale, state_.scale * config_.backoff_factor);
    state_.clean_steps = 0;
    return;
  }
  if (++state_.clean_steps >= config_.growth_interval) {
    state_.scale = std::min(kMaxScale, state_.scale * config_.growth_factor);
    state_.clean_steps = 0;
  }
}

Status LossScaler::set_state(const LossScalerState& state) {
  if (!dynamic()) {
    if (state.scale != 1.0 || state.clean_steps != 0) {
      return Status::invalid_argument(
          fmt::format("loss scaler state: scale {} with {} clean steps cannot resume a run without loss scaling "
                      "(scale 1)",
                      state.scale, state.clean_steps));
    }
    return Status::ok();
  }
  if (!(std::isfinite(state.scale) && state.scale >= config_.min_scale && state.scale <= kMaxScale)) {
    return Status::invalid_argument(
        fmt::format("loss scaler state: scale {} is not a finite number between min_scale ({}) and {:g}", state.scale,
                    config_.min_scale, kMaxScale));
  }
  if (state.clean_steps < 0 || state.clean_steps >= config_.growth_interval) {
    return Status::invalid_argument(fmt::format("loss scaler state: clean_steps {} is outside [0, growth_interval {})",
                                                state.clean_steps, config_.growth_interval));
  }
  state_ = state;
  return Status::ok();
}

}  // namespace zinf::optim
