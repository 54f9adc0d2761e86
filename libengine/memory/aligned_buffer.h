// AlignedBuffer: an owned, aligned, zero-initialised block of host memory (posix_memalign).
// Buffers of 2 MiB or more are 2 MiB-aligned and backed by transparent huge pages where the kernel
// allows (madvise), which makes direct I/O requests larger and fewer.
// The memory that direct I/O and SIMD kernels need; movable, not copyable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "libengine/core/status.h"

namespace zinf::memory {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // OutOfMemory names the bytes and alignment requested. alignment must be a power of two
  // (at least sizeof(void*)).
  static Result<AlignedBuffer> allocate(std::size_t bytes, std::size_t alignment_bytes);

  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::span<std::byte> bytes() { return {data_, size_}; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace zinf::memory
