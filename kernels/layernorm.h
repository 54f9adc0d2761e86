// Layer normalisation over the channel dimension (GPT-2's nn.LayerNorm), forward and backward, on
// raw fp32 arrays. CPU variants only.
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

#include "kernels/cpu/cpu_features.h"

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
