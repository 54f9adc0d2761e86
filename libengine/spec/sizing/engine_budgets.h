// Engine budgets: the byte budgets the partitioned engine (libengine/zero) resolves for its buffers,
// and the bytes per element of each kind of state it keeps — the rules the engine allocates by and
// the planner (planner/engine_model) predicts from, so a plan cannot drift from what the engine does.
//
//  - zero.max_live_bytes (0: derived): gathered parameters on the device,
//    min(max(offloaded params, 2 × the largest), max(4 × the largest, 256 MiB)), over whole padded
//    parameters (every rank's slice); only when the parameters do not live on the device;
//  - zero.prefetch_bytes (0: derived): with the parameters on NVMe, 2 × max_live_bytes;
//  - zero.reduce_bucket_bytes (0: derived): max(4 MiB, the largest whole fp32 gradient);
//  - the host slack the optimizer pipeline leaves for later host buffers: min(64 MiB, budget / 16);
//  - the device bytes the engine's transient buffers need beside its allocations at set-up.
// Pure arithmetic; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "libengine/core/dtype.h"
#include "libengine/spec/optimizer_pipeline_shape.h"
#include "libengine/spec/zero_config.h"

namespace zinf::sizing {

inline constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

// Bytes per element of each kind of state one rank keeps for its slice.
struct StateElementBytes {
  std::uint64_t params = 0;  // storage precision
  std::uint64_t grads = 0;   // storage precision (the fp32 gradients exist only as buffers in flight)
  std::uint64_t master = 0;  // fp32 master weights (the replicated engine keeps none in fp32)
  std::uint64_t adam_m = 4;
  std::uint64_t adam_v = 4;
  std::uint64_t optimizer() const { return master + adam_m + adam_v; }
};
// `partitioned`: ZeRO stages 1-3 (fp32 master weights always), else the replicated engine.
StateElementBytes state_element_bytes(bool partitioned, DType precision);

// Optimizer states streamed to and from NVMe: master, m and v in fp32.
inline constexpr std::uint64_t kNvmeOptimizerBytesPerElement = 12;
// CPU Adam's memory traffic per element: reads master, m, v and the fp32 gradient, writes master, m, v.
inline constexpr std::uint64_t kAdamStreamBytesPerElement = 28;

// The parameter sizes the budgets are derived from, over whole padded parameters.
struct ParamSizes {
  std::uint64_t largest_storage = 0;    // the largest parameter in storage precision
  std::uint64_t offloaded_storage = 0;  // parameters above zero.persistence_threshold, storage precision
  std::uint64_t largest_fp32 = 0;       // the largest parameter in fp32
};
// `numels`: every parameter's element count in table order; each is padded as zero/partition.h
// pads it (world_size slices of a multiple of spec::kSliceAlignElements).
ParamSizes param_sizes(std::span<const std::int64_t> numels, std::int64_t persistence_threshold,
                       std::size_t storage_bytes, std::int64_t world_size);

// Every rank's slice of a parameter of `numel` elements, padded (zero/partition.h).
std::int64_t padded_slice(std::int64_t numel, std::int64_t world_size);

// `zero` with max_live_bytes, prefetch_bytes and reduce_bucket_bytes resolved (a given value kept).
spec::ZeroConfig resolve_budgets(spec::ZeroConfig zero, const ParamSizes& sizes);

// Host memory the optimizer pipeline leaves for what else the engine allocates on the host tier
// later (checkpoint and staging buffers): a sixteenth of the budget, at most 64 MiB.
std::uint64_t host_slack_bytes(std::uint64_t host_capacity);

// The optimizer pipeline's input (spec/optimizer_pipeline_shape.h): the padded slices, the tier,
// the storage precision, and what a host budget of `host_capacity` (0: none) leaves after
// `host_used` bytes already allocated, zero.prefetch_bytes of NVMe read staging and the slack.
spec::OptimizerPipelineInput optimizer_pipeline_input(std::span<const std::int64_t> slices,
                                                      const spec::ZeroConfig& zero, DType precision,
                                                      std::uint64_t host_capacity, std::uint64_t host_used);

// Device bytes the partitioned engine's buffers take while it runs, beyond what it allocates at
// set-up: gathered parameters (max_live_bytes unless the parameters live on the device), fp32
// gradient and view buffers of the largest parameter (3×), and across ranks (`gathering`) a
// bucket's gradients and their packed copy, each of which may overrun by one gradient.
struct TransientDeviceBytes {
  std::uint64_t gathered = 0;
  std::uint64_t fp32_buffers = 0;
  std::uint64_t buckets = 0;
  std::uint64_t total() const { return gathered + fp32_buffers + buckets; }
};
TransientDeviceBytes transient_device_bytes(const spec::ZeroConfig& resolved, const ParamSizes& sizes, bool gathering);

}  // namespace zinf::sizing
