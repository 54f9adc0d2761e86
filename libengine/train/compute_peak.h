// The compute peak MFU is measured against: the FLOP/s a large square fp32 GEMM (2048³, the
// model's own matmul kernel) reaches on this machine with the current compute threads, best of
// three after a warm-up. Measured, not taken from a datasheet, so MFU says how much of what this
// machine can actually do the training step achieves. Takes about a second on 2 cores.
#pragma once

namespace zinf::train {

struct ComputePeak {
  double flops_per_s = 0;
  int matrix_size = 0;  // n of the n×n×n GEMM
  double seconds = 0;   // time the probe took
};

ComputePeak measure_matmul_peak();

}  // namespace zinf::train
