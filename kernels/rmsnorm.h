// RMS normalisation over the channel dimension (Llama's LlamaRMSNorm: no mean, no bias), forward
// and backward, on raw fp32 arrays. CPU variants, and the CUDA ones at the end.
//
// Dimension legend: R rows (B*T, every position of every sequence), C channels.
//
// Forward, per row r:  rstd = 1/sqrt(sum(x^2)/C + eps),  out = (x * rstd) * weight
// (HF's order: hidden * rsqrt(variance + eps), then weight * that). The sum of squares is
// accumulated in fp64 in fixed lanes, so the result does not depend on the instruction set or the
// thread count; rstd is rounded to fp32 once and saved for the backward pass.
// Backward, with norm = x * rstd and dnorm = dout * weight:
//   dinp    += rstd * (dnorm - norm * mean(dnorm * norm))
//   dweight += sum over rows of dout * norm
// Every gradient is accumulated (+=), as layernorm's: callers zero them first for plain values.
//
// Threads: rows are split into one contiguous range per OpenMP thread (`num_threads`; 0 means
// omp_get_max_threads()). The backward is one pass over x and dout: each block of rows (its size a
// function of R alone) sums its dout * norm per channel in fp64 while it writes dinp, and the blocks'
// sums are then added in block order, in fp64, channels split over the threads; so every result is
// the same for any thread count and any variant. Small problems run on the calling thread.
//
// Preconditions (not checked): R*C elements behind every [R,C] pointer, C behind every [C]
// pointer, R behind every [R] pointer; outputs overlap no input; C >= 1; eps > 0.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cuda_launch.h"

namespace zinf::kernels::cpu {

// rstd may be nullptr (inference: nothing saved).
void rmsnorm_forward(float* out /*[R,C]*/, float* rstd /*[R]*/, const float* inp /*[R,C]*/, const float* weight /*[C]*/,
                     std::size_t rows, std::size_t channels, float eps = 1e-6f, int num_threads = 0);

// rstd is the one the forward pass saved for this `inp`.
void rmsnorm_backward(float* dinp /*[R,C]*/, float* dweight /*[C]*/, const float* dout /*[R,C]*/,
                      const float* inp /*[R,C]*/, const float* weight /*[C]*/, const float* rstd /*[R]*/,
                      std::size_t rows, std::size_t channels, int num_threads = 0);

// One instruction-set variant on purpose, for tests and benchmarks; the functions above call these
// with best_isa(). Precondition: isa_supported(isa). Every variant gives the same bits.
void rmsnorm_forward(Isa isa, float* out /*[R,C]*/, float* rstd /*[R]*/, const float* inp /*[R,C]*/,
                     const float* weight /*[C]*/, std::size_t rows, std::size_t channels, float eps, int num_threads);
void rmsnorm_backward(Isa isa, float* dinp /*[R,C]*/, float* dweight /*[C]*/, const float* dout /*[R,C]*/,
                      const float* inp /*[R,C]*/, const float* weight /*[C]*/, const float* rstd /*[R]*/,
                      std::size_t rows, std::size_t channels, int num_threads);

}  // namespace zinf::kernels::cpu

namespace zinf::kernels::cuda {
// Same formulas; activations and weight in `elem`, rstd and dweight fp32. The forward's sum of
// squares is fp32 (one warp per row), not fp64. The backward accumulates dinp (+=, in `elem`) and
// dweight (+=, fp32) deterministically: per-block partial sums over fixed row ranges go to
// `scratch`, then a second pass adds them in order. rstd may be nullptr in the forward.
std::size_t rmsnorm_backward_scratch_bytes(std::int64_t rows, std::int64_t channels);
LaunchStatus rmsnorm_forward(Elem elem, void* out /*[R,C]*/, float* rstd /*[R]*/, const void* inp /*[R,C]*/,
                             const void* weight /*[C]*/, std::int64_t rows, std::int64_t channels, float eps,
                             Stream stream);
LaunchStatus rmsnorm_backward(Elem elem, void* dinp /*[R,C]*/, float* dweight /*[C]*/, const void* dout /*[R,C]*/,
                              const void* inp /*[R,C]*/, const void* weight /*[C]*/, const float* rstd /*[R]*/,
                              std::int64_t rows, std::int64_t channels, void* scratch, std::size_t scratch_bytes,
                              Stream stream);
}  // namespace zinf::kernels::cuda
