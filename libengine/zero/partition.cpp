#include "libengine/zero/partition.h"

#include <algorithm>

#include "libengine/core/check.h"
#include "libengine/spec/sizing/engine_budgets.h"

namespace zinf::zero {

Partition::Partition(const model::ParamTable& table, int world_size, int rank) : world_size_(world_size), rank_(rank) {
  ZINF_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "partition: rank outside the world");
  slices_.reserve(static_cast<std::size_t>(table.size()));
  for (const model::ParamInfo& info : table.params()) {
    ParamSlice slice;
    slice.numel = info.numel;
    slice.slice_numel = sizing::padded_slice(info.numel, world_size);
    slice.begin = std::min(info.numel, static_cast<std::int64_t>(rank) * slice.slice_numel);
    slice.owned = std::min(info.numel, slice.begin + slice.slice_numel) - slice.begin;
    slice.flat_offset = flat_numel_;
    flat_numel_ += slice.slice_numel;
    slices_.push_back(slice);
  }
}

}  // namespace zinf::zero
