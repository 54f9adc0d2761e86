// StagingPool: one AlignedBuffer cut into equal, indexed bounce buffers, a free stack under a
// mutex, and in-use/peak counters. It does no I/O and never waits: try_acquire() says "none free"
// and the caller decides how to wait.
#include "libengine/memory/staging_pool.h"

#include <algorithm>
#include <bit>
#include <climits>

#include <fmt/format.h>

#include "libengine/core/check.h"
#include "libengine/core/units.h"

namespace zinf::memory {
namespace {

std::string bytes_text(std::uint64_t bytes) {
  return fmt::format("{} ({} bytes)", format_bytes(static_cast<double>(bytes)), bytes);
}

}  // namespace

std::uint64_t StagingPool::recommended_bytes(std::uint64_t largest_transfer_bytes, std::uint64_t block_bytes,
                                             unsigned queue_depth, std::uint64_t budget_bytes) {
  ZINF_CHECK(block_bytes > 0, "staging block size must be positive");
  // A transfer of N blocks can keep at most N buffers busy, so more than that would sit idle.
  const std::uint64_t blocks_in_largest =
      largest_transfer_bytes / block_bytes + (largest_transfer_bytes % block_bytes != 0 ? 1 : 0);
  std::uint64_t buffers = std::max<std::uint64_t>(std::min<std::uint64_t>(queue_depth, blocks_in_largest), 1);
  if (budget_bytes > 0) buffers = std::min(buffers, std::max<std::uint64_t>(budget_bytes / block_bytes, 1));
  return buffers * block_bytes;
}

Result<std::unique_ptr<StagingPool>> StagingPool::create(std::uint64_t total_bytes, std::uint64_t buffer_bytes,
                                                         std::uint64_t alignment_bytes) {
  if (!std::has_single_bit(alignment_bytes)) {
    return Status::invalid_argument(
        fmt::format("staging pool: alignment {} bytes is not a power of two", alignment_bytes));
  }
  if (buffer_bytes == 0) {
    return Status::invalid_argument("staging pool: buffer size is 0 bytes; expected a positive size");
  }
  if (buffer_bytes % alignment_bytes != 0) {
    return Status::invalid_argument(
        fmt::format("staging pool: buffer size {} is not a multiple of the alignment {} bytes",
                    bytes_text(buffer_bytes), alignment_bytes));
  }
  if (total_bytes % alignment_bytes != 0) {
    return Status::invalid_argument(
        fmt::format("staging pool: total size {} is not a multiple of the alignment {} bytes", bytes_text(total_bytes),
                    alignment_bytes));
  }
  if (total_bytes < buffer_bytes) {
    return Status::invalid_argument(fmt::format("staging pool: total size {} is smaller than one buffer of {}",
                                                bytes_text(total_bytes), bytes_text(buffer_bytes)));
  }
  const std::uint64_t count = total_bytes / buffer_bytes;
  if (count > static_cast<std::uint64_t>(INT_MAX)) {  // indices are ints (io_uring buffer indices)
    return Status::invalid_argument(fmt::format("staging pool: {} buffers of {} is more than the {} a pool can index",
                                                count, bytes_text(buffer_bytes), INT_MAX));
  }
  if (buffer_bytes > SIZE_MAX / count) {
    return Status::out_of_memory(
        fmt::format("staging pool: {} buffers of {} do not fit in the address space", count, bytes_text(buffer_bytes)));
  }
  // AlignedBuffer needs at least pointer alignment; a buffered swap file asks for 1, and starting
  // the pool on a cache line costs nothing.
  const std::size_t memory_alignment = std::max<std::size_t>(static_cast<std::size_t>(alignment_bytes), 64);
  auto memory = AlignedBuffer::allocate(static_cast<std::size_t>(count * buffer_bytes), memory_alignment);
  if (!memory.is_ok()) return memory.status().with_context("staging pool");

  std::unique_ptr<StagingPool> pool(new StagingPool());
  pool->memory_ = std::move(memory).value();
  pool->buffer_bytes_ = buffer_bytes;
  pool->buffers_.reserve(count);
  pool->free_.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) pool->buffers_.push_back(pool->memory_.data() + i * buffer_bytes);
  // A stack popped from the back: buffer 0 is handed out first.
  for (std::uint64_t i = count; i > 0; --i) pool->free_.push_back(static_cast<int>(i - 1));
  pool->in_use_flags_.assign(count, false);
  return pool;
}

std::optional<StagingPool::Buffer> StagingPool::try_acquire() {
  std::lock_guard lock(mutex_);
  if (free_.empty()) return std::nullopt;
  const int index = free_.back();
  free_.pop_back();
  in_use_flags_[static_cast<std::size_t>(index)] = true;
  ++in_use_;
  peak_in_use_ = std::max(peak_in_use_, in_use_);
  return Buffer{buffers_[static_cast<std::size_t>(index)], index};
}

void StagingPool::release(int index) {
  std::lock_guard lock(mutex_);
  ZINF_CHECK(index >= 0 && static_cast<std::size_t>(index) < buffers_.size(),
             "released staging buffer index out of range");
  ZINF_CHECK(in_use_flags_[static_cast<std::size_t>(index)], "staging buffer released twice");
  in_use_flags_[static_cast<std::size_t>(index)] = false;
  free_.push_back(index);
  --in_use_;
}

std::size_t StagingPool::in_use() const {
  std::lock_guard lock(mutex_);
  return in_use_;
}

std::size_t StagingPool::peak_in_use() const {
  std::lock_guard lock(mutex_);
  return peak_in_use_;
}

std::vector<iovec> StagingPool::iovecs() const {
  // buffers_ and buffer_bytes_ never change after create(), so no lock is needed.
  std::vector<iovec> result;
  result.reserve(buffers_.size());
  for (std::byte* buffer : buffers_) result.push_back(iovec{buffer, static_cast<std::size_t>(buffer_bytes_)});
  return result;
}

}  // namespace zinf::memory
