#include "libengine/optim/optimizer.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace zinf::optim {
namespace {

// torch.nn.utils.clip_grad_norm_ adds this to the norm so a zero norm never divides.
constexpr double kClipEpsilon = 1e-6;

}  // namespace

Status Optimizer::check_grad_clip(double grad_clip) {
  if (std::isfinite(grad_clip) && grad_clip >= 0) return Status::ok();
  return Status::invalid_argument(fmt::format(
      "optimizer.grad_clip: {} is not a finite maximum gradient norm >= 0 (0 turns clipping off)", grad_clip));
}

Status Optimizer::set_step_count(std::int64_t count) {
  if (count < 0) {
    return Status::invalid_argument(fmt::format("optimizer step count: {} is negative", count));
  }
  step_count_ = count;
  return Status::ok();
}

Result<StepPlan> Optimizer::begin_step(double lr, double sum_squares, LossScaler& scaler) {
  if (!(std::isfinite(lr) && lr >= 0)) {
    return Status::invalid_argument(
        fmt::format("optimizer step {}: learning rate {} is not a finite number >= 0", step_count_ + 1, lr));
  }
  const double loss_scale = scaler.scale();
  StepPlan plan;
  plan.report.loss_scale_used = loss_scale;
  plan.report.grad_norm = std::sqrt(sum_squares) / loss_scale;
  if (!std::isfinite(sum_squares)) {
    if (!scaler.dynamic() || loss_scale <= scaler.min_scale()) {
      return Status::internal(
          fmt::format("gradients became non-finite (NaN/inf) at step {}{}; the run diverged — lower the learning rate "
                      "or enable gradient clipping",
                      step_count_ + 1,
                      scaler.dynamic() ? fmt::format(" even at the minimum loss scale {}", scaler.min_scale()) : ""));
    }
    scaler.update(true);
    plan.report.skipped = true;
    plan.report.clip_coef = 0;
    return plan;
  }
  plan.report.clip_coef = grad_clip_ > 0 ? std::min(1.0, grad_clip_ / (plan.report.grad_norm + kClipEpsilon)) : 1.0;
  ++step_count_;
  plan.apply = true;
  plan.lr = lr;
  plan.grad_scale = plan.report.clip_coef / loss_scale;
  plan.step = step_count_;
  return plan;
}

std::optional<StepPlan> Optimizer::plan_without_norm(double lr, const LossScaler& scaler) const {
  if (grad_clip_ > 0 || scaler.dynamic() || !(std::isfinite(lr) && lr >= 0)) return std::nullopt;
  // begin_step's arithmetic for a finite sum with clip_coef 1.
  StepPlan plan;
  plan.report.loss_scale_used = scaler.scale();
  plan.apply = true;
  plan.lr = lr;
  plan.grad_scale = plan.report.clip_coef / plan.report.loss_scale_used;
  // begin_step counts the step before it plans.
  plan.step = step_count_ + 1;
  return plan;
}

void Optimizer::end_step(const StepPlan& plan, LossScaler& scaler) {
  if (plan.apply) scaler.update(false);
}

}  // namespace zinf::optim
