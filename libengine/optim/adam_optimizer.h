// AdamOptimizer: AdamW by default (decoupled weight decay, as torch.optim.AdamW), classic Adam with
// L2 in the gradient when `decoupled` is false — one fused Adam step (kernels/adam.h) per slice of
// parameter states, behind the Optimizer interface (optimizer.h: the global norm, loss-scale
// overflow handling and clipping are the interface's, shared by every optimizer). Weight decay
// applies only to parameters whose ParamInfo::weight_decay is set (not biases and norm weights).
// In mixed precision the step also rewrites the half working copy of the parameters. State slots:
// exp_avg (m) and exp_avg_sq (v). Not thread-safe (see Optimizer).
#pragma once

#include "kernels/adam.h"
#include "libengine/core/status.h"
#include "libengine/optim/optimizer.h"

namespace zinf::optim {

struct AdamConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // torch.optim.AdamW's default; only on ParamInfo::weight_decay params
  bool decoupled = true;       // true: AdamW; false: Adam (weight_decay * p added to the gradient)
  double grad_clip = 0.0;      // maximum global gradient norm; 0: no clipping
};

class AdamOptimizer final : public Optimizer {
 public:
  // Validates `config`; errors name the field ("optimizer.beta2: 1 is outside [0, 1)"): betas in
  // [0, 1), eps > 0, weight_decay >= 0, grad_clip >= 0, all finite.
  static Result<AdamOptimizer> create(const AdamConfig& config);

  // exp_avg and exp_avg_sq.
  int state_slots() const override { return 2; }
  // slots[0] exp_avg, slots[1] exp_avg_sq (Optimizer::step_slice).
  void step_slice(device::Ops& ops, const StepPlan& plan, bool decays, Tensor master, std::span<const Tensor> slots,
                  Tensor grad, const Tensor* param_half) const override;
  // The fused kernel's hyper-parameters for `plan` on a parameter that `decays`.
  kernels::AdamHyper hyper(const StepPlan& plan, bool decays) const;
  const AdamConfig& config() const { return config_; }

 private:
  explicit AdamOptimizer(const AdamConfig& config) : Optimizer(config.grad_clip), config_(config) {}
  AdamConfig config_;
};

}  // namespace zinf::optim
