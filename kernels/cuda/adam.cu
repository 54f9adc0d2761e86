// CUDA Adam/AdamW step and sum of squares (kernels/adam.h), the device twins of kernels/cpu/adam.cpp.
//
// Step: the per-step scalars are computed on the host in fp64 by the code the CPU kernel uses
// (kernels/adam_step_scalars.h) and rounded to fp32 the same way; each element then goes through the CPU's
// operations in the CPU's order with explicit round-to-nearest intrinsics (__fmul_rn, __fadd_rn,
// __fdiv_rn, __fsqrt_rn, __fmaf_rn), so nvcc fuses nothing the CPU does not (it would contract a*b+c
// into an FMA by default) and the fp32 results equal the CPU's bit for bit. The bf16 copy of the
// parameters rounds with the CPU's bit arithmetic; the fp16 copy with __float2half_rn (IEEE
// round-to-nearest-even, as F16C, for every finite value). Launch: grid-stride, 256 threads a block,
// 4 elements a step (16-byte loads of param, m, v and fp32 gradients, 8-byte loads of 16-bit ones)
// when every array is aligned for it, a scalar loop for the rest.
//
// Sum of squares: block b of 256 threads sums the fixed range [b * 16384, (b + 1) * 16384) in fp64
// (each thread its strided elements in order, then a fixed tree over the block) into
// scratch[b]; a second kernel of one block adds the partial sums in a fixed order and adds the total
// to *accumulator. The ranges depend only on n, so the result is the same on every run and every
// GPU (it differs from the CPU's sum in the last bits: the CPU adds in another order).
#include <cmath>
#include <cstdint>

#include "kernels/adam.h"
#include "kernels/adam_step_scalars.h"
#include "kernels/cuda/elem.cuh"

namespace zinf::kernels::cuda {
namespace {

using detail::aligned;
using detail::Pack;

constexpr int kThreads = 256;
constexpr int kStepElements = 4;

enum class HalfOut { kNone, kBF16, kF16 };

// The per-step scalars come from kernels/adam_step_scalars.h, shared with the other backend's kernel.
using StepScalars = AdamStepScalars;

// One element, in kernels/cpu/adam.cpp's order and with its two fused multiply-adds.
__device__ __forceinline__ void adam_update(const StepScalars& s, float grad, float& p, float& m, float& v) {
  float g = __fmul_rn(grad, s.grad_scale);
  if (s.apply_l2) g = __fmaf_rn(p, s.weight_decay, g);
  if (s.apply_decay) p = __fmul_rn(p, s.decay);
  m = __fmaf_rn(g, s.one_minus_beta1, __fmul_rn(m, s.beta1));
  v = __fadd_rn(__fmul_rn(v, s.beta2), __fmul_rn(__fmul_rn(s.one_minus_beta2, g), g));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.bias_correction2_sqrt), s.eps);
  p = __fadd_rn(p, __fdiv_rn(__fmul_rn(s.neg_step_size, m), denom));
}

