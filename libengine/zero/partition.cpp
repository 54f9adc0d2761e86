#include "libengine/zero/partition.h"

#include <algorithm>

#include "libengine/core/check.h"

namespace zinf::zero {

Partition::Partition(const model::ParamTable& table, int world_size, int rank) : world_size_(world_size), rank_(rank) {
  ZINF_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "partition: rank outside the world");
  slices_.reserve(static_cast<std::size_t>(table.size()));
  for (const model::ParamInfo& info : table.params()) {
    ParamSlice slice;
    slice.numel = info.numel;
    const std::int64_t share = (info.numel + world_size - 1) / world_size;
    slice.slice_numel = (share + kSliceAlignElements - 1) / kSliceAlignElements * kSliceAlignElements;
    slice.begin = std::min(info.numel, static_cast<std::int64_t>(rank) * slice.slice_numel);
    slice.owned = std::min(info.numel, slice.begin + slice.slice_numel) - slice.begin;
    slice.flat_offset = flat_numel_;
    flat_numel_ += slice.slice_numel;
    slices_.push_back(slice);
  }
}

}  // namespace zinf::zero
