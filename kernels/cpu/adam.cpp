// CPU Adam/AdamW step and sum of squares: scalar, AVX2+FMA (8 lanes) and AVX-512 (16 lanes)
// variants, each instantiated for the three gradient formats and the three half-copy choices, and
// spread over OpenMP threads by parallel::for_each_range.
//
// Per element, in this order and rounding as PyTorch's CPU kernels round (adam.h has the formulas):
//   g = grad * grad_scale;  Adam: g = fma(p, wd, g);  AdamW: p = p * (1 - lr*wd)
//   m = fma(g, 1-b1, m*b1)                 torch: exp_avg.mul_(b1).add_(g, alpha=1-b1)   (fmadd)
//   v = v*b2 + ((1-b2)*g)*g                torch: exp_avg_sq.mul_(b2).addcmul_(g, g, value=1-b2)
//   denom = sqrt(v) / sqrt(bc2) + eps      torch: (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)
//   p = p + ((-step_size)*m) / denom       torch: param.addcdiv_(exp_avg, denom, value=-step_size)
// Only the first moment and Adam's L2 term use a fused multiply-add, in every variant (std::fma in
// the scalar one), so the variants agree bit for bit. A vector tail shorter than one vector goes
// through the vector code on zero-padded stack copies, for the same reason.
#include "kernels/adam.h"
#include "kernels/adam_step_scalars.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"

