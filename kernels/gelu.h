// GELU with the tanh approximation (GPT-2; torch.nn.functional.gelu(x, approximate="tanh")),
// forward and backward, elementwise on raw fp32 arrays. CPU variants, and the CUDA ones at the end.
//
// Dimension legend: N elements (a flat slice, usually B*T*4C of the MLP's hidden activations).
//
//   u   = sqrt(2/pi) * (x + 0.044715 x^3)
//   out = 0.5 x (1 + tanh(u))
//   dinp += dout * (0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3*0.044715 x^2))
// The backward pass accumulates (+=) into dinp. Every variant gives the same bits.
//
// Threads: one contiguous range per OpenMP thread (`num_threads`; 0 means omp_get_max_threads());
// small slices run on the calling thread.
//
// Preconditions (not checked): N elements behind every pointer. forward: `out` may be `inp`
// (in place) but may not overlap it otherwise. backward: dinp overlaps neither inp nor dout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cuda_launch.h"

namespace zinf::kernels::cpu {

void gelu_forward(float* out /*[N]*/, const float* inp /*[N]*/, std::size_t n, int num_threads = 0);
void gelu_backward(float* dinp /*[N]*/, const float* inp /*[N]*/, const float* dout /*[N]*/, std::size_t n,
                   int num_threads = 0);

// One instruction-set variant on purpose, for tests and benchmarks. Precondition: isa_supported(isa).
void gelu_forward(Isa isa, float* out /*[N]*/, const float* inp /*[N]*/, std::size_t n, int num_threads);
void gelu_backward(Isa isa, float* dinp /*[N]*/, const float* inp /*[N]*/, const float* dout /*[N]*/, std::size_t n,
                   int num_threads);

}  // namespace zinf::kernels::cpu

namespace zinf::kernels::cuda {
// Same formulas on `elem` arrays, fp32 arithmetic (tanhf); the backward accumulates (+=).
LaunchStatus gelu_forward(Elem elem, void* out /*[N]*/, const void* inp /*[N]*/, std::int64_t n, Stream stream);
LaunchStatus gelu_backward(Elem elem, void* dinp /*[N]*/, const void* inp /*[N]*/, const void* dout /*[N]*/,
                           std::int64_t n, Stream stream);
}  // namespace zinf::kernels::cuda
