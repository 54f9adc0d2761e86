// CPU fused SwiGLU, forward and backward (swiglu.h has the formulas). Built like gelu.cpp: one
// plain C++ body per pass, compiled as is (scalar) and inlined into AVX2 and AVX-512 functions so
// the compiler vectorises the whole loop, with simd::exp_approx_estrin for exp (no library call, so
// the loop vectorises; relative error <= 2e-7). Its clamp to [-87, 88.38] only matters where the
// sigmoid is already 0 or 1 to fp32 precision: for g < -87, 1 + exp(-g) is ~3e38 instead of inf, so
// silu(g) is ~-3e-37 * |g| instead of -0 (both round to zero in any later fp32 sum of O(1) terms).
// The arithmetic is fp32 throughout in the same order in every variant (the file is built with
// -ffp-contract=off), so the variants agree bit for bit.
#include "kernels/swiglu.h"

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"

namespace zinf::kernels::cpu {
namespace {

// Below this many elements a pass runs on the calling thread.
constexpr std::size_t kMinParallelElements = std::size_t{1} << 15;
constexpr std::size_t kRangeAlign = 64;

// Estrin's polynomial: the forward is bound by exp's latency when its arrays sit in cache (measured,
// one thread in L2), so the shorter chain is what shortens the loop.
using simd::exp_approx_estrin;

[[gnu::always_inline]] inline void forward_range(float* out, const float* gate, const float* up, std::size_t begin,
                                                 std::size_t end) {
  for (std::size_t i = begin; i < end; ++i) {
    const float g = gate[i];
    const float silu = g / (1.0f + exp_approx_estrin(-g));
    out[i] = silu * up[i];
  }
}

[[gnu::always_inline]] inline void backward_range(float* dgate, float* dup, const float* dout, const float* gate,
                                                  const float* up, std::size_t begin, std::size_t end) {
  for (std::size_t i = begin; i < end; ++i) {
    const float g = gate[i];
    const float e = 1.0f + exp_approx_estrin(-g);
    const float s = 1.0f / e;
    const float silu = g / e;
    const float dy = dout[i];
    dgate[i] += (dy * up[i]) * (s * (1.0f + g * (1.0f - s)));
    dup[i] += dy * silu;
  }
}

void forward_scalar(float* out, const float* gate, const float* up, std::size_t begin, std::size_t end) {
  forward_range(out, gate, up, begin, end);
}
void backward_scalar(float* dgate, float* dup, const float* dout, const float* gate, const float* up, std::size_t begin,
                     std::size_t end) {
  backward_range(dgate, dup, dout, gate, up, begin, end);
}

#if ZINF_KERNELS_X86
ZINF_TARGET_AVX2 void forward_avx2(float* out, const float* gate, const float* up, std::size_t begin, std::size_t end) {
  forward_range(out, gate, up, begin, end);
}
ZINF_TARGET_AVX2 void backward_avx2(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                    std::size_t begin, std::size_t end) {
  backward_range(dgate, dup, dout, gate, up, begin, end);
}
ZINF_TARGET_AVX512 void forward_avx512(float* out, const float* gate, const float* up, std::size_t begin,
                                       std::size_t end) {
  forward_range(out, gate, up, begin, end);
}
ZINF_TARGET_AVX512 void backward_avx512(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                        std::size_t begin, std::size_t end) {
  backward_range(dgate, dup, dout, gate, up, begin, end);
}
#endif

}  // namespace

void swiglu_forward(Isa isa, float* out, const float* gate, const float* up, std::size_t n, int num_threads) {
  const auto fn = ZINF_KERNEL_VARIANT(isa, forward);
  parallel::for_each_range(n, kMinParallelElements, kRangeAlign, parallel::resolve_threads(num_threads),
                           [&](std::size_t begin, std::size_t end) { fn(out, gate, up, begin, end); });
}

void swiglu_backward(Isa isa, float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                     std::size_t n, int num_threads) {
  const auto fn = ZINF_KERNEL_VARIANT(isa, backward);
  parallel::for_each_range(n, kMinParallelElements, kRangeAlign, parallel::resolve_threads(num_threads),
                           [&](std::size_t begin, std::size_t end) { fn(dgate, dup, dout, gate, up, begin, end); });
}

void swiglu_forward(float* out, const float* gate, const float* up, std::size_t n, int num_threads) {
  swiglu_forward(best_isa(), out, gate, up, n, num_threads);
}

void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, std::size_t n,
                     int num_threads) {
  swiglu_backward(best_isa(), dgate, dup, dout, gate, up, n, num_threads);
}

}  // namespace zinf::kernels::cpu
