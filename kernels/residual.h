// Residual connection: elementwise sum of two fp32 arrays, forward and backward. CPU variants, and the CUDA ones at the
// end.
//
// Dimension legend: N elements (a flat slice, usually B*T*C of the residual stream).
//
// Forward:  out = inp1 + inp2
// Backward: dinp1 += dout and dinp2 += dout (the sum's gradient passes through to both inputs).
//
// Threads: one contiguous range per OpenMP thread (`num_threads`; 0 means omp_get_max_threads());
// small slices run on the calling thread. Every variant gives the same bits.
//
// Preconditions (not checked): N elements behind every pointer. forward: out may be inp1 or inp2
// (in place) but may not overlap them otherwise. backward: dinp1 and dinp2 are distinct arrays
// and neither overlaps dout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cuda_launch.h"

namespace zinf::kernels::cpu {

void residual_forward(float* out /*[N]*/, const float* inp1 /*[N]*/, const float* inp2 /*[N]*/, std::size_t n,
                      int num_threads = 0);
void residual_backward(float* dinp1 /*[N]*/, float* dinp2 /*[N]*/, const float* dout /*[N]*/, std::size_t n,
                       int num_threads = 0);

// One instruction-set variant on purpose, for tests and benchmarks. Precondition: isa_supported(isa).
void residual_forward(Isa isa, float* out /*[N]*/, const float* inp1 /*[N]*/, const float* inp2 /*[N]*/, std::size_t n,
                      int num_threads);
void residual_backward(Isa isa, float* dinp1 /*[N]*/, float* dinp2 /*[N]*/, const float* dout /*[N]*/, std::size_t n,
                       int num_threads);

}  // namespace zinf::kernels::cpu

namespace zinf::kernels::cuda {
// Same formulas on `elem` arrays (fp32 arithmetic, one rounding per output).
LaunchStatus residual_forward(Elem elem, void* out /*[N]*/, const void* inp1 /*[N]*/, const void* inp2 /*[N]*/,
                              std::int64_t n, Stream stream);
LaunchStatus residual_backward(Elem elem, void* dinp1 /*[N]*/, void* dinp2 /*[N]*/, const void* dout /*[N]*/,
                               std::int64_t n, Stream stream);
}  // namespace zinf::kernels::cuda
