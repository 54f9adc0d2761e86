// CPU GELU (tanh approximation), forward and backward (gelu.h has the formulas). One plain C++
// body per pass, compiled as is (scalar) and inlined into AVX2 and AVX-512 functions so the
// compiler vectorises the whole loop. That needs a tanh without a library call, so tanh is
// computed here as 1 - 2/(exp(2u) + 1) with simd::exp_approx (simd.h: Cephes' expf, relative
// error <= 2e-7; outside its clamp GELU only needs exp(2u) huge or tiny, not exact, and a NaN input
// still comes out through the factor x): absolute error about 1e-7, which is all GELU needs (the
// result is multiplied by x, and tanh's small-u cancellation only costs digits of u that
// 0.5 x (1 + tanh u) never shows). The arithmetic is fp32 throughout, in the same order in every
// variant (the file is built with -ffp-contract=off), so the variants agree bit for bit.
#include "kernels/gelu.h"

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"

namespace zinf::kernels::cpu {
namespace {

// Below this many elements a pass runs on the calling thread.
constexpr std::size_t kMinParallelElements = std::size_t{1} << 15;
constexpr std::size_t kRangeAlign = 64;

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kCubic = 0.044715f;

using simd::exp_approx;

[[gnu::always_inline]] inline float tanh_approx(float u) { return 1.0f - 2.0f / (exp_approx(2.0f * u) + 1.0f); }

[[gnu::always_inline]] inline void forward_range(float* out, const float* inp, std::size_t begin, std::size_t end) {
  for (std::size_t i = begin; i < end; ++i) {
    const float x = inp[i];
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    out[i] = 0.5f * x * (1.0f + tanh_approx(u));
  }
}

[[gnu::always_inline]] inline void backward_range(float* dinp, const float* inp, const float* dout, std::size_t begin,
                                                  std::size_t end) {
  for (std::size_t i = begin; i < end; ++i) {
    const float x = inp[i];
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    const float t = tanh_approx(u);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    const float grad = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
    dinp[i] += dout[i] * grad;
  }
}

void forward_scalar(float* out, const float* inp, std::size_t begin, std::size_t end) {
  forward_range(out, inp, begin, end);
}
void backward_scalar(float* dinp, const float* inp, const float* dout, std::size_t begin, std::size_t end) {
  backward_range(dinp, inp, dout, begin, end);
}

#if ZINF_KERNELS_X86
ZINF_TARGET_AVX2 void forward_avx2(float* out, const float* inp, std::size_t begin, std::size_t end) {
  forward_range(out, inp, begin, end);
}
ZINF_TARGET_AVX2 void backward_avx2(float* dinp, const float* inp, const float* dout, std::size_t begin,
                                    std::size_t end) {
  backward_range(dinp, inp, dout, begin, end);
}
ZINF_TARGET_AVX512 void forward_avx512(float* out, const float* inp, std::size_t begin, std::size_t end) {
  forward_range(out, inp, begin, end);
}
ZINF_TARGET_AVX512 void backward_avx512(float* dinp, const float* inp, const float* dout, std::size_t begin,
                                        std::size_t end) {
  backward_range(dinp, inp, dout, begin, end);
}
#endif

}  // namespace

void gelu_forward(Isa isa, float* out, const float* inp, std::size_t n, int num_threads) {
  const auto fn = ZINF_KERNEL_VARIANT(isa, forward);
  parallel::for_each_range(n, kMinParallelElements, kRangeAlign, parallel::resolve_threads(num_threads),
                           [&](std::size_t begin, std::size_t end) { fn(out, inp, begin, end); });
}

void gelu_backward(Isa isa, float* dinp, const float* inp, const float* dout, std::size_t n, int num_threads) {
  const auto fn = ZINF_KERNEL_VARIANT(isa, backward);
  parallel::for_each_range(n, kMinParallelElements, kRangeAlign, parallel::resolve_threads(num_threads),
                           [&](std::size_t begin, std::size_t end) { fn(dinp, inp, dout, begin, end); });
}

void gelu_forward(float* out, const float* inp, std::size_t n, int num_threads) {
  gelu_forward(best_isa(), out, inp, n, num_threads);
}

void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n, int num_threads) {
  gelu_backward(best_isa(), dinp, inp, dout, n, num_threads);
}

}  // namespace zinf::kernels::cpu
