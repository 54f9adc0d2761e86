// StagingPool: the aligned bounce buffers between tensors and the NVMe tier, under one byte budget.
//
// Direct I/O needs aligned memory, offsets and lengths. Tensors that are already aligned go to
// disk without a copy; everything else (unaligned tensors, the unaligned tail of a tensor) is
// copied through a staging buffer. All buffers are carved from one allocation whose size is
// computed from what will be swapped (recommended_bytes), never from a hand-tuned count, and is
// reported when the store opens. Buffers are equal-sized and indexed so the I/O engine can
// register them once (io_uring fixed buffers).
//
// Thread-safe: acquire/release may be called from any thread.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "libengine/core/status.h"
#include "libengine/memory/aligned_buffer.h"

namespace zinf::memory {

class StagingPool {
 public:
  struct Buffer {
    std::byte* data = nullptr;
    int index = -1;  // 0..buffer_count()-1, the registration index
  };

  // Enough buffers to keep `queue_depth` block-sized transfers in flight, but never more than the
  // largest single transfer can use, and never more than `budget_bytes` when that is non-zero.
  // At least one buffer. Result is a multiple of block_bytes.
  static std::uint64_t recommended_bytes(std::uint64_t largest_transfer_bytes, std::uint64_t block_bytes,
                                         unsigned queue_depth, std::uint64_t budget_bytes);

  // total_bytes / buffer_bytes buffers of buffer_bytes each, every one aligned to alignment_bytes.
  // InvalidArgument when total_bytes < buffer_bytes or sizes are not multiples of the alignment;
  // OutOfMemory when the allocation fails.
  static Result<std::unique_ptr<StagingPool>> create(std::uint64_t total_bytes, std::uint64_t buffer_bytes,
                                                     std::uint64_t alignment_bytes);

  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;
  ~StagingPool() = default;

  // A free buffer, or nullopt when all are in use (the caller waits for a completion first).
  std::optional<Buffer> try_acquire();
  // Returns a buffer from try_acquire(). Releasing twice is a bug (ZINF_CHECK).
  void release(int index);

  std::size_t buffer_count() const { return buffers_.size(); }
  std::uint64_t buffer_bytes() const { return buffer_bytes_; }
  std::uint64_t total_bytes() const { return buffer_bytes_ * buffers_.size(); }
  std::size_t in_use() const;
  std::size_t peak_in_use() const;
  // One iovec per buffer, by index, for IoEngine::register_buffers.
  std::vector<iovec> iovecs() const;

 private:
  StagingPool() = default;
  AlignedBuffer memory_;
  std::uint64_t buffer_bytes_ = 0;
  std::vector<std::byte*> buffers_;
  mutable std::mutex mutex_;  // guards free_ and the counters
  std::vector<int> free_;
  std::vector<bool> in_use_flags_;
  std::size_t in_use_ = 0;
  std::size_t peak_in_use_ = 0;
};

}  // namespace zinf::memory
