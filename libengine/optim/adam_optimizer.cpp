#include "libengine/optim/adam_optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "kernels/adam.h"
#include "libengine/device/device.h"

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
    return Status::invalid_argument(fmt::format(
        "optimizer.weight_decay: {} is not a finite number >= 0", config.weight_decay));
  }
  if (!(std::isfinite(config.grad_clip) && config.grad_clip >= 0)) {
    return Status::invalid_argument(fmt::format(
        "optimizer.grad_clip: {} is not a finite maximum gradient norm >= 0 (0 turns clipping off)",
        config.grad_clip));
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

Result<StepReport> AdamOptimizer::step(zero::ReplicatedStates& states, double lr, LossScaler& scaler) {
  if (!(std::isfinite(lr) && lr >= 0)) {
    return Status::invalid_argument(fmt::format("optimizer step {}: learning rate {} is not a finite number >= 0",
                                                step_count_ + 1, lr));
  }
  const model::ParamTable& table = states.table();
  const double loss_scale = scaler.scale();

  device::Device& device = states.device();
  const device::ProfilerRange range(device, "optimizer");
  device::Ops& ops = device.ops();
  std::vector<Tensor> grads;
  grads.reserve(static_cast<std::size_t>(table.size()));
  for (model::ParamId id = 0; id < table.size(); ++id) grads.push_back(states.param_states(id).grad);
  const double sum_squares = ops.sum_squares(grads);
  StepReport report;
  report.loss_scale_used = loss_scale;
  report.grad_norm = std::sqrt(sum_squares) / loss_scale;

  if (!std::isfinite(sum_squares)) {
    // A failed kernel also reads as NaN (Ops' contract): report that, not a gradient overflow.
    ZINF_RETURN_IF_ERROR(device.synchronize());
    if (!scaler.dynamic() || loss_scale <= scaler.min_scale()) {
      return Status::internal(fmt::format(
          "gradients became non-finite (NaN/inf) at step {}{}; the run diverged — lower the learning rate "
          "or enable gradient clipping",
          step_count_ + 1,
          scaler.dynamic() ? fmt::format(" even at the minimum loss scale {}", scaler.min_scale()) : ""));
    }
    scaler.update(true);
    report.skipped = true;
    report.clip_coef = 0;
    return report;
  }

  report.clip_coef = config_.grad_clip > 0 ? std::min(1.0, config_.grad_clip / (report.grad_norm + kClipEpsilon)) : 1.0;
  ++step_count_;
  kernels::AdamHyper hyper;
  hyper.lr = lr;
  hyper.beta1 = config_.beta1;
  hyper.beta2 = config_.beta2;
  hyper.eps = config_.eps;
  hyper.step = step_count_;
  hyper.decoupled_weight_decay = config_.decoupled;
  hyper.grad_scale = report.clip_coef / loss_scale;
  for (model::ParamId id = 0; id < table.size(); ++id) {
    const zero::ParamStates p = states.param_states(id);
    hyper.weight_decay = table[id].weight_decay ? config_.weight_decay : 0.0;
    ops.adam_step(hyper, p.master, p.exp_avg, p.exp_avg_sq, p.grad, p.param_half.data() != nullptr ? &p.param_half : nullptr);
  }
  scaler.update(false);
  return report;
}

}  // namespace zinf::optim
