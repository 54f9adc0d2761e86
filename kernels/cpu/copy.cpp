// copy_bytes / zero_bytes (kernels/copy.h): one memcpy or memset per thread of the team, on ranges
// whose lengths are multiples of 4 KiB (so neighbours share at most one cache line and page).
#include "kernels/copy.h"

#include <omp.h>

#include <cstring>

#include "kernels/cpu/parallel.h"

namespace zinf::kernels::cpu {
namespace {

constexpr std::size_t kPage = 4096;

int team_size(std::size_t bytes) {
  if (bytes < kParallelCopyBytes || omp_in_parallel() != 0) return 1;
  return parallel::resolve_threads(0);
}

}  // namespace

void copy_bytes(void* dst, const void* src, std::size_t bytes) {
  auto* out = static_cast<unsigned char*>(dst);
  const auto* in = static_cast<const unsigned char*>(src);
  parallel::for_each_range(bytes, kParallelCopyBytes, kPage, team_size(bytes), [&](std::size_t begin, std::size_t end) {
    std::memcpy(out + begin, in + begin, end - begin);
  });
}

void zero_bytes(void* dst, std::size_t bytes) {
  auto* out = static_cast<unsigned char*>(dst);
  parallel::for_each_range(bytes, kParallelCopyBytes, kPage, team_size(bytes),
                           [&](std::size_t begin, std::size_t end) { std::memset(out + begin, 0, end - begin); });
}

}  // namespace zinf::kernels::cpu
