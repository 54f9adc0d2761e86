#include "planner/strategy.h"

namespace zinf::planner {

using spec::Tier;

std::string_view strategy_name(Strategy strategy) {
  switch (strategy) {
    case Strategy::kAuto:
      return "auto";
    case Strategy::kDataParallel:
      return "dp";
    case Strategy::kZero2:
      return "zero2";
    case Strategy::kZero3:
      return "zero3";
    case Strategy::kZeroOffload:
      return "zero-offload";
    case Strategy::kInfinityCpu:
      return "zinf-cpu";
    case Strategy::kInfinityNvme:
      return "zinf-nvme";
    case Strategy::kDeepSpeedStage12:
      return "deepspeed-stage-1-2";
    case Strategy::kDeepSpeedStage3:
      return "deepspeed-stage-3";
    case Strategy::kDeepSpeedStage3NvmeOptimizer:
      return "deepspeed-stage-3-nvme-optimizer";
  }
  return "?";
}

std::string_view strategy_title(Strategy strategy) {
  switch (strategy) {
    case Strategy::kAuto:
      return "auto (ZeRO-Infinity placement search)";
    case Strategy::kDataParallel:
      return "data parallel only";
    case Strategy::kZero2:
      return "ZeRO-2 on GPU";
    case Strategy::kZero3:
      return "ZeRO-3 on GPU";
    case Strategy::kZeroOffload:
      return "ZeRO-Offload";
    case Strategy::kInfinityCpu:
      return "ZeRO-Infinity, CPU offload";
    case Strategy::kInfinityNvme:
      return "ZeRO-Infinity, NVMe offload";
    case Strategy::kDeepSpeedStage12:
      return "DeepSpeed ZeRO stage 1/2 (placement from --ds-config)";
    case Strategy::kDeepSpeedStage3:
      return "DeepSpeed ZeRO stage 3 (placement from --ds-config)";
    case Strategy::kDeepSpeedStage3NvmeOptimizer:
      return "DeepSpeed ZeRO stage 3, optimizer on NVMe (placement from --ds-config, gradients searched)";
  }
  return "?";
}

std::optional<Strategy> strategy_from_name(std::string_view name) {
  for (Strategy strategy : kAllStrategies) {
    if (strategy_name(strategy) == name) return strategy;
  }
  return std::nullopt;
}

StrategyRules strategy_rules(Strategy strategy) {
  const std::vector<Tier> any{Tier::kDevice, Tier::kCpu, Tier::kNvme};
  const std::vector<Tier> gpu{Tier::kDevice};
  const std::vector<Tier> cpu{Tier::kCpu};
  const std::vector<Tier> nvme{Tier::kNvme};
  const std::vector<Tier> gpu_or_cpu{Tier::kDevice, Tier::kCpu};
  const std::vector<Tier> cpu_or_nvme{Tier::kCpu, Tier::kNvme};
  StrategyRules rules;
  // allowed[] order: params, grads, optimizer, activations.
  switch (strategy) {
    case Strategy::kAuto:
      rules.allowed = {any, any, any, any};
      break;
    case Strategy::kDataParallel:
      rules.params_partitioned = false;
      rules.states_partitioned = false;
      rules.allowed = {gpu, gpu, gpu, gpu};
      break;
    case Strategy::kZero2:
      rules.params_partitioned = false;
      rules.allowed = {gpu, gpu, gpu, gpu};
      break;
    case Strategy::kZero3:
      rules.allowed = {gpu, gpu, gpu, gpu};
      break;
    case Strategy::kZeroOffload:
      rules.params_partitioned = false;
      rules.allowed = {gpu, cpu, cpu, gpu};
      break;
    case Strategy::kInfinityCpu:
      rules.allowed = {cpu, cpu, cpu, gpu_or_cpu};
      break;
    case Strategy::kInfinityNvme:
      rules.allowed = {nvme, cpu_or_nvme, nvme, gpu_or_cpu};
      break;
    case Strategy::kDeepSpeedStage12:
      rules.params_partitioned = false;
      rules.allowed = {gpu, gpu_or_cpu, gpu_or_cpu, gpu_or_cpu};
      break;
    case Strategy::kDeepSpeedStage3:
      rules.allowed = {any, any, any, any};
      break;
    case Strategy::kDeepSpeedStage3NvmeOptimizer:
      rules.allowed = {any, cpu_or_nvme, nvme, gpu_or_cpu};
      break;
  }
  return rules;
}

std::vector<StrategyRules> candidate_rules(Strategy strategy) {
  if (strategy != Strategy::kAuto) return {strategy_rules(strategy)};
  StrategyRules replicated = strategy_rules(Strategy::kAuto);
  replicated.params_partitioned = false;
  replicated.allowed[static_cast<std::size_t>(spec::StateKind::kParams)] = {Tier::kDevice};
  return {strategy_rules(Strategy::kAuto), replicated};
}

std::string describe_family(const StrategyRules& rules, const spec::StatePlacement& placement) {
  using spec::StateKind;
  const bool states_on_gpu =
      placement[StateKind::kGrads] == Tier::kDevice && placement[StateKind::kOptimizer] == Tier::kDevice;
  if (!rules.params_partitioned && !rules.states_partitioned) return "data parallel (every GPU holds every state)";
  if (!rules.params_partitioned) {
    return states_on_gpu ? "ZeRO-2 (parameters replicated; gradients and optimizer states partitioned on GPU)"
                         : "ZeRO-Offload (parameters replicated on GPU; gradients and optimizer states partitioned and "
                           "offloaded)";
  }
  return states_on_gpu && placement[StateKind::kParams] == Tier::kDevice
             ? "ZeRO-3 (all model states partitioned on GPU)"
             : "ZeRO-Infinity (all model states partitioned; offloaded to CPU/NVMe)";
}

}  // namespace zinf::planner