namespace zinf::kernels::cpu {
namespace {

enum class GradKind { kF32, kBF16, kF16 };
enum class OutKind { kNone, kBF16, kF16 };

template <GradKind G>
using GradT = std::conditional_t<G == GradKind::kF32, float, std::uint16_t>;

// Below this many elements a step runs on the calling thread: waking a team costs more.
constexpr std::size_t kMinParallelElements = std::size_t{1} << 16;
// Thread ranges start at multiples of this (a multiple of every vector width, 256 B of fp32).
constexpr std::size_t kRangeAlign = 64;

// The per-step scalars come from kernels/adam_step_scalars.h, shared with the other backend's kernel.
using StepScalars = AdamStepScalars;

// ---- Scalar variant ------------------------------------------------------------------------------

template <GradKind G>
float load_grad_one(const GradT<G>* grad, std::size_t i) {
  if constexpr (G == GradKind::kF32) {
    return grad[i];
  } else if constexpr (G == GradKind::kBF16) {
    return simd::bf16_to_f32_one(grad[i]);
  } else {
    return simd::f16_to_f32_one(grad[i]);
  }
}

template <GradKind G, OutKind O>
void adam_scalar(const StepScalars& s, float* param, float* exp_avg, float* exp_avg_sq, const void* grad_bytes,
                 std::uint16_t* param_half, std::size_t n) {
  const auto* grad = static_cast<const GradT<G>*>(grad_bytes);
  for (std::size_t i = 0; i < n; ++i) {
    float g = load_grad_one<G>(grad, i) * s.grad_scale;
    float p = param[i];
    if (s.apply_l2) g = std::fma(p, s.weight_decay, g);
    if (s.apply_decay) p = p * s.decay;
    const float m = std::fma(g, s.one_minus_beta1, exp_avg[i] * s.beta1);
    const float v = exp_avg_sq[i] * s.beta2 + (s.one_minus_beta2 * g) * g;
    const float denom = std::sqrt(v) / s.bias_correction2_sqrt + s.eps;
    p = p + (s.neg_step_size * m) / denom;
    param[i] = p;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    if constexpr (O == OutKind::kBF16) param_half[i] = simd::f32_to_bf16_one(p);
    if constexpr (O == OutKind::kF16) param_half[i] = simd::f32_to_f16_one(p);
  }
}

// The squares of one chunk summed into 16 lanes (element i into lane i % 16), the lanes then added
// in order. Every x*x is exact in fp64, so each lane's sum rounds the same way in every variant.
constexpr std::size_t kSumLanes = 16;

double add_lanes(const double* lanes) {
  double total = 0.0;
  for (std::size_t lane = 0; lane < kSumLanes; ++lane) total += lanes[lane];
  return total;
}

template <GradKind G>
void sum_squares_tail(const GradT<G>* x, std::size_t begin, std::size_t n, double* lanes) {
  for (std::size_t i = begin; i < n; ++i) {
    const auto value = static_cast<double>(load_grad_one<G>(x, i));
    lanes[i % kSumLanes] += value * value;
  }
}

template <GradKind G>
double sum_squares_scalar(const void* x_bytes, std::size_t n) {
  double lanes[kSumLanes] = {};
  sum_squares_tail<G>(static_cast<const GradT<G>*>(x_bytes), 0, n, lanes);
  return add_lanes(lanes);
}

#if ZINF_KERNELS_X86

// ---- AVX2 sum of squares -------------------------------------------------------------------------

template <GradKind G>
ZINF_TARGET_AVX2 double sum_squares_avx2(const void* x_bytes, std::size_t n) {
  const auto* x = static_cast<const GradT<G>*>(x_bytes);
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  std::size_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    __m256 lo;
    __m256 hi;
    if constexpr (G == GradKind::kF32) {
      lo = _mm256_loadu_ps(x + i);
      hi = _mm256_loadu_ps(x + i + 8);
    } else if constexpr (G == GradKind::kBF16) {
      lo = simd::load_bf16x8(x + i);
      hi = simd::load_bf16x8(x + i + 8);
    } else {
      lo = simd::load_f16x8(x + i);
      hi = simd::load_f16x8(x + i + 8);
    }
    const __m256d d0 = _mm256_cvtps_pd(_mm256_castps256_ps128(lo));
    const __m256d d1 = _mm256_cvtps_pd(_mm256_extractf128_ps(lo, 1));
    const __m256d d2 = _mm256_cvtps_pd(_mm256_castps256_ps128(hi));
    const __m256d d3 = _mm256_cvtps_pd(_mm256_extractf128_ps(hi, 1));
    acc[0] = _mm256_fmadd_pd(d0, d0, acc[0]);
    acc[1] = _mm256_fmadd_pd(d1, d1, acc[1]);
    acc[2] = _mm256_fmadd_pd(d2, d2, acc[2]);
    acc[3] = _mm256_fmadd_pd(d3, d3, acc[3]);
  }
  double lanes[kSumLanes];
  for (std::size_t k = 0; k < 4; ++k) _mm256_storeu_pd(lanes + 4 * k, acc[k]);
  sum_squares_tail<G>(x, i, n, lanes);
  return add_lanes(lanes);
}

// ---- AVX-512 sum of squares ----------------------------------------------------------------------

template <GradKind G>
ZINF_TARGET_AVX512 double sum_squares_avx512(const void* x_bytes, std::size_t n) {
  const auto* x = static_cast<const GradT<G>*>(x_bytes);
  __m512d acc0 = _mm512_setzero_pd();
  __m512d acc1 = _mm512_setzero_pd();
  std::size_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    __m512 value;
    if constexpr (G == GradKind::kF32) {
      value = _mm512_loadu_ps(x + i);
    } else if constexpr (G == GradKind::kBF16) {
      value = simd::load_bf16x16(x + i);
    } else {
      value = simd::load_f16x16(x + i);
    }
    const __m512d d0 = _mm512_cvtps_pd(_mm512_castps512_ps256(value));
    const __m512d d1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(value), 1)));
    acc0 = _mm512_fmadd_pd(d0, d0, acc0);
    acc1 = _mm512_fmadd_pd(d1, d1, acc1);
  }
  double lanes[kSumLanes];
  _mm512_storeu_pd(lanes, acc0);
  _mm512_storeu_pd(lanes + 8, acc1);
  sum_squares_tail<G>(x, i, n, lanes);
  return add_lanes(lanes);
}

