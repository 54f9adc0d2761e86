#include "libengine/zero/model_states.h"

#include <fmt/format.h>

namespace zinf::zero {

Status check_state_slots(const optim::Optimizer& optimizer) {
  if (optimizer.state_slots() >= 0 && optimizer.state_slots() <= optim::kMaxStateSlots) return Status::ok();
  return Status::invalid_argument(
      fmt::format("optimizer: keeps {} fp32 state arrays per parameter element; the model's states hold {}",
                  optimizer.state_slots(), optim::kMaxStateSlots));
}

std::vector<CheckpointArrayInfo> standard_checkpoint_layout(const model::ParamTable& table) {
  std::vector<CheckpointArrayInfo> layout;
  layout.reserve(3 * static_cast<std::size_t>(table.size()));
  for (const char* prefix : {"master/", "adam_m/", "adam_v/"}) {
    for (const model::ParamInfo& info : table.params()) {
      layout.push_back({prefix + info.name, static_cast<std::uint64_t>(info.numel)});
    }
  }
  return layout;
}

std::vector<CheckpointArrayInfo> partitioned_checkpoint_layout(const model::ParamTable& table,
                                                               const Partition& partition) {
  std::vector<CheckpointArrayInfo> layout;
  layout.reserve(3 * static_cast<std::size_t>(table.size()));
  for (const char* prefix : {"master/", "adam_m/", "adam_v/"}) {
    for (model::ParamId id = 0; id < table.size(); ++id) {
      layout.push_back({prefix + table[id].name, static_cast<std::uint64_t>(partition[id].owned)});
    }
  }
  return layout;
}

}  // namespace zinf::zero
