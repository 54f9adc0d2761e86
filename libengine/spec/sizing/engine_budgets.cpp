#include "libengine/spec/sizing/engine_budgets.h"

#include <algorithm>

namespace zinf::sizing {

StateElementBytes state_element_bytes(bool partitioned, DType precision) {
  StateElementBytes out;
  out.params = dtype_size_bytes(precision);
  out.grads = dtype_size_bytes(precision);
  out.master = partitioned || precision != DType::kF32 ? 4 : 0;
  return out;
}

std::int64_t padded_slice(std::int64_t numel, std::int64_t world_size) {
  const std::int64_t share = (numel + world_size - 1) / world_size;
  return (share + spec::kSliceAlignElements - 1) / spec::kSliceAlignElements * spec::kSliceAlignElements;
}

ParamSizes param_sizes(std::span<const std::int64_t> numels, std::int64_t persistence_threshold,
                       std::size_t storage_bytes, std::int64_t world_size) {
  ParamSizes out;
  for (std::int64_t n : numels) {
    const auto whole = static_cast<std::uint64_t>(padded_slice(n, world_size) * world_size);
    out.largest_storage = std::max<std::uint64_t>(out.largest_storage, whole * storage_bytes);
    out.largest_fp32 = std::max<std::uint64_t>(out.largest_fp32, whole * 4);
    if (n > persistence_threshold) out.offloaded_storage += whole * storage_bytes;
  }
  return out;
}

spec::ZeroConfig resolve_budgets(spec::ZeroConfig zero, const ParamSizes& sizes) {
  if (zero.partitioned() && zero.params != spec::Tier::kDevice && zero.max_live_bytes == 0) {
    zero.max_live_bytes = std::min(std::max(sizes.offloaded_storage, 2 * sizes.largest_storage),
                                   std::max<std::uint64_t>(4 * sizes.largest_storage, 256 * kMiB));
  }
  // Cannot wrap: a given max_live_bytes is at most spec::kMaxZeroBudgetBytes (2^60), a derived one
  // at most 4 x the largest parameter.
  if (zero.partitioned() && zero.params == spec::Tier::kNvme && zero.prefetch_bytes == 0) {
    zero.prefetch_bytes = 2 * zero.max_live_bytes;
  }
  // Gradient buckets across ranks: a few MiB per collective (many small parameters share one call),
  // and at least the largest whole gradient (a bucket holds one parameter at least).
  if (zero.reduce_bucket_bytes == 0) zero.reduce_bucket_bytes = std::max<std::uint64_t>(4 * kMiB, sizes.largest_fp32);
  return zero;
}

std::uint64_t host_slack_bytes(std::uint64_t host_capacity) {
  return std::min<std::uint64_t>(64 * kMiB, host_capacity / 16);
}

spec::OptimizerPipelineInput optimizer_pipeline_input(std::span<const std::int64_t> slices,
                                                      const spec::ZeroConfig& zero, DType precision,
                                                      std::uint64_t host_capacity, std::uint64_t host_used) {
  spec::OptimizerPipelineInput input{slices, zero.optimizer,
                                     precision != DType::kF32 ? dtype_size_bytes(precision) : 0};
  input.sub_group_size = zero.sub_group_size;
  const std::uint64_t reserved = host_used + zero.prefetch_bytes + host_slack_bytes(host_capacity);
  input.budgeted = host_capacity > 0;
  input.host_left_bytes = host_capacity > reserved ? host_capacity - reserved : 0;
  return input;
}

TransientDeviceBytes transient_device_bytes(const spec::ZeroConfig& resolved, const ParamSizes& sizes, bool gathering) {
  TransientDeviceBytes out;
  out.gathered = resolved.params == spec::Tier::kDevice ? 0 : resolved.max_live_bytes;
  out.fp32_buffers = 3 * sizes.largest_fp32;
  out.buckets = gathering ? 2 * (resolved.reduce_bucket_bytes + sizes.largest_fp32) : 0;
  return out;
}

}  // namespace zinf::sizing
