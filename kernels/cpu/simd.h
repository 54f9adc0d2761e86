// Building blocks shared by the CPU kernel variants: the target attributes that mark a function as
// an AVX2 or AVX-512 variant, one-element fp32 <-> bf16/fp16 conversions (the scalar variant and
// the reference the vector code must equal bit for bit), and vector loads/stores of the 16-bit
// formats, and a vectorisable exp. Internal to kernels/cpu: not part of the module's interface.
//
// A function marked ZINF_TARGET_AVX2 or ZINF_TARGET_AVX512 may only be called after isa_supported()
// said yes; the helpers below carry the same attributes so they inline into those functions.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/cpu_features.h"

#if defined(__x86_64__)
// GCC 12's AVX-512 headers initialise their "undefined" vectors from themselves, which
// -Wmaybe-uninitialized reports at every use (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#define ZINF_KERNELS_X86 1
#else
#define ZINF_KERNELS_X86 0
#endif

#define ZINF_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define ZINF_TARGET_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))

// The variant of a kernel function for `isa`. Kernel files name their variants <stem>_scalar,
// <stem>_avx2 and <stem>_avx512 (the last two exist only on x86), so one line picks among them and
// non-x86 builds never name the vector variants.
#if ZINF_KERNELS_X86
#define ZINF_KERNEL_VARIANT(isa, stem)                         \
  ((isa) == ::zinf::kernels::cpu::Isa::kAvx512 ? stem##_avx512 \
   : (isa) == ::zinf::kernels::cpu::Isa::kAvx2 ? stem##_avx2   \
                                               : stem##_scalar)
#else
#define ZINF_KERNEL_VARIANT(isa, stem) ((void)(isa), stem##_scalar)
#endif

namespace zinf::kernels::cpu::simd {

inline std::uint32_t f32_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float f32_from_bits(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// Round to nearest even by adding 0x7FFF plus the lowest kept bit; NaN -> 0x7FC0 as PyTorch does.
inline std::uint16_t f32_to_bf16_one(float value) {
  const std::uint32_t bits = f32_bits(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

inline float bf16_to_f32_one(std::uint16_t half) { return f32_from_bits(static_cast<std::uint32_t>(half) << 16); }

// What VCVTPS2PH computes with round-to-nearest-even.
inline std::uint16_t f32_to_f16_one(float value) {
  const std::uint32_t bits = f32_bits(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  if (magnitude >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520: inf
  if (magnitude >= 0x38800000u) {  // fp16 normal (>= 2^-14): rebias the exponent, round 13 bits
    const std::uint32_t rebiased = magnitude - 0x38000000u;
    return static_cast<std::uint16_t>(sign | ((rebiased + 0xFFFu + ((rebiased >> 13) & 1u)) >> 13));
  }
  if (magnitude <= 0x33000000u) return static_cast<std::uint16_t>(sign);  // <= 2^-25 rounds to zero
  // fp16 subnormal: the result counts units of 2^-24. value = mantissa * 2^(exponent - 150), so the
  // count is mantissa >> (126 - exponent), rounded to nearest even; shift is 14..24 here.
  const std::uint32_t exponent = magnitude >> 23;
  const std::uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = 126u - exponent;
  const std::uint32_t remainder = mantissa & ((1u << shift) - 1u);
  const std::uint32_t halfway = 1u << (shift - 1u);
  std::uint32_t count = mantissa >> shift;
  if (remainder > halfway || (remainder == halfway && (count & 1u) != 0)) ++count;
  return static_cast<std::uint16_t>(sign | count);
}

// What VCVTPH2PS computes: exact, and a signalling NaN comes back quiet.
inline float f16_to_f32_one(std::uint16_t half) {
  const std::uint32_t sign = (static_cast<std::uint32_t>(half) & 0x8000u) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1Fu;
  const std::uint32_t mantissa = half & 0x3FFu;
  if (exponent == 0x1F) {
    return f32_from_bits(sign | 0x7F800000u | (mantissa << 13) | (mantissa != 0 ? 0x400000u : 0u));
  }
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in fp32.
    return f32_from_bits(sign | f32_bits(static_cast<float>(mantissa) * 0x1p-24f));
  }
  return f32_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// ---- exp without a library call -----------------------------------------------------------------
//
// Plain fp32 arithmetic the compiler vectorises when these are inlined into a ZINF_TARGET_AVX2/AVX512
// loop; with -ffp-contract=off (kernels/CMakeLists.txt) every variant gives the same bits.

// exp(x) for x in any range, from Cephes' expf: range reduction by ln 2 and a degree-5 polynomial.
// Relative error against the exact exp at most 2e-7 (about 2 ulp; kernels_test checks it over
// [-87, 88.37]). The argument is clamped to [-87, 88.376], where the result and 2^n stay normal
// floats: below -87 the result is exp(-87) ~= 1.65e-38 (never a denormal), above it ~3.4e38 (never
// inf). The clamp's argument order turns a NaN into -87, so the float -> int conversion below never
// sees one.
[[gnu::always_inline]] inline float exp_approx(float x) {
  x = std::max(-87.0f, std::min(x, 88.3762626647949f));
  // n = round(x / ln 2): adding and subtracting 1.5 * 2^23 rounds to the nearest integer.
  constexpr float kRound = 12582912.0f;
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  // r = x - n ln 2, with ln 2 split in two so the product is exact enough.
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * (r * r) + r + 1.0f;
  // 2^n built from its exponent bits; n is in [-126, 127].
  const auto scale = std::bit_cast<float>(static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127) << 23);
  return e * scale;
}

// exp_approx, but exactly 0 for x < -87 (where exp(x) < 1.65e-38): for sums of exp(x - max) and
// softmax, where a tiny term must vanish rather than be clamped. Same accuracy as exp_approx from
// -87 up; a NaN still gives exp_approx(-87).
[[gnu::always_inline]] inline float exp_approx_flushed(float x) { return x < -87.0f ? 0.0f : exp_approx(x); }

// exp_approx with the same reduction, coefficients and clamp, its polynomial evaluated by Estrin's
// scheme (pairs of terms, then powers of r*r) instead of Horner's: the same number of operations in
// a dependency chain about half as long, for loops whose exp latency, not throughput, bounds them
// (SwiGLU's). Not bit-equal to exp_approx; relative error also at most 2e-7 (kernels_test checks
// it over [-87, 88.37]).
[[gnu::always_inline]] inline float exp_approx_estrin(float x) {
  x = std::max(-87.0f, std::min(x, 88.3762626647949f));
  constexpr float kRound = 12582912.0f;
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const float r2 = r * r;
  const float p01 = 1.6666665459e-1f * r + 5.0000001201e-1f;
  const float p23 = 8.3334519073e-3f * r + 4.1665795894e-2f;
  const float p45 = 1.9875691500e-4f * r + 1.3981999507e-3f;
  const float p = (p45 * r2 + p23) * r2 + p01;
  const float e = p * r2 + r + 1.0f;
  const auto scale = std::bit_cast<float>(static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127) << 23);
  return e * scale;
}

#if ZINF_KERNELS_X86

// ---- AVX2 (8 lanes) ------------------------------------------------------------------------------

ZINF_TARGET_AVX2 inline __m256 load_bf16x8(const std::uint16_t* in) {
  const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
}

ZINF_TARGET_AVX2 inline __m256 load_f16x8(const std::uint16_t* in) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
}

ZINF_TARGET_AVX2 inline void store_bf16x8(std::uint16_t* out, __m256 value) {
  const __m256i bits = _mm256_castps_si256(value);
  const __m256i lowest_kept = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(lowest_kept, _mm256_set1_epi32(0x7FFF))), 16);
  const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(value, value, _CMP_UNORD_Q));
  rounded = _mm256_blendv_epi8(rounded, _mm256_set1_epi32(0x7FC0), is_nan);
  // Every lane is <= 0xFFFF, so the unsigned-saturating pack is a plain narrowing.
  const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(rounded), _mm256_extracti128_si256(rounded, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), packed);
}