// kernels/cpu/simd.h's f32_to_bf16_one: round to nearest even, NaN -> 0x7FC0.
__device__ __forceinline__ std::uint16_t f32_to_bf16_bits(float x) {
  const std::uint32_t bits = __float_as_uint(x);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

template <HalfOut O>
__device__ __forceinline__ std::uint16_t to_half_bits(float x) {
  if constexpr (O == HalfOut::kBF16) {
    return f32_to_bf16_bits(x);
  } else {
    return __half_as_ushort(__float2half_rn(x));
  }
}

// grad: G = float, __nv_bfloat16 or __half. vector_steps: how many 4-element steps use vector
// accesses (0 when an array is misaligned for them); the elements after them go one by one.
template <typename G, HalfOut O>
__global__ void __launch_bounds__(kThreads)
    adam_kernel(StepScalars s, float* __restrict__ param, float* __restrict__ exp_avg, float* __restrict__ exp_avg_sq,
                const G* __restrict__ grad, std::uint16_t* __restrict__ param_half, std::int64_t n,
                std::int64_t vector_steps) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t step = first; step < vector_steps; step += stride) {
    const std::int64_t i = step * kStepElements;
    auto p = *reinterpret_cast<const Pack<float, kStepElements>*>(param + i);
    auto m = *reinterpret_cast<const Pack<float, kStepElements>*>(exp_avg + i);
    auto v = *reinterpret_cast<const Pack<float, kStepElements>*>(exp_avg_sq + i);
    const auto g = *reinterpret_cast<const Pack<G, kStepElements>*>(grad + i);
    Pack<std::uint16_t, kStepElements> half;
#pragma unroll
    for (int k = 0; k < kStepElements; ++k) {
      adam_update(s, detail::to_f32(g.v[k]), p.v[k], m.v[k], v.v[k]);
      if constexpr (O != HalfOut::kNone) half.v[k] = to_half_bits<O>(p.v[k]);
    }
    *reinterpret_cast<Pack<float, kStepElements>*>(param + i) = p;
    *reinterpret_cast<Pack<float, kStepElements>*>(exp_avg + i) = m;
    *reinterpret_cast<Pack<float, kStepElements>*>(exp_avg_sq + i) = v;
    if constexpr (O != HalfOut::kNone) *reinterpret_cast<Pack<std::uint16_t, kStepElements>*>(param_half + i) = half;
  }
  for (std::int64_t i = vector_steps * kStepElements + first; i < n; i += stride) {
    float p = param[i];
    float m = exp_avg[i];
    float v = exp_avg_sq[i];
    adam_update(s, detail::to_f32(grad[i]), p, m, v);
    param[i] = p;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    if constexpr (O != HalfOut::kNone) param_half[i] = to_half_bits<O>(p);
  }
}

template <typename G, HalfOut O>
LaunchStatus launch_adam(const StepScalars& s, const AdamSlice& slice, const void* grad, cudaStream_t stream) {
  const auto n = static_cast<std::int64_t>(slice.n);
  const bool vector_ok = aligned(slice.param, 16) && aligned(slice.exp_avg, 16) && aligned(slice.exp_avg_sq, 16) &&
                         aligned(grad, sizeof(G) * kStepElements) &&
                         (O == HalfOut::kNone || aligned(slice.param_half, 2 * kStepElements));
  const std::int64_t vector_steps = vector_ok ? n / kStepElements : 0;
  adam_kernel<G, O><<<detail::vector_and_tail_blocks(n, vector_steps, kStepElements, kThreads), kThreads, 0, stream>>>(
      s, slice.param, slice.exp_avg, slice.exp_avg_sq, static_cast<const G*>(grad), slice.param_half, n, vector_steps);
  return detail::last_launch_status();
}

// ---- Sum of squares ------------------------------------------------------------------------------

constexpr int kSumThreads = 256;
constexpr std::int64_t kSumChunk = 16384;  // elements a block sums: a multiple of every vector width
constexpr int kFinalThreads = 1024;

std::int64_t sum_partial_count(std::int64_t n) { return (n + kSumChunk - 1) / kSumChunk; }

// The block's sum of `value` in a fixed order (shuffle tree within each warp, then the warps in
// order), valid in thread 0. Every thread of the block must call it.
__device__ double block_sum(double value, double* warp_sums /*[32]*/) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xFFFFFFFFu, value, offset);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if (threadIdx.x % 32 == 0) warp_sums[warp] = value;
  __syncthreads();
  double total = 0.0;
  if (threadIdx.x == 0) {
    const int warps = static_cast<int>(blockDim.x) / 32;
    for (int w = 0; w < warps; ++w) total += warp_sums[w];
  }
  return total;
}

