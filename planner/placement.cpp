#include "planner/placement.h"

#include <algorithm>
#include <string>

namespace zinf::planner {

using spec::StateKind;
using spec::Tier;

const TierUsage& Footprint::tier(Tier which) const {
  switch (which) {
    case Tier::kDevice:
      return device;
    case Tier::kCpu:
      return cpu;
    case Tier::kNvme:
      return nvme;
  }
  return device;
}

double Footprint::worst_fraction() const { return std::max({device.fraction(), cpu.fraction(), nvme.fraction()}); }

double cluster_state_bytes(StateKind kind, const ModelMemory& memory, const StrategyRules& rules,
                           std::int64_t total_gpus) {
  const double gpus = static_cast<double>(total_gpus);
  switch (kind) {
    case StateKind::kParams:
      return memory.params_bytes * (rules.params_partitioned ? 1.0 : gpus);
    case StateKind::kGrads:
      return memory.grads_bytes * (rules.states_partitioned ? 1.0 : gpus);
    case StateKind::kOptimizer:
      return memory.optimizer_bytes * (rules.states_partitioned ? 1.0 : gpus);
    case StateKind::kActivations:
      return memory.activation_checkpoint_bytes_per_gpu * gpus;
  }
  return 0;
}

Footprint footprint(const ModelMemory& memory, const StrategyRules& rules, const spec::StatePlacement& placement,
                    const HardwareProfile& hardware) {
  const NodeSpec& node = hardware.node;
  const std::int64_t gpus = hardware.total_gpus();
  Footprint out;
  out.device = {Tier::kDevice, 0, static_cast<double>(node.gpu.memory_bytes), {}};
  out.cpu = {Tier::kCpu, 0, static_cast<double>(node.cpu_memory_bytes), {}};
  out.nvme = {Tier::kNvme, 0, static_cast<double>(node.nvme_capacity_bytes), {}};

  const auto add = [](TierUsage& usage, std::string what, double bytes) {
    if (bytes <= 0) return;
    usage.items.push_back({std::move(what), bytes});
    usage.used_bytes += bytes;
  };
  for (StateKind kind : spec::kAllStateKinds) {
    const double total = cluster_state_bytes(kind, memory, rules, gpus);
    const std::string title(spec::state_kind_title(kind));
    switch (placement[kind]) {
      case Tier::kDevice:
        add(out.device, title, total / static_cast<double>(gpus));
        break;
      case Tier::kCpu:
        add(out.cpu, title, total / static_cast<double>(hardware.nodes));
        break;
      case Tier::kNvme:
        add(out.nvme, title, total / static_cast<double>(hardware.nodes));
        break;
    }
  }
  // Working memory is always on the GPU. Gathering a partitioned operator needs room for its
  // full parameters and gradients; replicated parameters are already resident.
  if (rules.params_partitioned) add(out.device, "model-state working memory", memory.model_state_working_bytes_per_gpu);
  add(out.device, "activation working memory", memory.activation_working_bytes_per_gpu);
  return out;
}

}  // namespace zinf::planner
