#include "planner/scenario_plan.h"

#include <algorithm>

#include <fmt/format.h>

namespace zinf::planner {

PlanInput plan_input_for(const spec::Scenario& scenario, const HardwareProfile& hardware, std::int64_t ranks) {
  PlanInput input;
  input.shape = scenario.shape;
  input.model_source = fmt::format("scenario {}", scenario.name);
  input.requested_params = scenario.params_requested.value_or(0);
  spec::TrainingSpec& training = input.training;
  training.seq = scenario.seq;
  training.micro_batch = std::max<std::int64_t>(1, scenario.batch / std::max<std::int64_t>(1, ranks));
  training.ckpt_interval = 1;  // the engine checkpoints every block's input
  training.tiling = scenario.tiling;
  training.precision = scenario.precision;
  // The engine's partitioned states keep no fp32 gradient copy: 2 + 2 + 4 + 4 + 4 bytes per
  // parameter in half precision (the ZeRO paper's 16), 4 x 4 in fp32.
  training.accounting = scenario.precision == DType::kF32 ? spec::StateAccounting::kFp32 : spec::StateAccounting::kZero;
  training.activation_checkpointing = scenario.activation_checkpointing;
  training.norm_before_step = scenario.optimizer.grad_clip > 0;
  input.hardware = hardware;
  input.schedule = scenario.zero.overlap_optimizer ? Schedule::kZinf : Schedule::kDeepSpeed;
  if (!scenario.zero.partitioned()) {
    input.strategy = Strategy::kDataParallel;
    return input;
  }
  input.strategy = Strategy::kAuto;
  const auto pin = [&](spec::StateKind kind, spec::Tier tier) { input.pinned[static_cast<std::size_t>(kind)] = tier; };
  pin(spec::StateKind::kParams, scenario.zero.params);
  pin(spec::StateKind::kGrads, scenario.zero.grads);
  pin(spec::StateKind::kOptimizer, scenario.zero.optimizer);
  pin(spec::StateKind::kActivations, spec::Tier::kDevice);
  return input;
}

}  // namespace zinf::planner
