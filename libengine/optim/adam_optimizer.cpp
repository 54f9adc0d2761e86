#include "libengine/optim/adam_optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "kernels/adam.h"

namespace zinf::optim {
namespace {

// torch.nn.utils.clip_grad_norm_ adds this to the norm so a zero norm never divides.
constexpr double kClipEpsilon = 1e-6;

Status check_unit_interval(double value, const char* field) {
  if (std::isfinite(value) && value >= 0 && value < 1) return Status::ok();
  return Status::invalid_argument(fmt::format("{}: {} is outside [0, 1)", field, value));
}

}  // namespace

Result<AdamOptimizer> AdamOptimizer::create(const AdamConfig& config) {
  ZINF_RETURN_IF_ERROR(check_unit_interval(config.beta1, "optimizer.beta1"));
  ZINF_RETURN_IF_ERROR(check_unit_interval(config.beta2, "optimizer.beta2"));
  if (!(std::isfinite(config.eps) && config.eps > 0)) {
    return Status::invalid_argument(fmt::format("optimizer.eps: {} is not a positive finite number", config.eps));
  }
  if (!(std::isfinite(config.weight_decay) && config.weight_decay >= 0)) {
    return Status::invalid_argument(
        fmt::format("optimizer.weight_decay: {} is not a finite number >= 0", config.weight_decay));
  }
  if (!(std::isfinite(config.grad_clip) && config.grad_clip >= 0)) {
    return Status::invalid_argument(fmt::format(
        "optimizer.grad_clip: {} is not a finite maximum gradient norm >= 0 (0 turns clipping off)", config.grad_clip));
  }
  return AdamOptimizer(config);
}

Status AdamOptimizer::set_step_count(std::int64_t count) {
  if (count < 0) {
    return Status::invalid_argument(fmt::format("optimizer step count: {} is negative", count));
  }
  step_count_ = count;
  return Status::ok();
}

Result<StepPlan> AdamOptimizer::begin_step(double lr, double sum_squares, LossScaler& scaler) {
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
  plan.report.clip_coef =
      config_.grad_clip > 0 ? std::min(1.0, config_.grad_clip / (plan.report.grad_norm + kClipEpsilon)) : 1.0;
  ++step_count_;
  plan.apply = true;
  plan.hyper = hyper_for(lr, plan.report.clip_coef / loss_scale);
  return plan;
}

std::optional<StepPlan> AdamOptimizer::plan_without_norm(double lr, const LossScaler& scaler) const {
  if (config_.grad_clip > 0 || scaler.dynamic() || !(std::isfinite(lr) && lr >= 0)) return std::nullopt;
  // begin_step's arithmetic for a finite sum with clip_coef 1.
  StepPlan plan;
  plan.report.loss_scale_used = scaler.scale();
  plan.apply = true;
  // begin_step counts the step before building its hyper-parameters.
  plan.hyper = hyper_for(lr, plan.report.clip_coef / plan.report.loss_scale_used);
  ++plan.hyper.step;
  return plan;
}

kernels::AdamHyper AdamOptimizer::hyper_for(double lr, double grad_scale) const {
  kernels::AdamHyper hyper;
  hyper.lr = lr;
  hyper.beta1 = config_.beta1;
  hyper.beta2 = config_.beta2;
  hyper.eps = config_.eps;
  hyper.step = step_count_;
  hyper.decoupled_weight_decay = config_.decoupled;
  hyper.grad_scale = grad_scale;
  return hyper;
}

void AdamOptimizer::step_slice(device::Ops& ops, const StepPlan& plan, bool decays, Tensor master, Tensor exp_avg,
                               Tensor exp_avg_sq, Tensor grad, const Tensor* param_half) const {
  ZINF_CHECK(plan.apply, "step_slice on a skipped step");
  kernels::AdamHyper hyper = plan.hyper;
  hyper.weight_decay = decays ? config_.weight_decay : 0.0;
  ops.adam_step(hyper, master, exp_avg, exp_avg_sq, grad, param_half);
}

void AdamOptimizer::end_step(const StepPlan& plan, LossScaler& scaler) {
  if (plan.apply) scaler.update(false);
}

}  // namespace zinf::optim
