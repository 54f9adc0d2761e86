// AlignedBuffer: posix_memalign + zero fill + free, behind a movable owner. Not a pool and not
// pinned: pinning (cudaHostRegister) is the host tier's business.
#include "libengine/memory/aligned_buffer.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "libengine/core/units.h"

namespace zinf::memory {
namespace {

// What bounds an allocation from the system: the memory the kernel lets it commit (RAM and swap,
// under the default overcommit heuristic) and the process's address-space limit (ulimit -v).
std::string system_memory_limits() {
  struct sysinfo info {};
  std::string text = "the limit is this machine's memory";
  if (::sysinfo(&info) == 0) {
    const double unit = info.mem_unit == 0 ? 1.0 : static_cast<double>(info.mem_unit);
    text += fmt::format(" ({} of RAM, {} of it free, and {} of swap)",
                        format_bytes(static_cast<double>(info.totalram) * unit),
                        format_bytes(static_cast<double>(info.freeram) * unit),
                        format_bytes(static_cast<double>(info.totalswap) * unit));
  }
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    text += fmt::format(" or this process's address-space limit of {} (ulimit -v)",
                        format_bytes(static_cast<double>(limit.rlim_cur)));
  }
  return text;
}

}  // namespace

bool refused_by_system(const Status& status) {
  return status.code() == ErrorCode::kOutOfMemory && status.message().rfind(kSystemRefusedPrefix, 0) == 0;
}
namespace {
constexpr std::size_t kHugePageBytes = 2u << 20;
}  // namespace

Result<AlignedBuffer> AlignedBuffer::allocate(std::size_t bytes, std::size_t alignment_bytes) {
  if (!std::has_single_bit(alignment_bytes) || alignment_bytes < sizeof(void*)) {
    return Status::invalid_argument(fmt::format(
        "aligned buffer: alignment {} bytes is not a power of two of at least {}", alignment_bytes, sizeof(void*)));
  }
  AlignedBuffer buffer;
  if (bytes == 0) return buffer;
  const auto out_of_memory = [&](int error) {
    return Status::out_of_memory(fmt::format("{} {} ({} bytes, aligned to {} bytes): {}; {}", kSystemRefusedPrefix,
                                             format_bytes(static_cast<double>(bytes)), bytes, alignment_bytes,
                                             std::strerror(error), system_memory_limits()));
  };
  // No object may be larger than PTRDIFF_MAX (pointer differences inside it would overflow); such
  // requests are refused here rather than handed to an allocator that may abort on them (ASan).
  if (bytes > static_cast<std::size_t>(PTRDIFF_MAX) - alignment_bytes) return out_of_memory(ENOMEM);
  // Large buffers sit on 2 MiB boundaries and ask for transparent huge pages, before the zero fill
  // faults them in. Physically contiguous 2 MiB runs keep a 1 MiB direct-I/O request to a single
  // segment, so the block layer can merge neighbouring requests instead of splitting each one at
  // the device's segment limit (254 on virtio-blk), and the CPU kernels take fewer TLB misses. Where
  // THP is off, madvise fails or does nothing and the buffer is ordinary memory.
  const std::size_t alignment = bytes >= kHugePageBytes ? std::max(alignment_bytes, kHugePageBytes) : alignment_bytes;
  if (bytes > static_cast<std::size_t>(PTRDIFF_MAX) - alignment) return out_of_memory(ENOMEM);
  void* memory = nullptr;
  const int error = ::posix_memalign(&memory, alignment, bytes);
  if (error != 0) return out_of_memory(error);
  if (bytes >= kHugePageBytes) (void)::madvise(memory, bytes / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
  std::memset(memory, 0, bytes);
  buffer.data_ = static_cast<std::byte*>(memory);
  buffer.size_ = bytes;
  return buffer;
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

}  // namespace zinf::memory
