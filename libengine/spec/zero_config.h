// ZeroConfig: the engine configuration a scenario carries in its "zero" section and the planner can
// produce — ZeRO stage, the tier of each kind of model state, NVMe paths, the host-memory budget,
// the prefetch and live-parameter budgets in bytes and the small-parameter persistence threshold.
// Pure data plus its strict parser (one line per bad value, naming "scenario.zero.<field>").
//
// Stages at one rank: 0 keeps every state replicated on the device (zero/replicated_states); 1, 2
// and 3 partition states (zero/partitioned_states) — optimizer states (1), and gradients (2), and
// parameters (3). Offloading parameters needs stage 3, offloading the optimizer needs stage >= 1,
// as in DeepSpeed. Gradients live where the optimizer steps: on the device when the optimizer is
// there, in CPU memory when the optimizer runs on the CPU (its states in CPU memory or on NVMe).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/core/status.h"
#include "libengine/spec/json_input.h"
#include "libengine/spec/state_placement.h"

namespace zinf::spec {

inline constexpr std::int64_t kDefaultPersistenceThreshold = 100000;  // elements; DeepSpeed's default
// The largest byte budget the zero section accepts (host_memory, max_live_bytes, prefetch_bytes,
// reduce_bucket_bytes): 1 EiB. The engine and the planner derive prefetch_bytes as 2 x
// max_live_bytes and add budgets together in 64 bits; below this bound none of that can wrap.
inline constexpr std::uint64_t kMaxZeroBudgetBytes = std::uint64_t{1} << 60;

struct ZeroConfig {
  int stage = 0;
  Tier params = Tier::kDevice;            // compute-precision parameters
  Tier grads = Tier::kDevice;             // compute-precision gradients: kDevice or kCpu
  Tier optimizer = Tier::kDevice;         // fp32 master parameters, Adam m and v
  std::vector<std::string> nvme_paths;    // directories for swap files; required when a tier is nvme
  std::uint64_t host_memory_bytes = 0;    // budget of the host (CPU) tier; 0: no budget
  std::uint64_t prefetch_bytes = 0;       // NVMe read-ahead in flight; 0: derived from the host budget
  std::uint64_t max_live_bytes = 0;       // device bytes of gathered parameters (and gradients in flight); 0: derived
  std::uint64_t reduce_bucket_bytes = 0;  // across ranks: gradients reduced per collective; 0: derived
  std::int64_t persistence_threshold =
      kDefaultPersistenceThreshold;  // params with at most this many elements stay on the device
  // Optimizer on the CPU or NVMe: the most elements of optimizer states stepped (and moved to and
  // from NVMe) as one sub-group; a parameter larger than that is split into pieces. 0: derived from
  // the host budget (at least 8 sub-groups, pieces of at least 1M elements).
  std::int64_t sub_group_size = 0;
  // Optimizer on the CPU or NVMe: step each sub-group (and read its states from NVMe) while the
  // backward pass is still running, as soon as its gradients are final. Bit-identical either way;
  // false runs DeepSpeed's order (the whole step after the backward pass).
  bool overlap_optimizer = true;
  // Activation checkpoints (the block inputs kept by activation checkpointing): kDevice, or kCpu to
  // keep them in host memory and copy each back ahead of its recompute. kCpu needs the scenario's
  // activation_checkpointing (checked by parse_scenario, which sees both).
  Tier activations = Tier::kDevice;
  bool operator==(const ZeroConfig&) const = default;

  bool partitioned() const { return stage > 0; }
  bool uses_nvme() const { return params == Tier::kNvme || optimizer == Tier::kNvme; }
  StatePlacement placement() const;
};

// Parses the "zero" object at `zero` (its path "scenario.zero"). Every error is InvalidArgument with
// one line naming the field, the value and what is allowed.
Result<ZeroConfig> parse_zero_config(const JsonObject& zero);
// Every field, for the run record and round trips: parse_zero_config(to_json(c)) == c.
nlohmann::json to_json(const ZeroConfig& config);

}  // namespace zinf::spec
