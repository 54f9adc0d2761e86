// Layer normalisation over the channel dimension (GPT-2's nn.LayerNorm), forward and backward, on
// raw fp32 arrays. CPU variants, and the CUDA ones at the end.
//
// Dimension legend: R rows (B*T, every position of every sequence), C channels.
//
// Forward, per row r:  mean = sum(x)/C,  var = sum((x - mean)^2)/C (biased, as PyTorch),
//   rstd = 1/sqrt(var + eps),  out = (x - mean) * rstd * weight + bias.
// The row sums are accumulated in fp64 (in fixed lanes, so the result does not depend on the
// instruction set or the thread count). mean and rstd are saved for the backward pass.
// Backward (llm.c's layernorm_backward), with norm = (x - mean) * rstd and dnorm = dout * weight:
//   dinp    += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
//   dweight += sum over rows of dout * norm
//   dbias   += sum over rows of dout
// Every gradient is accumulated (+=): callers zero them first when they want plain values.
//
// Threads: rows are split into one contiguous range per OpenMP thread (`num_threads`; 0 means
// omp_get_max_threads()); dweight and dbias are split by channels instead, each channel summing
// the rows in order, so every result is the same for any thread count and any variant. Small
// problems run on the calling thread.
//
// Preconditions (not checked): rows*C elements behind every [R,C] pointer, C behind every [C]
// pointer, R behind every [R] pointer; outputs overlap no input; C >= 1; eps > 0.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cuda_launch.h"

namespace zinf::kernels::cpu {

// mean and rstd may be nullptr (inference: nothing saved).
void layernorm_forward(float* out /*[R,C]*/, float* mean /*[R]*/, float* rstd /*[R]*/, const float* inp /*[R,C]*/,
                       const float* weight /*[C]*/, const float* bias /*[C]*/, std::size_t rows, std::size_t channels,
                       float eps = 1e-5f, int num_threads = 0);

// mean and rstd are the ones the forward pass saved for this `inp`.
void layernorm_backward(float* dinp /*[R,C]*/, float* dweight /*[C]*/, float* dbias /*[C]*/,
                        const float* dout /*[R,C]*/, const float* inp /*[R,C]*/, const float* weight /*[C]*/,
                        const float* mean /*[R]*/, const float* rstd /*[R]*/, std::size_t rows, std::size_t channels,
                        int num_threads = 0);

// One instruction-set variant on purpose, for tests and benchmarks; the functions above call these
// with best_isa(). Precondition: isa_supported(isa). Every variant gives the same bits.
void layernorm_forward(Isa isa, float* out /*[R,C]*/, float* mean /*[R]*/, float* rstd /*[R]*/,
                       const float* inp /*[R,C]*/, const float* weight /*[C]*/, const float* bias /*[C]*/,
                       std::size_t rows, std::size_t channels, float eps, int num_threads);
void layernorm_backward(Isa isa, float* dinp /*[R,C]*/, float* dweight /*[C]*/, float* dbias /*[C]*/,
                        const float* dout /*[R,C]*/, const float* inp /*[R,C]*/, const float* weight /*[C]*/,
                        const float* mean /*[R]*/, const float* rstd /*[R]*/, std::size_t rows, std::size_t channels,
                        int num_threads);

}  // namespace zinf::kernels::cpu

namespace zinf::kernels::cuda {
// Same formulas; activations and weight/bias in `elem`, statistics and weight gradients fp32. The
// forward's row statistics are fp32 (Welford or two-pass in fp32, not fp64). The backward
// accumulates dinp (+=, in `elem`) and dweight/dbias (+=, fp32) deterministically: per-block
// partial sums over fixed row ranges go to `scratch`, then a second pass adds them in order.
// mean/rstd may be nullptr in the forward (nothing saved).
std::size_t layernorm_backward_scratch_bytes(std::int64_t rows, std::int64_t channels);
LaunchStatus layernorm_forward(Elem elem, void* out /*[R,C]*/, float* mean /*[R]*/, float* rstd /*[R]*/,
                               const void* inp /*[R,C]*/, const void* weight /*[C]*/, const void* bias /*[C]*/,
                               std::int64_t rows, std::int64_t channels, float eps, Stream stream);
LaunchStatus layernorm_backward(Elem elem, void* dinp /*[R,C]*/, float* dweight /*[C]*/, float* dbias /*[C]*/,
                                const void* dout /*[R,C]*/, const void* inp /*[R,C]*/, const void* weight /*[C]*/,
                                const float* mean /*[R]*/, const float* rstd /*[R]*/, std::int64_t rows,
                                std::int64_t channels, void* scratch, std::size_t scratch_bytes, Stream stream);
}  // namespace zinf::kernels::cuda
