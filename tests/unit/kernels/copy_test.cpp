// copy_bytes / zero_bytes (kernels/copy.h): the same bytes as one memcpy / memset, nothing written
// outside the range, at lengths around the parallel threshold and the 4 KiB split, at unaligned
// starts, with one and with several threads, and from inside a parallel region.
#include "kernels/copy.h"

#include <omp.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "tests/catch.h"

namespace zinf::kernels {
namespace {

constexpr std::size_t kGuard = 64;  // bytes checked untouched on either side
constexpr unsigned char kGuardByte = 0xA5;

std::vector<unsigned char> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<unsigned char> out(n);
  std::uint32_t h = seed;
  for (auto& b : out) {
    h = h * 1664525u + 1013904223u;
    b = static_cast<unsigned char>(h >> 24);
  }
  return out;
}

std::vector<std::size_t> lengths() {
  const std::size_t t = cpu::kParallelCopyBytes;
  return {0, 1, 7, 4095, 4096, 4097, t - 1, t, t + 1, t + 4095, 3 * t + 17, (std::size_t{1} << 20) + 3};
}

void check_copy(std::size_t length, std::size_t offset) {
  const std::vector<unsigned char> source = pattern(length + offset, static_cast<std::uint32_t>(length));
  std::vector<unsigned char> target(length + offset + 2 * kGuard, kGuardByte);
  cpu::copy_bytes(target.data() + kGuard + offset, source.data() + offset, length);
  for (std::size_t i = 0; i < target.size(); ++i) {
    const bool inside = i >= kGuard + offset && i < kGuard + offset + length;
    const unsigned char expected = inside ? source[i - kGuard] : kGuardByte;
    if (target[i] != expected) FAIL("length " << length << " offset " << offset << ": byte " << i << " differs");
  }
}

void check_zero(std::size_t length, std::size_t offset) {
  std::vector<unsigned char> target(length + offset + 2 * kGuard, kGuardByte);
  cpu::zero_bytes(target.data() + kGuard + offset, length);
  for (std::size_t i = 0; i < target.size(); ++i) {
    const bool inside = i >= kGuard + offset && i < kGuard + offset + length;
    if (target[i] != (inside ? 0 : kGuardByte)) {
      FAIL("length " << length << " offset " << offset << ": byte " << i << " is wrong");
    }
  }
}

struct Threads {
  explicit Threads(int n) : saved(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(saved); }
  int saved;
};

TEST_CASE("copy_bytes and zero_bytes move exactly the range, split or not") {
  for (const int threads : {1, 2, 3}) {
    const Threads team(threads);
    for (const std::size_t length : lengths()) {
      for (const std::size_t offset : {std::size_t{0}, std::size_t{1}, std::size_t{13}}) {
        check_copy(length, offset);
        check_zero(length, offset);
      }
    }
  }
}

TEST_CASE("copy_bytes inside a parallel region copies on the calling thread") {
  const std::size_t length = 2 * cpu::kParallelCopyBytes + 5;
  const std::vector<unsigned char> source = pattern(length, 3);
  std::vector<std::vector<unsigned char>> targets(2, std::vector<unsigned char>(length));
  // A team of two (run_team tells ThreadSanitizer about the fork and join libgomp does not show it).
  cpu::parallel::run_team(2, [&](std::size_t, std::size_t me) {
    if (me < 2) cpu::copy_bytes(targets[me].data(), source.data(), length);
  });
  for (const auto& target : targets) REQUIRE(target == source);
}

}  // namespace
}  // namespace zinf::kernels
