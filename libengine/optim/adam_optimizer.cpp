#include "libengine/optim/adam_optimizer.h"

#include <cmath>

#include <fmt/format.h>

#include "libengine/core/check.h"

namespace zinf::optim {
namespace {

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
  ZINF_RETURN_IF_ERROR(check_grad_clip(config.grad_clip));
  return AdamOptimizer(config);
}

kernels::AdamHyper AdamOptimizer::hyper(const StepPlan& plan, bool decays) const {
  kernels::AdamHyper hyper;
  hyper.lr = plan.lr;
  hyper.beta1 = config_.beta1;
  hyper.beta2 = config_.beta2;
  hyper.eps = config_.eps;
  hyper.step = plan.step;
  hyper.weight_decay = decays ? config_.weight_decay : 0.0;
  hyper.decoupled_weight_decay = config_.decoupled;
  hyper.grad_scale = plan.grad_scale;
  return hyper;
}

void AdamOptimizer::step_slice(device::Ops& ops, const StepPlan& plan, bool decays, Tensor master,
                               std::span<const Tensor> slots, Tensor grad, const Tensor* param_half) const {
  ZINF_CHECK(plan.apply, "step_slice on a skipped step");
  ZINF_CHECK(slots.size() == 2, "AdamOptimizer::step_slice: exp_avg and exp_avg_sq expected");
  ops.adam_step(hyper(plan, decays), master, slots[0], slots[1], grad, param_half);
}

}  // namespace zinf::optim
