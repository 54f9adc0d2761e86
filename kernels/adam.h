// Fused Adam / AdamW optimizer step over one flat slice of parameters, and the sum of squares used
// for clipping gradients by their global norm. CPU variants, and the
// CUDA ones (the device-side step) at the end.
//
// Dimension legend: N elements of the slice (the flattened parameters this rank owns).
//
// The arithmetic is PyTorch's torch.optim.AdamW / torch.optim.Adam (amsgrad=False,
// maximize=False), per element, in fp32, with the per-step scalars computed in fp64 as PyTorch's
// Python code computes them:
//   g  = grad * grad_scale                          (unscale and clip, before anything else)
//   Adam:  g += weight_decay * p                    (L2 penalty into the gradient)
//   AdamW: p *= 1 - lr * weight_decay               (decoupled weight decay)
//   m  = beta1 * m + (1 - beta1) * g
//   v  = beta2 * v + (1 - beta2) * g * g
//   p -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
// Every instruction-set variant gives the same bits (the vector code uses FMA, the scalar code
// std::fma in the same places; sqrt and division are correctly rounded everywhere). A result can
// differ from PyTorch's by an ulp or so, since PyTorch's own kernels round some steps differently.
//
// Threads: the slice is split into one contiguous range per OpenMP thread (`num_threads` of them;
// 0 means omp_get_max_threads()); slices under 64 Ki elements run on the calling thread. Calls
// from several threads at once are fine when their slices do not overlap.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/convert.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cuda_launch.h"

namespace zinf::kernels {

// Hyper-parameters of one step. Doubles, as in PyTorch, because the bias corrections are sensitive
// to them: (double)0.999f differs from 0.999 in the fifth significant digit of 1 - beta2.
struct AdamHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  std::int64_t step = 1;               // this step's number, 1 for the first (for bias correction)
  bool decoupled_weight_decay = true;  // true: AdamW; false: Adam (L2 added to the gradient)
  double grad_scale = 1.0;             // multiplies every gradient first: 1/loss_scale * clip_coef
};

// Where one slice's state lives. Every pointer covers `n` elements; param, exp_avg and exp_avg_sq
// are updated in place. Preconditions (not checked): the arrays do not overlap one another, and
// step >= 1.
struct AdamSlice {
  float* param = nullptr;       // [N] fp32 master weights
  float* exp_avg = nullptr;     // [N] m, first moment
  float* exp_avg_sq = nullptr;  // [N] v, second moment
  std::size_t n = 0;
  // Optional: the updated parameters rounded to bf16/fp16 (the copy the forward pass reads), written
  // in the same pass. nullptr: none.
  std::uint16_t* param_half = nullptr;  // [N]
  HalfFormat param_half_format = HalfFormat::kBF16;
};

namespace cpu {

// One step with fp32 gradients.
void adam_step(const AdamHyper& hyper, const AdamSlice& slice, const float* grad /*[N]*/, int num_threads = 0);

// One step with bf16 or fp16 gradients (widened to fp32 before use).
void adam_step(const AdamHyper& hyper, const AdamSlice& slice, const std::uint16_t* grad /*[N]*/,
               HalfFormat grad_format, int num_threads = 0);

// Sum of x*x over the array, accumulated in fp64, for the global gradient norm (sqrt of the sum of
// every slice's result). Inf or NaN in the input makes the result inf or NaN, which is how a caller
// detects overflowed fp16 gradients. The result depends only on the input: the array is cut into
// fixed 64 Ki-element chunks whatever the thread count, each chunk sums into 16 fixed lanes, and
// the partial sums are added in order, so it is the same for any thread count and any variant.
double sum_squares(const float* x /*[N]*/, std::size_t n, int num_threads = 0);
double sum_squares(const std::uint16_t* x /*[N]*/, HalfFormat format, std::size_t n, int num_threads = 0);

// One instruction-set variant on purpose, for tests and benchmarks; the functions above call these
// with best_isa(). Precondition: isa_supported(isa).
void adam_step(Isa isa, const AdamHyper& hyper, const AdamSlice& slice, const float* grad /*[N]*/, int num_threads);
void adam_step(Isa isa, const AdamHyper& hyper, const AdamSlice& slice, const std::uint16_t* grad /*[N]*/,
               HalfFormat grad_format, int num_threads);
double sum_squares(Isa isa, const float* x /*[N]*/, std::size_t n, int num_threads);
double sum_squares(Isa isa, const std::uint16_t* x /*[N]*/, HalfFormat format, std::size_t n, int num_threads);

}  // namespace cpu
namespace cuda {
// The same step on device arrays (every AdamSlice pointer is device memory), per element in fp32
// with the per-step scalars computed in fp64 on the host exactly as the CPU kernel computes them,
// so the update matches the CPU's to an ulp or so (CUDA's sqrtf and division are correctly rounded
// under the default flags; fused multiply-adds where the CPU kernel fuses them). The gradient is in
// `grad_elem` (fp32, bf16 or fp16).
LaunchStatus adam_step(const AdamHyper& hyper, const AdamSlice& slice, const void* grad /*[N]*/, Elem grad_elem,
                       Stream stream);
// Adds the sum of x*x over the array (fp64 accumulation) to *accumulator (one device double).
// Deterministic: fixed per-block ranges summed into `scratch`, then one block adds the partial sums
// in order. Inf/NaN propagate.
std::size_t sum_squares_scratch_bytes(std::int64_t n);
LaunchStatus sum_squares(Elem elem, const void* x /*[N]*/, std::int64_t n, double* accumulator /*[1]*/, void* scratch,
                         std::size_t scratch_bytes, Stream stream);
}  // namespace cuda

}  // namespace zinf::kernels
