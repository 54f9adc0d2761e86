// The compute peak MFU is measured against: the FLOP/s a large square GEMM reaches on this machine,
// best of three timed runs after a warm-up. Measured, not taken from a datasheet, so MFU says how
// much of what this machine can actually do the training step achieves.
// - CPU backend: fp32 2048³ through the model's own matmul kernel (OpenBLAS) with the current
//   compute threads, on host memory outside the device budget. About a second on 2 cores.
// - Other devices (CUDA): the device's Ops::matmul_forward in the model's compute dtype (bf16 for a
//   bf16 run: cuBLASLt on tensor cores), 8192³ (smaller when the device budget cannot hold the
//   three matrices), ten GEMMs per timed run; the matrices are allocated on the device and freed
//   before returning.
#pragma once

#include <string>

#include "libengine/core/dtype.h"
#include "libengine/core/status.h"
#include "libengine/device/device.h"

namespace zinf::probes {

struct ComputePeak {
  double flops_per_s = 0;
  int matrix_size = 0;  // n of the n×n×n GEMM
  double seconds = 0;   // time the probe took
  std::string kind;     // "fp32 matmul", "bf16 matmul"
};

// The n of the CPU backend's GEMM: large enough that OpenBLAS's blocking and threads reach their rate.
inline constexpr int kHostPeakMatrixSize = 2048;

// Fails only on a non-CPU device: OutOfMemory when not even a 1024³ problem fits its budget, or the
// device's error. `host_matrix_size` (> 0) is the CPU backend's n; other devices ignore it. Blocks
// the calling thread for the probe's duration; not safe to call while the device runs other work.
Result<ComputePeak> measure_matmul_peak(device::Device& device, DType dtype,
                                        int host_matrix_size = kHostPeakMatrixSize);

}  // namespace zinf::probes
