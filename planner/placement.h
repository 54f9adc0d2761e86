// Placement footprint: given where each kind of state lives, how many bytes land on each tier —
// per GPU for device memory, per node for CPU memory and NVMe — and whether that fits the hardware.
#pragma once

#include <string>
#include <vector>

#include "libengine/spec/state_placement.h"
#include "planner/hardware_profile.h"
#include "planner/memory_model.h"
#include "planner/strategy.h"

namespace zinf::planner {

// One line of a tier's bill: "optimizer states 1.2 TiB".
struct TierItem {
  std::string what;  // "parameters", "model-state working memory", ...
  double bytes = 0;  // per GPU (device tier) or per node (CPU, NVMe)
};

struct TierUsage {
  spec::Tier tier = spec::Tier::kDevice;
  double used_bytes = 0;      // per GPU for the device tier, per node otherwise
  double capacity_bytes = 0;  // same unit
  std::vector<TierItem> items;

  bool fits() const { return used_bytes <= capacity_bytes; }
  double fraction() const { return capacity_bytes > 0 ? used_bytes / capacity_bytes : (used_bytes > 0 ? 1e30 : 0.0); }
};

struct Footprint {
  TierUsage device;  // per GPU
  TierUsage cpu;     // per node
  TierUsage nvme;    // per node

  bool fits() const { return device.fits() && cpu.fits() && nvme.fits(); }
  const TierUsage& tier(spec::Tier tier) const;
  // The largest used/capacity ratio over the three tiers: > 1 when something does not fit.
  double worst_fraction() const;
};

// Bytes of one kind of state across the whole cluster, counting replicas: a replicated state
// (plain data parallelism, ZeRO-Offload's parameters) is stored once per GPU.
double cluster_state_bytes(spec::StateKind kind, const ModelMemory& memory, const StrategyRules& rules,
                           std::int64_t total_gpus);

Footprint footprint(const ModelMemory& memory, const StrategyRules& rules, const spec::StatePlacement& placement,
                    const HardwareProfile& hardware);

}  // namespace zinf::planner