// ---- The Adam step of the vector variants --------------------------------------------------------
// One body (adam_vector.h) compiled once per instruction set: each namespace defines its vector
// primitives and includes it under that set's target pragma (GCC will not inline a target-specific
// block function through a generic template, so a pragma region, not a template, shares the code).
// The target strings are those of ZINF_TARGET_AVX2 and ZINF_TARGET_AVX512 (simd.h).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
namespace avx2 {
using Vec = __m256;
constexpr std::size_t kWidth = 8;
[[gnu::always_inline]] inline Vec set1(float x) { return _mm256_set1_ps(x); }
[[gnu::always_inline]] inline Vec load(const float* p) { return _mm256_loadu_ps(p); }
[[gnu::always_inline]] inline void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
[[gnu::always_inline]] inline Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
[[gnu::always_inline]] inline Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
[[gnu::always_inline]] inline Vec div(Vec a, Vec b) { return _mm256_div_ps(a, b); }
[[gnu::always_inline]] inline Vec sqrt(Vec a) { return _mm256_sqrt_ps(a); }
[[gnu::always_inline]] inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
[[gnu::always_inline]] inline Vec load_bf16(const std::uint16_t* p) { return simd::load_bf16x8(p); }
[[gnu::always_inline]] inline Vec load_f16(const std::uint16_t* p) { return simd::load_f16x8(p); }
[[gnu::always_inline]] inline void store_bf16(std::uint16_t* p, Vec v) { simd::store_bf16x8(p, v); }
[[gnu::always_inline]] inline void store_f16(std::uint16_t* p, Vec v) { simd::store_f16x8(p, v); }
#include "kernels/cpu/adam_vector.h"  // NOLINT(build/include): compiled once per ISA
}  // namespace avx2
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")
#endif
namespace avx512 {
using Vec = __m512;
constexpr std::size_t kWidth = 16;
[[gnu::always_inline]] inline Vec set1(float x) { return _mm512_set1_ps(x); }
[[gnu::always_inline]] inline Vec load(const float* p) { return _mm512_loadu_ps(p); }
[[gnu::always_inline]] inline void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
[[gnu::always_inline]] inline Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
[[gnu::always_inline]] inline Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
[[gnu::always_inline]] inline Vec div(Vec a, Vec b) { return _mm512_div_ps(a, b); }
[[gnu::always_inline]] inline Vec sqrt(Vec a) { return _mm512_sqrt_ps(a); }
[[gnu::always_inline]] inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
[[gnu::always_inline]] inline Vec load_bf16(const std::uint16_t* p) { return simd::load_bf16x16(p); }
[[gnu::always_inline]] inline Vec load_f16(const std::uint16_t* p) { return simd::load_f16x16(p); }
[[gnu::always_inline]] inline void store_bf16(std::uint16_t* p, Vec v) { simd::store_bf16x16(p, v); }
[[gnu::always_inline]] inline void store_f16(std::uint16_t* p, Vec v) { simd::store_f16x16(p, v); }
#include "kernels/cpu/adam_vector.h"  // NOLINT(build/include): compiled once per ISA
}  // namespace avx512
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif  // ZINF_KERNELS_X86

// ---- Dispatch ------------------------------------------------------------------------------------

using AdamKernel = void (*)(const StepScalars&, float*, float*, float*, const void*, std::uint16_t*, std::size_t);
using SumKernel = double (*)(const void*, std::size_t);

template <GradKind G, OutKind O>
AdamKernel adam_kernel_for(Isa isa) {
  switch (isa) {
#if ZINF_KERNELS_X86
    case Isa::kAvx512:
      return &avx512::adam_run<G, O>;
    case Isa::kAvx2:
      return &avx2::adam_run<G, O>;
#endif
    default:
      return &adam_scalar<G, O>;
  }
}

template <GradKind G>
AdamKernel adam_kernel_for(Isa isa, const AdamSlice& slice) {
  if (slice.param_half == nullptr) return adam_kernel_for<G, OutKind::kNone>(isa);
  if (slice.param_half_format == HalfFormat::kBF16) return adam_kernel_for<G, OutKind::kBF16>(isa);
  return adam_kernel_for<G, OutKind::kF16>(isa);
}

template <GradKind G>
SumKernel sum_kernel_for(Isa isa) {
  switch (isa) {
#if ZINF_KERNELS_X86
    case Isa::kAvx512:
      return &sum_squares_avx512<G>;
    case Isa::kAvx2:
      return &sum_squares_avx2<G>;
#endif
    default:
      return &sum_squares_scalar<G>;
  }
}

