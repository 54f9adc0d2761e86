// Counter-based normal fill (random.h). The work is libm's log and cos in double, about 50 ns an
// element on one 2020s x86 core: a 1.3B-parameter model spent over a minute here on one thread
// before its first step (seen on the GPU machine), so the array is split over the compute threads.
#include "kernels/random.h"

#include <cmath>

#include "kernels/cpu/parallel.h"

namespace zinf::kernels::cpu {
namespace {

double unit_open(std::uint64_t bits) {  // (0, 1]: 53 random bits, never 0, so log() is finite
  return (static_cast<double>(bits >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

// Below this many elements one thread does it: a team's start costs more than the work.
constexpr std::size_t kMinParallel = std::size_t{1} << 14;

}  // namespace

std::uint64_t counter_mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void counter_normal_fill(float* out, std::size_t n, std::uint64_t stream, std::uint64_t first_index, double scale,
                         int num_threads) {
  parallel::for_each_range(n, kMinParallel, 1, parallel::resolve_threads(num_threads),
                           [&](std::size_t begin, std::size_t end) {
                             for (std::size_t i = begin; i < end; ++i) {
                               const std::uint64_t index = first_index + i;
                               const double u1 = unit_open(counter_mix(stream ^ (2 * index)));
                               const double u2 = unit_open(counter_mix(stream ^ (2 * index + 1)));
                               const double normal = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
                               out[i] = static_cast<float>(normal * scale);
                             }
                           });
}

}  // namespace zinf::kernels::cpu
