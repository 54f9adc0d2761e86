#include "planner/strategy.h"

namespace zinf::planner {

using spec::Tier;

std::string_view strategy_name(Strategy strategy) {
  switch (strategy) {
    case Strategy::kAuto: return "auto";
    case Strategy::kDataParallel: return "dp";
    case Strategy::kZero3: return "zero3";
    case Strategy::kZeroOffload: return "zero-offload";
    case Strategy::kInfinityCpu: return "zinf-cpu";
    case Strategy::kInfinityNvme: return "zinf-nvme";
  }
  return "?";
}

std::string_view strategy_title(Strategy strategy) {
  switch (strategy) {
    case Strategy::kAuto: return "ZeRO-Infinity (auto placement)";
    case Strategy::kDataParallel: return "data parallel only";
    case Strategy::kZero3: return "ZeRO-3 on GPU";
    case Strategy::kZeroOffload: return "ZeRO-Offload";
    case Strategy::kInfinityCpu: return "ZeRO-Infinity, CPU offload";
    case Strategy::kInfinityNvme: return "ZeRO-Infinity, NVMe offload";
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
  }
  return rules;
}

}  // namespace zinf::planner