ZINF_TARGET_AVX2 inline void store_f16x8(std::uint16_t* out, __m256 value) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                   _mm256_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// ---- AVX-512 (16 lanes) --------------------------------------------------------------------------

ZINF_TARGET_AVX512 inline __m512 load_bf16x16(const std::uint16_t* in) {
  const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
}

ZINF_TARGET_AVX512 inline __m512 load_f16x16(const std::uint16_t* in) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in)));
}

// Not VCVTNEPS2BF16 (AVX512_BF16): that instruction treats fp32 denormals as zero, PyTorch does not.
ZINF_TARGET_AVX512 inline void store_bf16x16(std::uint16_t* out, __m512 value) {
  const __m512i bits = _mm512_castps_si512(value);
  const __m512i lowest_kept = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lowest_kept, _mm512_set1_epi32(0x7FFF))), 16);
  const __mmask16 is_nan = _mm512_cmp_ps_mask(value, value, _CMP_UNORD_Q);
  rounded = _mm512_mask_mov_epi32(rounded, is_nan, _mm512_set1_epi32(0x7FC0));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi32_epi16(rounded));
}

ZINF_TARGET_AVX512 inline void store_f16x16(std::uint16_t* out, __m512 value) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                      _mm512_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

#endif  // ZINF_KERNELS_X86

}  // namespace zinf::kernels::cpu::simd
