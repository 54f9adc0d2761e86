// AlignedBuffer: an owned, aligned, zero-initialised block of host memory (posix_memalign).
// Buffers of 2 MiB or more are 2 MiB-aligned and backed by transparent huge pages where the kernel
// allows (madvise), which makes direct I/O requests larger and fewer.
// The memory that direct I/O and SIMD kernels need; movable, not copyable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "libengine/core/status.h"

namespace zinf::memory {

// How an allocation the system refused begins its message: "host memory: the system refused
// 24.0 GiB (...): Cannot allocate memory; the limit is this machine's memory (...)". Callers that
// turn a budget's OutOfMemory into "raise <field>" must not do so for these: no budget failed.
inline constexpr std::string_view kSystemRefusedPrefix = "host memory: the system refused";
// True for an OutOfMemory whose message begins with kSystemRefusedPrefix (callers may append to it).
bool refused_by_system(const Status& status);

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // OutOfMemory (beginning with kSystemRefusedPrefix) names the bytes and alignment requested and
  // the machine's limits. alignment must be a power of two (at least sizeof(void*)).
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
