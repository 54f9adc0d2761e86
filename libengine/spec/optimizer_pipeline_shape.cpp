#include "libengine/spec/optimizer_pipeline_shape.h"

#include <algorithm>
#include <optional>

namespace zinf::spec {
namespace {

constexpr std::uint64_t kPipelineBuffers = 3;  // read ahead, step, write behind
constexpr std::size_t kMaxPipelineBuffers = 16;
constexpr std::int64_t kMinSubGroups = 8;
constexpr std::int64_t kDefaultSubGroupElements = std::int64_t{16} << 20;
constexpr std::int64_t kMaxSubGroupElements = std::int64_t{256} << 20;
// Smaller NVMe extents cost the drive more per byte than they hide (12 MiB of states each).
constexpr std::int64_t kMinPieceElements = std::int64_t{1} << 20;

std::vector<SubGroupRange> cut(std::span<const std::int64_t> slices, std::int64_t target) {
  std::vector<SubGroupRange> groups;
  std::optional<SubGroupRange> open;  // whole parameters gathered so far
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < slices.size(); ++i) {
    const auto id = static_cast<std::int32_t>(i);
    const std::int64_t end = offset + slices[i];
    if (slices[i] > target) {
      if (open) groups.push_back(*open);
      open.reset();
      const std::int64_t pieces = (slices[i] + target - 1) / target;
      const std::int64_t per_piece =
          ((slices[i] + pieces - 1) / pieces + kSliceAlignElements - 1) / kSliceAlignElements * kSliceAlignElements;
      for (std::int64_t begin = offset; begin < end; begin += per_piece) {
        groups.push_back({id, id, begin, std::min(end, begin + per_piece)});
      }
    } else {
      if (open && end - open->flat_begin > target) {
        groups.push_back(*open);
        open.reset();
      }
      if (!open) open = SubGroupRange{id, id, offset, end};
      open->last = id;
      open->flat_end = end;
    }
    offset = end;
  }
  if (open) groups.push_back(*open);
  return groups;
}

// The widest sub-group, the first of equal ones.
void set_widest(OptimizerPipelineShape& shape) {
  for (std::size_t g = 0; g < shape.groups.size(); ++g) {
    const std::int64_t width = shape.groups[g].flat_end - shape.groups[g].flat_begin;
    if (width > shape.widest) {
      shape.widest = width;
      shape.widest_group = g;
    }
  }
}

}  // namespace

OptimizerPipelineShape shape_optimizer_pipeline(const OptimizerPipelineInput& input) {
  OptimizerPipelineShape shape;
  std::int64_t flat = 0;
  std::int64_t largest = 0;
  for (const std::int64_t n : input.slices) {
    flat += n;
    largest = std::max(largest, n);
  }
  const std::int64_t eighth = (flat + kMinSubGroups - 1) / kMinSubGroups;
  std::int64_t smallest = std::min(largest, kMinPieceElements);
  if (input.sub_group_size > 0) smallest = std::min(smallest, input.sub_group_size);
  smallest = std::max<std::int64_t>(smallest, 1);
  shape.smallest = smallest;
  const auto capped = [&](std::int64_t target) {
    target = std::max(smallest, std::min(target, eighth));
    return input.sub_group_size > 0 ? std::min(target, input.sub_group_size) : target;
  };
  if (input.optimizer != Tier::kNvme) {
    shape.groups = cut(input.slices, capped(eighth));
    set_widest(shape);
    return shape;
  }
  const std::uint64_t per_element = 12 + input.half_bytes;
  const std::uint64_t split_per_element = input.half_bytes > 0 ? input.half_bytes : 4;
  const auto split_out = [&](std::int64_t target) -> std::uint64_t {
    return largest > target ? split_per_element * static_cast<std::uint64_t>(largest) : 0;
  };
  const auto need = [&](std::int64_t target) {
    return kPipelineBuffers * per_element * static_cast<std::uint64_t>(target) + split_out(target);
  };
  std::int64_t target = kDefaultSubGroupElements;
  if (input.budgeted) {
    target = std::min<std::int64_t>(
        kMaxSubGroupElements, static_cast<std::int64_t>(input.host_left_bytes / (kPipelineBuffers * per_element)));
  }
  target = capped(target);
  if (input.budgeted) {
    // Splitting may add the buffer of a split parameter's new values: halve until both fit.
    while (need(target) > input.host_left_bytes && target > smallest) target = std::max(smallest, target / 2);
    if (need(target) > input.host_left_bytes) {
      shape.needed_bytes = need(smallest);
      return shape;
    }
  }
  shape.groups = cut(input.slices, target);
  set_widest(shape);
  shape.split_out_elements = largest > target ? largest : 0;
  shape.split_out_bytes = split_out(target);
  const std::uint64_t buffer_bytes = per_element * static_cast<std::uint64_t>(shape.widest);
  std::size_t buffers = kPipelineBuffers;
  if (input.budgeted && buffer_bytes > 0) {
    const std::uint64_t first = kPipelineBuffers * buffer_bytes + shape.split_out_bytes;
    const std::uint64_t spare = input.host_left_bytes - std::min(input.host_left_bytes, first);
    buffers += static_cast<std::size_t>(spare / buffer_bytes);
  }
  shape.buffers = std::min({buffers, kMaxPipelineBuffers, shape.groups.size()});
  shape.host_bytes = shape.buffers * buffer_bytes + shape.split_out_bytes;
  return shape;
}

}  // namespace zinf::spec
