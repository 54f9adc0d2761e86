#include "libengine/zero/model_states.h"

namespace zinf::zero {

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
