// Optimizer: what the owners of the model's states (zero/) need from an optimizer, whichever it is.
// One step of training updates every parameter element from its gradient and the fp32 arrays the
// optimizer keeps per element (its state slots: AdamW's two moments, SGD's momentum):
//   1. the owner sums g^2 over every gradient element it owns (fp64) and calls begin_step(), which
//      applies the rule every optimizer here shares — the global gradient norm, loss-scale overflow
//      handling, clipping by the global norm — and returns the step's scalars (StepPlan);
//   2. the owner runs step_slice() over every slice of its states wherever the slice lives (the
//      device's Ops for device-resident states, CPU Ops for host-resident ones, streaming
//      NVMe-resident ones through host buffers), in any order and any split of a parameter: the
//      update must be elementwise, so that any split gives the same bits as one call;
//   3. end_step().
// A new optimizer is a subclass that says how many state slots it keeps and implements
// step_slice(); zero/ stays as it is. The owners hold kMaxStateSlots slots per element (checkpoints
// name them "adam_m/<param>" and "adam_v/<param>", whichever optimizer uses them).
//
// A step, with S the loss scale the gradients were produced under:
//   norm = sqrt(sum over every gradient element of g^2) / S       (fp64 accumulation)
//   norm not finite: dynamic scaling  -> skip (no state changes), scaler backs off;
//                    no scaling       -> error: the run diverged
//   clip = min(1, grad_clip / (norm + 1e-6)) when grad_clip > 0, else 1   (torch clip_grad_norm_)
//   step_slice on every slice with its gradient multiplied by grad_scale = clip / S.
// What it is not: a learning-rate schedule (the caller passes each step's rate, see lr_schedule.h)
// or the owner of any state array: the optimizer keeps only scalars (its step count, saved and
// restored with checkpoints). Not thread-safe, except that step_slice() is const and may run on
// another thread than begin_step() (zero/'s optimizer thread) while nothing else is called.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "libengine/core/status.h"
#include "libengine/device/ops.h"
#include "libengine/optim/loss_scaler.h"
#include "libengine/tensor/tensor.h"

namespace zinf::optim {

struct StepReport {
  double grad_norm = 0;        // global norm of the unscaled gradients, before clipping (inf/NaN when skipped)
  double clip_coef = 1;        // factor the gradients were multiplied by (1: no clipping; 0 when skipped)
  bool skipped = false;        // non-finite gradients under dynamic loss scaling: nothing updated
  double loss_scale_used = 1;  // the scale the gradients were produced under
};

// What begin_step decided for this step: the scalars every element's update shares.
struct StepPlan {
  StepReport report;
  bool apply = false;     // false: skipped (nothing may change); true: run step_slice on every slice
  double lr = 0;          // this step's learning rate
  double grad_scale = 1;  // what every stored gradient element is multiplied by: clip_coef / loss scale
  std::int64_t step = 0;  // the 1-based number of this update (Adam's bias corrections)
  // The same update (the report aside: a plan made before the norm was known has no norm).
  bool same_update(const StepPlan& other) const {
    return apply == other.apply && lr == other.lr && grad_scale == other.grad_scale && step == other.step;
  }
};

// The fp32 arrays per parameter element, beside the master weights, that the owners of the states
// hold for the optimizer: an optimizer may use up to this many.
inline constexpr int kMaxStateSlots = 2;

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // The fp32 arrays per element this optimizer keeps beside the master weights, 0..kMaxStateSlots
  // (AdamW: 2, exp_avg and exp_avg_sq). They start at zero; the owner passes the first
  // state_slots() of its slots to step_slice() and saves and restores them with checkpoints.
  virtual int state_slots() const = 0;
  // The update of one slice through `ops` (the states' device's, or CPU Ops for host-resident
  // states): master fp32 [N]; `slots`, state_slots() fp32 [N] arrays; grad [N] fp32/bf16/fp16,
  // multiplied by plan.grad_scale before use; param_half, when not null, the bf16/fp16 [N] working
  // copy rewritten from the new master. `decays`: the parameter's ParamInfo::weight_decay.
  // Precondition: plan.apply, and the plan is one begin_step() or plan_without_norm() of this
  // optimizer returned. Elementwise: any split of a parameter into slices gives the same bits.
  virtual void step_slice(device::Ops& ops, const StepPlan& plan, bool decays, Tensor master,
                          std::span<const Tensor> slots, Tensor grad, const Tensor* param_half) const = 0;

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
  // After every slice of an applied step: the loss scaler counts a clean step.
  static void end_step(const StepPlan& plan, LossScaler& scaler);

  // Steps applied so far (skipped steps do not count): the next update is step step_count() + 1.
  // Saved and restored with checkpoints.
  std::int64_t step_count() const { return step_count_; }
  // InvalidArgument for a negative count.
  Status set_step_count(std::int64_t count);
  // The maximum global gradient norm; 0: no clipping.
  double grad_clip() const { return grad_clip_; }

 protected:
  // `grad_clip` as check_grad_clip() accepts it.
  explicit Optimizer(double grad_clip) : grad_clip_(grad_clip) {}
  Optimizer(const Optimizer&) = default;
  Optimizer& operator=(const Optimizer&) = default;
  // InvalidArgument naming optimizer.grad_clip unless it is finite and >= 0.
  static Status check_grad_clip(double grad_clip);

 private:
  double grad_clip_ = 0;
  std::int64_t step_count_ = 0;
};

}  // namespace zinf::optim
