// DeepSpeedCPUAdam's AdamW step (csrc/includes/cpu_adam.h, Adam_Optimizer::Step_AVX<8>, fp32
// parameters and state, AVX2) transcribed for adam_bench: the same-run baseline the zinf kernel is
// timed against, compiled with zinf's flags rather than DeepSpeed's JIT build, so a difference
// between the two is the code's and not the compiler's. DeepSpeed's loop, kept as it is:
//   - `#pragma omp parallel for` (static schedule) over blocks of 8 vectors = 64 elements;
//   - m = m*b1 + g*(1-b1); v = v*b2 + (g*g)*(1-b2) (FMAs); denom = sqrt(v) * (1/sqrt(1-b2^t)) + eps
//     (one FMA with a precomputed reciprocal); p = p + p*(-lr*wd); p = p + (m/denom)*step_size:
//     one division per element, where zinf (PyTorch's rounding) divides twice.
//   - the per-step scalars in fp32, as its Adam_Optimizer keeps them.
// Benchmark code only: no tail (n must be a multiple of 64) and no half copy. AVX2 only; the caller
// checks the CPU first.
#pragma once

#include <omp.h>

#include <cmath>
#include <cstddef>

#include "kernels/cpu/simd.h"

namespace zinf::kernels::bench {

// DeepSpeed's scalars for one step (Adam_Optimizer::IncrementStep and update_state, in fp32).
struct DsAdamScalars {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, bias2_reciprocal_sqrt, eps, step_size, weight_decay;
};

inline DsAdamScalars ds_adam_scalars(float lr, float beta1, float beta2, float eps, float weight_decay, int step) {
  float beta1_t = 1.0f;
  float beta2_t = 1.0f;
  for (int t = 0; t < step; ++t) {
    beta1_t *= beta1;
    beta2_t *= beta2;
  }
  const float bias_correction1 = 1.0f - beta1_t;
  return {beta1,
          beta2,
          1.0f - beta1,
          1.0f - beta2,
          1.0f / std::sqrt(1.0f - beta2_t),
          eps,
          -lr / bias_correction1,
          -lr * weight_decay};
}

#if ZINF_KERNELS_X86
// n: a multiple of 64.
ZINF_TARGET_AVX2 inline void ds_adamw_step_avx2(const DsAdamScalars& s, float* param, float* exp_avg, float* exp_avg_sq,
                                                const float* grad, std::size_t n) {
  constexpr std::size_t kSpan = 8;
  constexpr std::size_t kWidth = 8;
  const __m256 beta1 = _mm256_set1_ps(s.beta1);
  const __m256 beta2 = _mm256_set1_ps(s.beta2);
  const __m256 one_minus_beta1 = _mm256_set1_ps(s.one_minus_beta1);
  const __m256 one_minus_beta2 = _mm256_set1_ps(s.one_minus_beta2);
  const __m256 bias2 = _mm256_set1_ps(s.bias2_reciprocal_sqrt);
  const __m256 eps = _mm256_set1_ps(s.eps);
  const __m256 step_size = _mm256_set1_ps(s.step_size);
  const __m256 weight_decay = _mm256_set1_ps(s.weight_decay);
#pragma omp parallel for
  for (std::size_t i = 0; i < n; i += kSpan * kWidth) {
    __m256 g[kSpan], m[kSpan], v[kSpan], p[kSpan];
    for (std::size_t k = 0; k < kSpan; ++k) g[k] = _mm256_loadu_ps(grad + i + k * kWidth);
    for (std::size_t k = 0; k < kSpan; ++k) m[k] = _mm256_loadu_ps(exp_avg + i + k * kWidth);
    for (std::size_t k = 0; k < kSpan; ++k) v[k] = _mm256_loadu_ps(exp_avg_sq + i + k * kWidth);
    for (std::size_t k = 0; k < kSpan; ++k) p[k] = _mm256_loadu_ps(param + i + k * kWidth);
    for (std::size_t k = 0; k < kSpan; ++k) {
      m[k] = _mm256_fmadd_ps(g[k], one_minus_beta1, _mm256_mul_ps(m[k], beta1));
      const __m256 g2 = _mm256_mul_ps(g[k], g[k]);
      v[k] = _mm256_fmadd_ps(g2, one_minus_beta2, _mm256_mul_ps(v[k], beta2));
      const __m256 denom = _mm256_fmadd_ps(_mm256_sqrt_ps(v[k]), bias2, eps);
      const __m256 update = _mm256_div_ps(m[k], denom);
      p[k] = _mm256_fmadd_ps(p[k], weight_decay, p[k]);
      p[k] = _mm256_fmadd_ps(update, step_size, p[k]);
    }
    for (std::size_t k = 0; k < kSpan; ++k) _mm256_storeu_ps(param + i + k * kWidth, p[k]);
    for (std::size_t k = 0; k < kSpan; ++k) _mm256_storeu_ps(exp_avg + i + k * kWidth, m[k]);
    for (std::size_t k = 0; k < kSpan; ++k) _mm256_storeu_ps(exp_avg_sq + i + k * kWidth, v[k]);
  }
}
#endif

}  // namespace zinf::kernels::bench
