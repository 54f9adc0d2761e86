// Fused SwiGLU, the gate of Llama's MLP (down_proj(silu(gate_proj(x)) * up_proj(x))), forward and
// backward, elementwise on raw fp32 arrays. CPU variants, and the CUDA ones at the end.
//
// Dimension legend: N elements (a flat slice, usually B*T*I with I the MLP's intermediate size).
// The two inputs are two separate arrays of the same shape: the outputs of the separate gate_proj
// and up_proj linear layers (HF's layout and names), so any intermediate size works and each
// projection can be tiled on its own. A fused [R, 2I] gate|up projection is not this layout.
//
//   s     = sigmoid(g) = 1/(1 + exp(-g))
//   out   = (g / (1 + exp(-g))) * u                   (torch's silu(g), then * up)
//   dgate += dout * u * s * (1 + g (1 - s))           (d silu(g)/dg, as torch's silu_backward)
//   dup   += dout * silu(g)
// The backward accumulates (+=) into dgate and dup, as gelu's does. exp is simd::exp_approx
// (relative error <= 2e-7), so results are within a few ulp of torch's, not its bits. Every
// variant gives the same bits.
//
// Threads: one contiguous range per OpenMP thread (`num_threads`; 0 means omp_get_max_threads());
// small slices run on the calling thread.
//
// Preconditions (not checked): N elements behind every pointer. forward: `out` may be `gate` or
// `up` (in place) but may not overlap them otherwise. backward: dgate and dup overlap no input
// and not each other.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cuda_launch.h"

namespace zinf::kernels::cpu {

void swiglu_forward(float* out /*[N]*/, const float* gate /*[N]*/, const float* up /*[N]*/, std::size_t n,
                    int num_threads = 0);
void swiglu_backward(float* dgate /*[N]*/, float* dup /*[N]*/, const float* dout /*[N]*/, const float* gate /*[N]*/,
                     const float* up /*[N]*/, std::size_t n, int num_threads = 0);

// One instruction-set variant on purpose, for tests and benchmarks. Precondition: isa_supported(isa).
void swiglu_forward(Isa isa, float* out /*[N]*/, const float* gate /*[N]*/, const float* up /*[N]*/, std::size_t n,
                    int num_threads);
void swiglu_backward(Isa isa, float* dgate /*[N]*/, float* dup /*[N]*/, const float* dout /*[N]*/,
                     const float* gate /*[N]*/, const float* up /*[N]*/, std::size_t n, int num_threads);

}  // namespace zinf::kernels::cpu

namespace zinf::kernels::cuda {
// Same formulas on `elem` arrays, fp32 arithmetic (expf); the backward accumulates (+=).
LaunchStatus swiglu_forward(Elem elem, void* out /*[N]*/, const void* gate /*[N]*/, const void* up /*[N]*/,
                            std::int64_t n, Stream stream);
LaunchStatus swiglu_backward(Elem elem, void* dgate /*[N]*/, void* dup /*[N]*/, const void* dout /*[N]*/,
                             const void* gate /*[N]*/, const void* up /*[N]*/, std::int64_t n, Stream stream);
}  // namespace zinf::kernels::cuda
