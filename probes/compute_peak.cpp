#include "probes/compute_peak.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/format.h>

#include "kernels/matmul.h"
#include "libengine/core/check.h"

namespace zinf::probes {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The shortest of three timed runs of `run` (which returns its own seconds), after one untimed
// warm-up run (caches, pages, thread pools, library heuristics, clocks). Stops at the first error.
template <typename Run>
Result<double> best_of_three(Run run) {
  double best_seconds = 0;
  for (int i = 0; i < 4; ++i) {
    ZINF_ASSIGN_OR_RETURN(const double seconds, run());
    if (i > 0) best_seconds = best_seconds == 0 ? seconds : std::min(best_seconds, seconds);
  }
  return best_seconds;
}

ComputePeak measure_on_host(int n) {
  const std::size_t elements = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  const Clock::time_point probe_start = Clock::now();
  std::vector<float> a(elements), b(elements), c(elements);
  for (std::size_t i = 0; i < elements; ++i) {
    a[i] = static_cast<float>(i % 13) * 0.01f;
    b[i] = static_cast<float>(i % 7) * 0.02f;
  }
  const auto gemm = [&]() -> Result<double> {
    const Clock::time_point start = Clock::now();
    kernels::cpu::matmul_forward(c.data(), a.data(), b.data(), nullptr, n, n, n);
    return seconds_since(start);
  };
  const double best_seconds = best_of_three(gemm).value();  // a host GEMM cannot fail
  ComputePeak peak;
  peak.kind = "fp32 matmul";
  peak.matrix_size = n;
  peak.flops_per_s = 2.0 * n * static_cast<double>(n) * n / best_seconds;
  peak.seconds = seconds_since(probe_start);
  return peak;
}

Result<ComputePeak> measure_on_device(device::Device& device, DType dtype) {
  const Clock::time_point probe_start = Clock::now();
  // The largest of these whose three matrices fit the device budget next to the model.
  std::vector<device::OwnedTensor> matrices;
  std::int64_t n = 0;
  for (const std::int64_t size : {8192, 4096, 2048, 1024}) {
    matrices.clear();
    bool fits = true;
    for (const char* what : {"compute peak probe: a", "compute peak probe: b", "compute peak probe: c"}) {
      Result<device::OwnedTensor> m = device::allocate_tensor(device, dtype, Shape{size, size}, what);
      if (!m.is_ok()) {
        if (m.status().code() != ErrorCode::kOutOfMemory) return m.status();
        fits = false;
        break;
      }
      matrices.push_back(std::move(m).value());
    }
    if (fits) {
      n = size;
      break;
    }
  }
  if (n == 0) {
    return Status::out_of_memory(
        fmt::format("compute peak probe: three {} 1024x1024 matrices do not fit the device budget of {}",
                    dtype_name(dtype), device.describe()));
  }
  device::Ops& ops = device.ops();
  for (device::OwnedTensor& m : matrices) ops.zero(m.tensor);
  constexpr int kGemmsPerRun = 10;
  const auto gemms = [&]() -> Result<double> {
    ZINF_RETURN_IF_ERROR(device.synchronize());
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < kGemmsPerRun; ++i) {
      ops.matmul_forward(matrices[2].tensor, 0, matrices[0].tensor, matrices[1].tensor, nullptr);
    }
    ZINF_RETURN_IF_ERROR(device.synchronize());
    return seconds_since(start) / kGemmsPerRun;
  };
  ZINF_ASSIGN_OR_RETURN(const double best_seconds, best_of_three(gemms));
  ComputePeak peak;
  peak.kind = fmt::format("{} matmul", dtype_name(dtype));
  peak.matrix_size = static_cast<int>(n);
  const auto size = static_cast<double>(n);
  peak.flops_per_s = 2.0 * size * size * size / best_seconds;
  peak.seconds = seconds_since(probe_start);
  return peak;
}

}  // namespace

Result<ComputePeak> measure_matmul_peak(device::Device& device, DType dtype, int host_matrix_size) {
  ZINF_CHECK(host_matrix_size > 0, "the host matmul peak needs a positive matrix size");
  if (device.kind() == device::DeviceKind::kCpu) return measure_on_host(host_matrix_size);
  return measure_on_device(device, dtype);
}

}  // namespace zinf::probes
