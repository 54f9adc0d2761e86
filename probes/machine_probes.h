// The CPU-side probes of `zinf bench suite` and `zinf hw probe`: each times zinf's way of doing
// something and a baseline doing the same work on the same buffers, alternating, so a busy machine
// slows both alike. Every call returns one sample of each side in its unit; the suite repeats them.
//
//   memory bandwidth: a threaded triad a = b + s*c over three 128 MiB arrays (GB/s counting the two
//                     reads and one write) next to libc memcpy of the same bytes, same threads;
//   fp32 matmul:      zinf's Ops::matmul_forward on the CPU device (what training and MFU use) next
//                     to OpenBLAS sgemm called directly (kernels::cpu::matmul_forward), 2048^3;
//   CPU Adam:         kernels::cpu::adam_step over 16 Mi fp32 elements (GB/s of the 7 x 4 bytes per
//                     element it must move) next to the triad's GB/s, the bound a streaming kernel
//                     can reach.
// Not here: NVMe (io_bench_runner.h, fio_runner.h) and device figures (device_probes.h).
#pragma once

#include <cstddef>
#include <memory>

#include "libengine/core/status.h"

namespace zinf::probes {

struct ProbeSample {
  double zinf = 0;      // in the probe's unit
  double baseline = 0;  // same unit
};

// The problem sizes of the probes. The defaults are the suite's (large enough that caches and thread
// start-up do not show); a library user or a test may pick smaller ones.
struct MachineProbeSizes {
  std::size_t stream_elements = std::size_t{32} << 20;  // 128 MiB of fp32 per triad/memcpy array
  std::size_t adam_elements = std::size_t{16} << 20;
  int matmul_size = 2048;  // n of the n x n x n GEMM
};

// Owns the probes' buffers (about 1 GiB at the default sizes, allocated on first use, freed on
// destruction). Not thread-safe; the probes themselves use compute_threads() threads. A probe that
// fails (the CPU device cannot be made or allocate) returns its error and leaves the object usable.
class MachineProbes {
 public:
  // Every size must be positive (ZINF_CHECK).
  explicit MachineProbes(MachineProbeSizes sizes = {});
  ~MachineProbes();
  MachineProbes(const MachineProbes&) = delete;
  MachineProbes& operator=(const MachineProbes&) = delete;

  // GB/s (1e9 B/s): triad, memcpy.
  Result<ProbeSample> memory_bandwidth();
  // GFLOP/s: zinf's device matmul, OpenBLAS sgemm.
  Result<ProbeSample> matmul_fp32();
  // GB/s: Adam state traffic, triad.
  Result<ProbeSample> cpu_adam();

  const MachineProbeSizes& sizes() const { return sizes_; }

 private:
  struct Buffers;
  MachineProbeSizes sizes_;
  std::unique_ptr<Buffers> buffers_;
};

}  // namespace zinf::probes
