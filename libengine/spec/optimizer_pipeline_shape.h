// OptimizerPipelineShape: how the optimizer states of ZeRO's host-side optimizer are cut into
// sub-groups and how many host buffers stream them from NVMe — one function shared by the engine
// (zero/partitioned_states, which builds exactly this) and the planner (planner/engine_model, which
// predicts the engine's host memory from it), so the plan cannot drift from what the engine does.
//
// The rules: sub-groups are runs of whole parameters of at most `target` elements, in table order
// over the flat per-kind arrays; a parameter larger than `target` is split into equal pieces
// (rounded up to kSliceAlignElements) of its padded slice. With the optimizer on NVMe, `target` is
// the smaller of 16M elements (no host budget) or what three buffers of the budget left allow
// (at most 256M), and of an eighth of all elements (at least 8 sub-groups: the pipeline exposes
// one sub-group's read at its start and one's write at its end), never below the smallest piece
// (1M elements, or the largest parameter if smaller; zero.sub_group_size overrides both). A
// split parameter's new values gather whole in one more host buffer. Three buffers of the widest
// sub-group at least; more, up to 16 and one per sub-group, while they fit in the budget that is
// left after the first three (the caller's host_left_bytes already keeps slack for later buffers):
// with clipping every sub-group's states must be in host memory when the gradient norm is known, or
// the last ones are read after the backward pass. With the optimizer on the CPU the states stay in place
// and the sub-groups only pace the pipeline (target: an eighth of the elements).
//
// Pure arithmetic; no allocation beyond the result.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "libengine/spec/state_placement.h"

namespace zinf::spec {

// Every rank's slice of a parameter is padded to a multiple of this many elements (zero/partition.h):
// 128 B of fp32, 64 B of bf16 — vector and DMA friendly. Pieces of split parameters are too.
inline constexpr std::int64_t kSliceAlignElements = 32;

struct SubGroupRange {
  std::int32_t first = 0;  // parameters [first, last]: whole ones, or one piece of first == last
  std::int32_t last = 0;
  std::int64_t flat_begin = 0;  // elements of the flat per-kind arrays
  std::int64_t flat_end = 0;
};

struct OptimizerPipelineShape {
  std::vector<SubGroupRange> groups;
  std::int64_t widest = 0;              // elements of the widest sub-group
  std::size_t widest_group = 0;         // its index (the first of equally wide ones)
  std::size_t buffers = 0;              // NVMe: host buffers of `widest` elements; 0 on the CPU tier
  std::int64_t split_out_elements = 0;  // NVMe: the buffer of a split parameter's new values; 0: none split
  std::uint64_t split_out_bytes = 0;    // ... its bytes (storage precision; fp32 master values without mixed)
  std::uint64_t host_bytes = 0;         // what the buffers take from the host tier
  // NVMe with a host budget too small for even three buffers of the smallest sub-groups: what the
  // pipeline would need (`groups` is empty then).
  std::uint64_t needed_bytes = 0;
  std::int64_t smallest = 0;  // the smallest sub-group it could have chosen
  bool fits() const { return !groups.empty(); }
};

struct OptimizerPipelineInput {
  std::span<const std::int64_t> slices;  // per parameter in table order: its padded slice (elements)
  Tier optimizer = Tier::kCpu;           // kCpu or kNvme
  std::uint64_t half_bytes = 0;          // mixed precision: bytes of a storage-precision element; 0: fp32
  // NVMe: host budget bytes left for the pipeline, or no budget.
  bool budgeted = false;
  std::uint64_t host_left_bytes = 0;
  std::int64_t sub_group_size = 0;  // zero.sub_group_size; 0: derived
};

OptimizerPipelineShape shape_optimizer_pipeline(const OptimizerPipelineInput& input);

}  // namespace zinf::spec