GradKind grad_kind(HalfFormat format) { return format == HalfFormat::kBF16 ? GradKind::kBF16 : GradKind::kF16; }

void run_adam(AdamKernel kernel, const AdamHyper& hyper, const AdamSlice& slice, const void* grad,
              std::size_t grad_elem_bytes, int num_threads) {
  const StepScalars scalars = adam_step_scalars(hyper);
  const auto* grad_base = static_cast<const unsigned char*>(grad);
  parallel::for_each_range(slice.n, kMinParallelElements, kRangeAlign, parallel::resolve_threads(num_threads),
                           [&](std::size_t begin, std::size_t end) {
                             kernel(scalars, slice.param + begin, slice.exp_avg + begin, slice.exp_avg_sq + begin,
                                    grad_base + begin * grad_elem_bytes,
                                    slice.param_half == nullptr ? nullptr : slice.param_half + begin, end - begin);
                           });
}

// Fixed chunks, so the partial sums (and their order) do not depend on the thread count.
constexpr std::size_t kSumChunkElements = std::size_t{1} << 16;

double run_sum_squares(SumKernel kernel, const void* x, std::size_t elem_bytes, std::size_t n, int num_threads) {
  const auto* base = static_cast<const unsigned char*>(x);
  if (n <= kSumChunkElements) return kernel(base, n);
  const std::size_t chunks = (n + kSumChunkElements - 1) / kSumChunkElements;
  std::vector<double> partial(chunks);
  parallel::for_each_index(chunks, parallel::resolve_threads(num_threads), [&](std::size_t chunk) {
    const std::size_t begin = chunk * kSumChunkElements;
    const std::size_t count = std::min(kSumChunkElements, n - begin);
    partial[chunk] = kernel(base + begin * elem_bytes, count);
  });
  double total = 0.0;
  for (double value : partial) total += value;
  return total;
}

}  // namespace

void adam_step(Isa isa, const AdamHyper& hyper, const AdamSlice& slice, const float* grad, int num_threads) {
  run_adam(adam_kernel_for<GradKind::kF32>(isa, slice), hyper, slice, grad, sizeof(float), num_threads);
}

void adam_step(Isa isa, const AdamHyper& hyper, const AdamSlice& slice, const std::uint16_t* grad,
               HalfFormat grad_format, int num_threads) {
  const AdamKernel kernel = grad_kind(grad_format) == GradKind::kBF16 ? adam_kernel_for<GradKind::kBF16>(isa, slice)
                                                                      : adam_kernel_for<GradKind::kF16>(isa, slice);
  run_adam(kernel, hyper, slice, grad, sizeof(std::uint16_t), num_threads);
}

void adam_step(const AdamHyper& hyper, const AdamSlice& slice, const float* grad, int num_threads) {
  adam_step(best_isa(), hyper, slice, grad, num_threads);
}

void adam_step(const AdamHyper& hyper, const AdamSlice& slice, const std::uint16_t* grad, HalfFormat grad_format,
               int num_threads) {
  adam_step(best_isa(), hyper, slice, grad, grad_format, num_threads);
}

double sum_squares(Isa isa, const float* x, std::size_t n, int num_threads) {
  return run_sum_squares(sum_kernel_for<GradKind::kF32>(isa), x, sizeof(float), n, num_threads);
}

double sum_squares(Isa isa, const std::uint16_t* x, HalfFormat format, std::size_t n, int num_threads) {
  const SumKernel kernel =
      grad_kind(format) == GradKind::kBF16 ? sum_kernel_for<GradKind::kBF16>(isa) : sum_kernel_for<GradKind::kF16>(isa);
  return run_sum_squares(kernel, x, sizeof(std::uint16_t), n, num_threads);
}

double sum_squares(const float* x, std::size_t n, int num_threads) {
  return sum_squares(best_isa(), x, n, num_threads);
}

double sum_squares(const std::uint16_t* x, HalfFormat format, std::size_t n, int num_threads) {
  return sum_squares(best_isa(), x, format, n, num_threads);
}

}  // namespace zinf::kernels::cpu
