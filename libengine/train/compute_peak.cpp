#include "libengine/train/compute_peak.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "kernels/matmul.h"

namespace zinf::train {

ComputePeak measure_matmul_peak() {
  constexpr int kN = 2048;
  constexpr std::size_t kElements = static_cast<std::size_t>(kN) * kN;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point probe_start = Clock::now();
  std::vector<float> a(kElements), b(kElements), c(kElements);
  for (std::size_t i = 0; i < kElements; ++i) {
    a[i] = static_cast<float>(i % 13) * 0.01f;
    b[i] = static_cast<float>(i % 7) * 0.02f;
  }
  double best_seconds = 0;
  for (int run = 0; run < 4; ++run) {  // run 0 warms caches, pages and the BLAS thread pool
    const Clock::time_point start = Clock::now();
    kernels::cpu::matmul_forward(c.data(), a.data(), b.data(), nullptr, kN, kN, kN);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (run > 0) best_seconds = best_seconds == 0 ? seconds : std::min(best_seconds, seconds);
  }
  ComputePeak peak;
  peak.matrix_size = kN;
  peak.flops_per_s = 2.0 * kN * static_cast<double>(kN) * kN / best_seconds;
  peak.seconds = std::chrono::duration<double>(Clock::now() - probe_start).count();
  return peak;
}

}  // namespace zinf::train