// partials[b] = sum of x*x over block b's range. vector: x is 16-byte aligned (every range start is
// then aligned too, kSumChunk being a multiple of the vector width).
template <typename T>
__global__ void __launch_bounds__(kSumThreads)
    sum_squares_partial_kernel(const T* __restrict__ x, std::int64_t n, bool vector, double* __restrict__ partials) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  __shared__ double warp_sums[32];
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * kSumChunk;
  const std::int64_t end = begin + kSumChunk < n ? begin + kSumChunk : n;
  double sum = 0.0;
  std::int64_t scalar_begin = begin;
  if (vector) {
    const std::int64_t steps = (end - begin) / kVec;
    for (std::int64_t step = threadIdx.x; step < steps; step += blockDim.x) {
      const auto pack = *reinterpret_cast<const Pack<T, kVec>*>(x + begin + step * kVec);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const auto value = static_cast<double>(detail::to_f32(pack.v[k]));
        sum = fma(value, value, sum);  // value*value is exact in fp64, so fused or not is the same
      }
    }
    scalar_begin = begin + steps * kVec;
  }
  for (std::int64_t i = scalar_begin + threadIdx.x; i < end; i += blockDim.x) {
    const auto value = static_cast<double>(detail::to_f32(x[i]));
    sum = fma(value, value, sum);
  }
  const double total = block_sum(sum, warp_sums);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void __launch_bounds__(kFinalThreads)
    sum_squares_final_kernel(const double* __restrict__ partials, std::int64_t count, double* accumulator) {
  __shared__ double warp_sums[32];
  double sum = 0.0;
  for (std::int64_t i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  const double total = block_sum(sum, warp_sums);
  if (threadIdx.x == 0) *accumulator += total;
}

}  // namespace

LaunchStatus adam_step(const AdamHyper& hyper, const AdamSlice& slice, const void* grad, Elem grad_elem,
                       Stream stream) {
  if (slice.n == 0) return 0;
  if (slice.param == nullptr || slice.exp_avg == nullptr || slice.exp_avg_sq == nullptr || grad == nullptr ||
      hyper.step < 1 || slice.n > static_cast<std::size_t>(INT64_MAX)) {
    return detail::invalid_argument();
  }
  const StepScalars s = adam_step_scalars(hyper);
  const cudaStream_t native = detail::native(stream);
  return detail::dispatch_elem(grad_elem, [&](auto grad_tag) -> LaunchStatus {
    using G = decltype(grad_tag);
    if (slice.param_half == nullptr) return launch_adam<G, HalfOut::kNone>(s, slice, grad, native);
    if (slice.param_half_format == HalfFormat::kBF16) return launch_adam<G, HalfOut::kBF16>(s, slice, grad, native);
    return launch_adam<G, HalfOut::kF16>(s, slice, grad, native);
  });
}

std::size_t sum_squares_scratch_bytes(std::int64_t n) {
  if (n <= 0) return 0;
  return static_cast<std::size_t>(sum_partial_count(n)) * sizeof(double);
}

LaunchStatus sum_squares(Elem elem, const void* x, std::int64_t n, double* accumulator, void* scratch,
                         std::size_t scratch_bytes, Stream stream) {
  if (n < 0) return detail::invalid_argument();
  if (n == 0) return 0;
  const std::int64_t partial_count = sum_partial_count(n);
  if (x == nullptr || accumulator == nullptr || scratch == nullptr || scratch_bytes < sum_squares_scratch_bytes(n) ||
      partial_count > INT32_MAX) {
    return detail::invalid_argument();
  }
  auto* partials = static_cast<double*>(scratch);
  const cudaStream_t native = detail::native(stream);
  const LaunchStatus status = detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    using T = decltype(tag);
    sum_squares_partial_kernel<T><<<static_cast<unsigned int>(partial_count), kSumThreads, 0, native>>>(
        static_cast<const T*>(x), n, aligned(x, 16), partials);
    return detail::last_launch_status();
  });
  if (status != 0) return status;
  sum_squares_final_kernel<<<1, kFinalThreads, 0, native>>>(partials, partial_count, accumulator);
  return detail::last_launch_status();
}

}  // namespace zinf::kernels::cuda
