// AdamOptimizer: the math of one training step's parameter update — global gradient norm,
// loss-scale overflow handling, clipping by the global norm, then one fused Adam step
// (kernels/adam.h) per slice of parameter states. AdamW by default (decoupled weight decay, as
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
// The optimizer does not know where the states live: the owner of the states (zero/, through
// ModelStates::optimizer_step) computes the sum of squares of the gradients it owns, asks
// begin_step() what to do, runs step_slice() over every slice wherever that slice is (the device's
// Ops for device-resident states, CPU Ops for host-resident ones, streaming NVMe-resident ones
// through host buffers), then calls end_step(). Adam is elementwise, so any split of a parameter
// into slices gives the same bits as one call over the whole.
// What it is not: a learning-rate schedule (the caller passes each step's rate, see lr_schedule.h)
// or the owner of any state array (the optimizer only keeps its step count). Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>

#include "kernels/adam.h"
#include "libengine/core/status.h"
#include "libengine/device/ops.h"
#include "libengine/optim/loss_scaler.h"
#include "libengine/tensor/tensor.h"

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

// What begin_step decided for this step.
struct StepPlan {
  StepReport report;
  bool apply = false;        // false: skipped (nothing may change); true: run step_slice on every slice
  kernels::AdamHyper hyper;  // this step's hyper-parameters; weight_decay is set per slice
};

class AdamOptimizer {
 public:
  // Validates `config`; errors name the field ("optimizer.beta2: 1 is outside [0, 1)"): betas in
  // [0, 1), eps > 0, weight_decay >= 0, grad_clip >= 0, all finite.
  static Result<AdamOptimizer> create(const AdamConfig& config);

  // Decides this step from `sum_squares`, the sum over every gradient element of g^2 (fp64, under
  // the loss scale `scaler.scale()`), with learning rate `lr` (finite, >= 0). Non-finite sums skip
  // the step under dynamic scaling (the scaler backs off; apply false). Otherwise the step is
  // counted (step_count() + 1) and apply is true; the caller then runs step_slice() over every
  // slice and end_step(). Fails (nothing changed, scaler untouched) with InvalidArgument for a bad
  // lr, and with Internal "gradients became non-finite (NaN/inf) at step N" when the gradients hold
  // inf/NaN and there is no dynamic scaling to absorb it, or the scale is already at its minimum.
  // The caller checks its device for errors before passing a non-finite sum (a failed kernel also
  // reads as NaN).
  Result<StepPlan> begin_step(double lr, double sum_squares, LossScaler& scaler);
  // The plan begin_step(lr, sum, scaler) will return for every finite `sum`, known before the
  // gradients are: when nothing in the update depends on the global norm (no clipping, no dynamic
  // loss scaling) and `lr` is valid. nullopt otherwise. Lets the owner of the states step a slice
  // as soon as its gradient is final (overlapped with the backward pass), with the same bits;
  // report.grad_norm is left 0 (the norm is not known yet). Changes nothing.
  std::optional<StepPlan> plan_without_norm(double lr, const LossScaler& scaler) const;
  // The fused Adam step over one slice, through `ops` (the states' device's, or CPU Ops for
  // host-resident states): master, exp_avg, exp_avg_sq fp32 [N]; grad [N] fp32/bf16/fp16;
  // param_half, when not null, the bf16/fp16 [N] working copy rewritten from the new master.
  // `decays`: the parameter's ParamInfo::weight_decay. Precondition: plan.apply.
  void step_slice(device::Ops& ops, const StepPlan& plan, bool decays, Tensor master, Tensor exp_avg, Tensor exp_avg_sq,
                  Tensor grad, const Tensor* param_half) const;
  // After every slice of an applied step: the loss scaler counts a clean step.
  static void end_step(const StepPlan& plan, LossScaler& scaler);

  // Steps applied so far (skipped steps do not count): the bias-correction step of the next update
  // is step_count() + 1. Saved and restored with checkpoints.
  std::int64_t step_count() const { return step_count_; }
  // InvalidArgument for a negative count.
  Status set_step_count(std::int64_t count);
  const AdamConfig& config() const { return config_; }

 private:
  explicit AdamOptimizer(const AdamConfig& config) : config_(config) {}
  // This step's hyper-parameters with the current step count (weight_decay is set per slice).
  kernels::AdamHyper hyper_for(double lr, double grad_scale) const;
  AdamConfig config_;
  std::int64_t step_count_ = 0;
};

}  // namespace zinf::optim
