// fp32 <-> bf16/fp16 conversion: a scalar variant (simd.h's one-element functions in a loop), an
// AVX2+F16C variant (8 lanes) and an AVX-512 variant (16 lanes, two vectors per iteration). Tails
// shorter than a vector use the scalar functions, which compute the same bits.
#include "kernels/convert.h"

#include "kernels/cpu/simd.h"

namespace zinf::kernels::cpu {
namespace {

void f32_to_half_scalar(HalfFormat format, const float* in, std::uint16_t* out, std::size_t n) {
  if (format == HalfFormat::kBF16) {
    for (std::size_t i = 0; i < n; ++i) out[i] = simd::f32_to_bf16_one(in[i]);
  } else {
    for (std::size_t i = 0; i < n; ++i) out[i] = simd::f32_to_f16_one(in[i]);
  }
}

void half_to_f32_scalar(HalfFormat format, const std::uint16_t* in, float* out, std::size_t n) {
  if (format == HalfFormat::kBF16) {
    for (std::size_t i = 0; i < n; ++i) out[i] = simd::bf16_to_f32_one(in[i]);
  } else {
    for (std::size_t i = 0; i < n; ++i) out[i] = simd::f16_to_f32_one(in[i]);
  }
}

#if ZINF_KERNELS_X86

ZINF_TARGET_AVX2 void f32_to_half_avx2(HalfFormat format, const float* in, std::uint16_t* out, std::size_t n) {
  std::size_t i = 0;
  if (format == HalfFormat::kBF16) {
    for (; i + 16 <= n; i += 16) {
      simd::store_bf16x8(out + i, _mm256_loadu_ps(in + i));
      simd::store_bf16x8(out + i + 8, _mm256_loadu_ps(in + i + 8));
    }
    for (; i + 8 <= n; i += 8) simd::store_bf16x8(out + i, _mm256_loadu_ps(in + i));
  } else {
    for (; i + 16 <= n; i += 16) {
      simd::store_f16x8(out + i, _mm256_loadu_ps(in + i));
      simd::store_f16x8(out + i + 8, _mm256_loadu_ps(in + i + 8));
    }
    for (; i + 8 <= n; i += 8) simd::store_f16x8(out + i, _mm256_loadu_ps(in + i));
  }
  f32_to_half_scalar(format, in + i, out + i, n - i);
}

ZINF_TARGET_AVX2 void half_to_f32_avx2(HalfFormat format, const std::uint16_t* in, float* out, std::size_t n) {
  std::size_t i = 0;
  if (format == HalfFormat::kBF16) {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, simd::load_bf16x8(in + i));
  } else {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, simd::load_f16x8(in + i));
  }
  half_to_f32_scalar(format, in + i, out + i, n - i);
}

ZINF_TARGET_AVX512 void f32_to_half_avx512(HalfFormat format, const float* in, std::uint16_t* out, std::size_t n) {
  std::size_t i = 0;
  if (format == HalfFormat::kBF16) {
    for (; i + 32 <= n; i += 32) {
      simd::store_bf16x16(out + i, _mm512_loadu_ps(in + i));
      simd::store_bf16x16(out + i + 16, _mm512_loadu_ps(in + i + 16));
    }
    for (; i + 16 <= n; i += 16) simd::store_bf16x16(out + i, _mm512_loadu_ps(in + i));
  } else {
    for (; i + 32 <= n; i += 32) {
      simd::store_f16x16(out + i, _mm512_loadu_ps(in + i));
      simd::store_f16x16(out + i + 16, _mm512_loadu_ps(in + i + 16));
    }
    for (; i + 16 <= n; i += 16) simd::store_f16x16(out + i, _mm512_loadu_ps(in + i));
  }
  f32_to_half_scalar(format, in + i, out + i, n - i);
}

ZINF_TARGET_AVX512 void half_to_f32_avx512(HalfFormat format, const std::uint16_t* in, float* out, std::size_t n) {
  std::size_t i = 0;
  if (format == HalfFormat::kBF16) {
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, simd::load_bf16x16(in + i));
  } else {
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, simd::load_f16x16(in + i));
  }
  half_to_f32_scalar(format, in + i, out + i, n - i);
}

#endif  // ZINF_KERNELS_X86

}  // namespace

void f32_to_half(Isa isa, HalfFormat format, const float* in, std::uint16_t* out, std::size_t n) {
  switch (isa) {
#if ZINF_KERNELS_X86
    case Isa::kAvx512:
      f32_to_half_avx512(format, in, out, n);
      return;
    case Isa::kAvx2:
      f32_to_half_avx2(format, in, out, n);
      return;
#endif
    default:
      f32_to_half_scalar(format, in, out, n);
      return;
  }
}

void half_to_f32(Isa isa, HalfFormat format, const std::uint16_t* in, float* out, std::size_t n) {
  switch (isa) {
#if ZINF_KERNELS_X86
    case Isa::kAvx512:
      half_to_f32_avx512(format, in, out, n);
      return;
    case Isa::kAvx2:
      half_to_f32_avx2(format, in, out, n);
      return;
#endif
    default:
      half_to_f32_scalar(format, in, out, n);
      return;
  }
}

void f32_to_half(HalfFormat format, const float* in, std::uint16_t* out, std::size_t n) {
  f32_to_half(best_isa(), format, in, out, n);
}

void half_to_f32(HalfFormat format, const std::uint16_t* in, float* out, std::size_t n) {
  half_to_f32(best_isa(), format, in, out, n);
}

void f32_to_bf16(const float* in, std::uint16_t* out, std::size_t n) { f32_to_half(HalfFormat::kBF16, in, out, n); }
void bf16_to_f32(const std::uint16_t* in, float* out, std::size_t n) { half_to_f32(HalfFormat::kBF16, in, out, n); }
void f32_to_f16(const float* in, std::uint16_t* out, std::size_t n) { f32_to_half(HalfFormat::kF16, in, out, n); }
void f16_to_f32(const std::uint16_t* in, float* out, std::size_t n) { half_to_f32(HalfFormat::kF16, in, out, n); }

}  // namespace zinf::kernels::cpu
