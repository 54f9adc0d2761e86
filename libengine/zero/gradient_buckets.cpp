// Gradient buckets of the GradientReducer (gradient_reducer.h) across ranks: the backward pass's
// gradients are reduced over the ranks a bucket at a time — one collective per
// zero.reduce_bucket_bytes of gradients instead of one per parameter, as DeepSpeed's
// reduce_bucket_size — and each rank keeps the slices it owns.
//
// Layout. A reduce-scatter over N ranks hands rank r the r-th of N equal blocks of its input. The
// bucket's parameters are packed rank-major — block r holds the r-th slice of every parameter in
// commit order — so one reduce-scatter leaves each rank its own slices of all of them, contiguous.
// Stage 1 all-reduces whole gradients: they are packed one after another and each rank copies its
// slices out. Either way each element is the same sum of the same N values as a per-parameter
// collective gives: buckets change the number of calls, not the bits.
//
// A bucket closes when the next gradient would overflow it (or when it is full) and at the end of
// the backward pass: decisions from byte counts alone, the same on every rank, so the ranks issue
// the same collectives in the same order (the rule for every collective the engine issues).
#include <algorithm>

#include <fmt/format.h>

#include "libengine/core/check.h"
#include "libengine/zero/gradient_reducer.h"

namespace zinf::zero {

Status GradientReducer::add_to_bucket(model::ParamId id, device::DeviceBuffer whole, DType dtype) {
  const std::uint64_t bytes = static_cast<std::uint64_t>(partition_[id].slice_numel) *
                              static_cast<std::uint64_t>(partition_.world_size()) * dtype_size_bytes(dtype);
  if (!bucket_.ids.empty() && bucket_.bytes + bytes > bucket_bytes_) ZINF_RETURN_IF_ERROR(flush_bucket());
  bucket_.ids.push_back(id);
  bucket_.wholes.push_back(std::move(whole));
  bucket_.bytes += bytes;
  bucket_.dtype = dtype;
  if (bucket_.bytes >= bucket_bytes_) return flush_bucket();
  return Status::ok();
}

Status GradientReducer::flush_bucket() {
  if (bucket_.ids.empty()) return Status::ok();
  const std::size_t element = dtype_size_bytes(bucket_.dtype);
  const auto world = static_cast<std::size_t>(partition_.world_size());
  const auto rank = static_cast<std::size_t>(partition_.rank());
  device::Stream& compute = device_.stream(device::StreamRole::kCompute);
  device::Stream& collective = device_.stream(device::StreamRole::kCollective);
  std::size_t slice_elements = 0;  // per rank: every parameter's slice
  for (model::ParamId id : bucket_.ids) slice_elements += static_cast<std::size_t>(partition_[id].slice_numel);
  ZINF_ASSIGN_OR_RETURN(device::DeviceBuffer packed,
                        pool_.take(slice_elements * world * element,
                                   fmt::format("gradient bucket of {} parameters", bucket_.ids.size())));
  // The backward pass wrote the gradients on the compute stream; packing, the reduction and the
  // copies to the gradient tier follow on the collective stream.
  compute.record(*computed_);
  collective.wait(*computed_);
  auto* base = static_cast<std::byte*>(packed.data());
  // Where parameter i's own slice is after the reduction, in elements from `base`.
  std::vector<std::size_t> own_at(bucket_.ids.size());
  std::size_t offset = 0;
  for (std::size_t i = 0; i < bucket_.ids.size(); ++i) {
    const auto slice = static_cast<std::size_t>(partition_[bucket_.ids[i]].slice_numel);
    const auto* whole = static_cast<const std::byte*>(bucket_.wholes[i].data());
    if (stage_ == 1) {
      device_.copy(base + offset * world * element, whole, slice * world * element, device::CopyKind::kDeviceToDevice,
                   collective);
      own_at[i] = offset * world + rank * slice;
    } else {
      for (std::size_t r = 0; r < world; ++r) {
        device_.copy(base + (r * slice_elements + offset) * element, whole + r * slice * element, slice * element,
                     device::CopyKind::kDeviceToDevice, collective);
      }
      own_at[i] = rank * slice_elements + offset;
    }
    offset += slice;
    pool_.give(std::move(bucket_.wholes[i]), collective);
  }
  if (stage_ == 1) {
    // Stage 1 all-reduces whole gradients (DeepSpeed's stage-1 traffic).
    comm_->all_reduce(base, base, slice_elements * world, bucket_.dtype, collective);
  } else {
    comm_->reduce_scatter(base, base + rank * slice_elements * element, slice_elements, bucket_.dtype, collective);
  }
  const bool on_device = grads_.on_device();
  if (!on_device) collective.record(*reduced_);
  for (std::size_t i = 0; i < bucket_.ids.size(); ++i) {
    const model::ParamId id = bucket_.ids[i];
    const std::byte* own = base + own_at[i] * element;
    const std::size_t bytes = storage_bytes(id);
    if (on_device) {
      // fp32 at this point means fp32 storage (mixed precision reduces the rounded values).
      grads_.copy_from_device(id, own, collective);
    } else {
      ZINF_RETURN_IF_ERROR(track_d2h(bytes));
      copy_down(id, own, bytes, *reduced_);
    }
  }
  pool_.give(std::move(packed), on_device ? collective : device_.stream(device::StreamRole::kDeviceToHost));
  bucket_.ids.clear();
  bucket_.wholes.clear();
  bucket_.bytes = 0;
  // Whoever waits for the gradients committed so far (record_when_stored(): sub-groups of the
  // optimizer pipeline whose last gradient was in this bucket): they are stored once the copies
  // just queued are done.
  record_pending();
  return Status::ok();
}

}  // namespace zinf::zero
