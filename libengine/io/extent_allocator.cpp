// ExtentAllocator: first fit over an offset-ordered free list (std::map offset -> length) with
// coalescing on free and grow. Only arithmetic on offsets; it never touches a file.
#include "libengine/io/extent_allocator.h"

#include <algorithm>
#include <bit>
#include <iterator>

#include "libengine/core/check.h"

namespace zinf::io {

ExtentAllocator::ExtentAllocator(std::uint64_t capacity_bytes, std::uint64_t alignment_bytes)
    : capacity_bytes_(0), alignment_bytes_(alignment_bytes) {
  ZINF_CHECK(std::has_single_bit(alignment_bytes), "extent alignment must be a power of two");
  capacity_bytes_ = capacity_bytes - capacity_bytes % alignment_bytes_;
  if (capacity_bytes_ > 0) free_.emplace(0, capacity_bytes_);
}

std::uint64_t ExtentAllocator::round_up(std::uint64_t bytes) const {
  const std::uint64_t remainder = bytes % alignment_bytes_;
  return remainder == 0 ? bytes : bytes + (alignment_bytes_ - remainder);
}

std::optional<std::uint64_t> ExtentAllocator::allocate(std::uint64_t bytes) {
  if (bytes == 0) return 0;
  // Checked first so round_up cannot overflow: capacity is itself a multiple of the alignment.
  if (bytes > capacity_bytes_ - used_bytes_) return std::nullopt;
  const std::uint64_t size = round_up(bytes);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const std::uint64_t offset = it->first;
    const std::uint64_t remaining = it->second - size;
    // Take from the front so the tail of the file stays one free range for the next large request.
    free_.erase(it);
    if (remaining > 0) free_.emplace(offset + size, remaining);
    used_bytes_ += size;
    return offset;
  }
  return std::nullopt;
}

void ExtentAllocator::free(std::uint64_t offset, std::uint64_t bytes) {
  if (bytes == 0) return;  // allocate(0) used no space
  const std::uint64_t size = round_up(bytes);
  ZINF_CHECK(offset % alignment_bytes_ == 0, "freed extent offset is not aligned");
  ZINF_CHECK(offset <= capacity_bytes_ && size <= capacity_bytes_ - offset, "freed extent lies beyond the capacity");
  ZINF_CHECK(size <= used_bytes_, "freed more bytes than are allocated");

  auto next = free_.lower_bound(offset);
  ZINF_CHECK(next == free_.end() || offset + size <= next->first, "freed extent overlaps a free range");
  std::uint64_t start = offset;
  std::uint64_t length = size;
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    ZINF_CHECK(prev->first + prev->second <= offset, "freed extent overlaps a free range");
    if (prev->first + prev->second == offset) {  // coalesce with the range before
      start = prev->first;
      length += prev->second;
      free_.erase(prev);
    }
  }
  if (next != free_.end() && next->first == offset + size) {  // coalesce with the range after
    length += next->second;
    free_.erase(next);
  }
  free_.emplace(start, length);
  used_bytes_ -= size;
}

void ExtentAllocator::grow(std::uint64_t new_capacity_bytes) {
  const std::uint64_t new_capacity = new_capacity_bytes - new_capacity_bytes % alignment_bytes_;
  if (new_capacity <= capacity_bytes_) return;
  std::uint64_t start = capacity_bytes_;
  std::uint64_t length = new_capacity - capacity_bytes_;
  if (!free_.empty()) {
    auto last = std::prev(free_.end());
    if (last->first + last->second == capacity_bytes_) {  // the old tail was free: extend it
      start = last->first;
      length += last->second;
      free_.erase(last);
    }
  }
  free_.emplace(start, length);
  capacity_bytes_ = new_capacity;
}

std::uint64_t ExtentAllocator::largest_free_bytes() const {
  std::uint64_t largest = 0;
  for (const auto& [offset, length] : free_) largest = std::max(largest, length);
  return largest;
}

}  // namespace zinf::io
