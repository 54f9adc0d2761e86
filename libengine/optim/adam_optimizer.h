// AdamOptimizer: one training step's parameter update over ZeRO-0 replicated states — global
// gradient norm, loss-scale overflow handling, clipping by the global norm, then one fused CPU Adam
// step (kernels/adam.h) per parameter. AdamW by default (decoupled weight decay, as
// torch.optim.AdamW), classic Adam with L2 in the gradient when `decoupled` is false. Weight decay
// applies only to parameters whose ParamInfo::weight_decay is set (not biases and norm weights).
//
// A step, with S the loss scale the gradients were produced under:
//   norm = sqrt(sum over every gradient element of g^2) / S       (fp64 accumulation)
//   norm not finite: dynamic scaling  -> skip (no state changes), scaler backs off;
//                    no scaling       -> error: the run diverged
//   clip = min(1, grad_clip / (norm + 1e-6)) when grad_clip > 0, else 1   (torch clip_grad_norm_)
//   Adam on every parameter with its gradient multiplied by clip / S; in mixed precision the step
//   also rewrites the half working copy of the parameters.
// The norm and the step run where the states live, through the device's Ops (Ops::sum_squares,
// Ops::adam_step): the CPU kernels on the CPU backend, the CUDA kernels on a GPU; the norm is the one
// value that comes back to the host each step.
// What it is not: a learning-rate schedule (the caller passes each step's rate, see lr_schedule.h)
// or the owner of any state array (zero/replicated_states owns them; the optimizer only keeps its
// step count). Not thread-safe.
#pragma once

#include <cstdint>

#include "libengine/core/status.h"
#include "libengine/optim/loss_scaler.h"
#include "libengine/zero/replicated_states.h"

namespace zinf::optim {

struct AdamConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // torch.optim.AdamW's default; only on ParamInfo::weight_decay params
  bool decoupled = true;       // true: AdamW; false: Adam (weight_decay * p added to the gradient)
  double grad_clip = 0.0;      // maximum global gradient norm; 0: no clipping
};

struct StepReport {
  double grad_norm = 0;        // global norm of the unscaled gradients, before clipping (inf/NaN when skipped)
  double clip_coef = 1;        // factor the gradients were multiplied by (1: no clipping; 0 when skipped)
  bool skipped = false;        // non-finite gradients under dynamic loss scaling: nothing updated
  double loss_scale_used = 1;  // the scale the gradients were produced under
};

class AdamOptimizer {
 public:
  // Validates `config`; errors name the field ("optimizer.beta2: 1 is outside [0, 1)"): betas in
  // [0, 1), eps > 0, weight_decay >= 0, grad_clip >= 0, all finite.
  static Result<AdamOptimizer> create(const AdamConfig& config);

  // One step over every parameter of `states` with learning rate `lr` (finite, >= 0), gradients
  // produced under `scaler.scale()`; updates the scaler. Precondition: no parameter is acquired and
  // no gradient buffer handed out. Fails (nothing changed, scaler untouched) with InvalidArgument for
  // a bad lr, and with Internal "gradients became non-finite (NaN/inf) at step N" when the
  // gradients hold inf/NaN and there is no dynamic scaling to absorb it, or the scale is already at
  // its minimum.
  Result<StepReport> step(zero::ReplicatedStates& states, double lr, LossScaler& scaler);

  // Steps applied so far (skipped steps do not count): the bias-correction step of the next update
  // is step_count() + 1. Saved and restored with checkpoints.
  std::int64_t step_count() const { return step_count_; }
  // InvalidArgument for a negative count.
  Status set_step_count(std::int64_t count);
  const AdamConfig& config() const { return config_; }

 private:
  explicit AdamOptimizer(const AdamConfig& config) : config_(config) {}
  AdamConfig config_;
  std::int64_t step_count_ = 0;
};

}  // namespace zinf::optim
