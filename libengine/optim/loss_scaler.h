// LossScaler: the factor the loss is multiplied by before backward so that small fp16 gradients do
// not flush to zero, and its dynamic adjustment (PyTorch GradScaler / DeepSpeed semantics):
//   none     scale 1, never changes, never asks for a skipped step (fp32 and bf16, whose exponent
//            range makes scaling unnecessary)
//   dynamic  starts at initial_scale (2^16); after growth_interval consecutive steps with finite
//            gradients it multiplies by growth_factor (2); a step with inf/NaN gradients is skipped
//            by the optimizer and the scale multiplied by backoff_factor (0.5), never below
//            min_scale (1), and the run of clean steps starts over.
// The optimizer divides the gradients by scale() again (optim/adam_optimizer.h).
// What it is not: the detector of non-finite gradients (the optimizer finds them while computing
// the global norm) or thread-safe (one training loop drives it).
#pragma once

#include <cstdint>
#include <string_view>

#include "libengine/core/dtype.h"
#include "libengine/core/status.h"

namespace zinf::optim {

enum class LossScaling { kNone, kDynamic };

// "none", "dynamic".
std::string_view loss_scaling_name(LossScaling kind);
// The kind named `name`; anything else is InvalidArgument naming `field` and the allowed names.
Result<LossScaling> loss_scaling_from_name(std::string_view name, std::string_view field);
// The usual choice for a compute precision: dynamic for fp16, none for fp32 and bf16.
LossScaling default_loss_scaling(DType precision);

struct LossScalerConfig {
  LossScaling kind = LossScaling::kNone;
  double initial_scale = 65536.0;       // 2^16
  std::int64_t growth_interval = 2000;  // clean steps before the scale grows (PyTorch's default)
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  double min_scale = 1.0;
};

// What a checkpoint must keep to resume the scaler exactly.
struct LossScalerState {
  double scale = 1.0;
  std::int64_t clean_steps = 0;  // consecutive finite steps since the last change of scale
};

class LossScaler {
 public:
  // Scale 1, never changes.
  LossScaler() = default;
  // Validates `config` (for dynamic: initial_scale >= min_scale > 0, growth_factor > 1,
  // backoff_factor in (0, 1), growth_interval >= 1, all finite); errors name the field
  // ("optimizer.loss_scale.growth_interval: 0 ..."). For kNone the other fields are ignored.
  static Result<LossScaler> create(const LossScalerConfig& config);

  bool dynamic() const { return config_.kind == LossScaling::kDynamic; }
  // The factor for this step's loss. Always a finite power of growth/backoff steps from the start.
  float scale() const { return static_cast<float>(state_.scale); }
  double min_scale() const { return dynamic() ? config_.min_scale : 1.0; }
  const LossScalerConfig& config() const { return config_; }

  // After each step: whether its gradients held inf/NaN. No effect without dynamic scaling.
  void update(bool found_nonfinite);

  LossScalerState state() const { return state_; }
  // Restores a state saved by state(); InvalidArgument naming the value when it could not have come
  // from this configuration (scale not positive/finite, below min_scale, negative clean_steps).
  Status set_state(const LossScalerState& state);

 private:
  explicit LossScaler(const LossScalerConfig& config);
  LossScalerConfig config_;
  LossScalerState state_;
};

}  // namespace zinf::optim
