// Partition: how ZeRO splits every parameter over the data-parallel ranks (bandwidth-centric
// partitioning, docs/architecture.md §1): parameter p of n elements is cut into world_size equal slices of
// slice_numel = round_up(ceil(n / world_size), kSliceAlignElements) elements; rank r owns elements
// [r·slice_numel, min(n, (r+1)·slice_numel)) — possibly fewer than slice_numel, or none, at the end.
// Each kind of state stores this rank's slices back to back in one flat array, slice p at
// flat_offset(p), padded to slice_numel so every slice starts aligned.
// Pure arithmetic over a ParamTable; no memory.
#pragma once

#include <cstdint>
#include <vector>

#include "libengine/model/param_table.h"
#include "libengine/spec/optimizer_pipeline_shape.h"

namespace zinf::zero {

using spec::kSliceAlignElements;  // 32: 128 B of fp32, 64 B of bf16, vector and DMA friendly

struct ParamSlice {
  std::int64_t numel = 0;        // of the whole parameter
  std::int64_t slice_numel = 0;  // every rank's slice, padded
  std::int64_t begin = 0;        // first element this rank owns
  std::int64_t owned = 0;        // elements this rank owns (<= slice_numel)
  std::int64_t flat_offset = 0;  // element offset of this rank's slice in a flat per-kind array
};

class Partition {
 public:
  // Precondition: 1 <= rank + 1 <= world_size.
  Partition(const model::ParamTable& table, int world_size, int rank);

  int world_size() const { return world_size_; }
  int rank() const { return rank_; }
  const ParamSlice& operator[](model::ParamId id) const { return slices_.at(static_cast<std::size_t>(id)); }
  std::int32_t size() const { return static_cast<std::int32_t>(slices_.size()); }
  // Elements of one flat per-kind array (the sum of the padded slices).
  std::int64_t flat_numel() const { return flat_numel_; }

 private:
  int world_size_;
  int rank_;
  std::vector<ParamSlice> slices_;
  std::int64_t flat_numel_ = 0;
};

}  // namespace zinf::zero
