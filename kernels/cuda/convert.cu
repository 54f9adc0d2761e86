// CUDA element-type conversion between fp32, bf16 and fp16 (kernels/convert.h), bit for bit the CPU
// functions' results: every conversion is integer arithmetic on the raw bits, written after
// kernels/cpu/simd.h's one-element functions, because the intrinsics' NaN results differ from the
// CPU's (the CPU makes every bf16 NaN 0x7FC0 and keeps an fp16 NaN's sign and top payload bits).
// bf16 <-> fp16 goes through fp32 (widening is exact, so it is one rounding); the same type copies.
//
// Launch: one grid-stride kernel per (source, destination) pair, 256 threads a block; each step
// converts 8 elements with 16-byte loads and stores when both arrays are 16-byte aligned, and a
// scalar loop covers the rest (or everything, when either array is not aligned). Not a general
// cast: only the three floating-point storage formats.
#include <cstdint>

#include "kernels/convert.h"
#include "kernels/cuda/elem.cuh"

namespace zinf::kernels::cuda {
namespace {

using detail::aligned16;
using detail::Pack;

constexpr int kThreads = 256;
constexpr int kStepElements = 8;  // 16 bytes of a 16-bit format, 32 of fp32

// The raw bits of one element of each format.
template <Elem E>
struct Format {
  using Bits = std::uint16_t;
};
template <>
struct Format<Elem::kF32> {
  using Bits = std::uint32_t;
};

// fp32 -> bf16: round to nearest even by adding 0x7FFF plus the lowest kept bit; NaN -> 0x7FC0.
__device__ __forceinline__ std::uint16_t f32_to_bf16_bits(std::uint32_t bits) {
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

// fp32 -> fp16 as VCVTPS2PH rounds to nearest even: >= 65520 overflows to inf, denormals kept, a NaN
// keeps its sign and top ten payload bits and is made quiet.
__device__ __forceinline__ std::uint16_t f32_to_f16_bits(std::uint32_t bits) {
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  if (magnitude >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);
  if (magnitude >= 0x38800000u) {  // fp16 normal: rebias the exponent, round away 13 bits
    const std::uint32_t rebiased = magnitude - 0x38000000u;
    return static_cast<std::uint16_t>(sign | ((rebiased + 0xFFFu + ((rebiased >> 13) & 1u)) >> 13));
  }
  if (magnitude <= 0x33000000u) return static_cast<std::uint16_t>(sign);  // <= 2^-25: rounds to zero
  // fp16 subnormal: count units of 2^-24, mantissa >> (126 - exponent) rounded to nearest even.
  const std::uint32_t exponent = magnitude >> 23;
  const std::uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = 126u - exponent;
  const std::uint32_t remainder = mantissa & ((1u << shift) - 1u);
  const std::uint32_t halfway = 1u << (shift - 1u);
  std::uint32_t count = mantissa >> shift;
  if (remainder > halfway || (remainder == halfway && (count & 1u) != 0)) ++count;
  return static_cast<std::uint16_t>(sign | count);
}

// fp16 -> fp32, exact; a signalling NaN comes back quiet (as VCVTPH2PS does).
__device__ __forceinline__ std::uint32_t f16_to_f32_bits(std::uint16_t half) {
  const std::uint32_t sign = (static_cast<std::uint32_t>(half) & 0x8000u) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1Fu;
  const std::uint32_t mantissa = half & 0x3FFu;
  if (exponent == 0x1F) return sign | 0x7F800000u | (mantissa << 13) | (mantissa != 0 ? 0x400000u : 0u);
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in fp32 (an integer below 2^10 times a power of 2).
    return sign | __float_as_uint(__uint2float_rn(mantissa) * 0x1p-24f);
  }
  return sign | ((exponent + 112u) << 23) | (mantissa << 13);
}

__device__ __forceinline__ std::uint32_t bf16_to_f32_bits(std::uint16_t half) {
  return static_cast<std::uint32_t>(half) << 16;
}

template <Elem kSrc, Elem kDst>
__device__ __forceinline__ typename Format<kDst>::Bits convert_bits(typename Format<kSrc>::Bits x) {
  if constexpr (kSrc == kDst) {
    return x;
  } else if constexpr (kSrc == Elem::kF32) {
    return kDst == Elem::kBF16 ? f32_to_bf16_bits(x) : f32_to_f16_bits(x);
  } else if constexpr (kDst == Elem::kF32) {
    return kSrc == Elem::kBF16 ? bf16_to_f32_bits(x) : f16_to_f32_bits(x);
  } else if constexpr (kSrc == Elem::kBF16) {  // bf16 -> fp16
    return f32_to_f16_bits(bf16_to_f32_bits(x));
  } else {  // fp16 -> bf16
    return f32_to_bf16_bits(f16_to_f32_bits(x));
  }
}

// vector_steps: how many 8-element steps go through 16-byte accesses (0 when an array is not
// 16-byte aligned); elements from vector_steps * 8 on are converted one by one.
template <Elem kSrc, Elem kDst>
__global__ void __launch_bounds__(kThreads)
    convert_kernel(typename Format<kDst>::Bits* dst, const typename Format<kSrc>::Bits* src, std::int64_t n,
                   std::int64_t vector_steps) {
  using SrcPack = Pack<typename Format<kSrc>::Bits, kStepElements>;
  using DstPack = Pack<typename Format<kDst>::Bits, kStepElements>;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t step = first; step < vector_steps; step += stride) {
    const SrcPack in = *reinterpret_cast<const SrcPack*>(src + step * kStepElements);
    DstPack out;
#pragma unroll
    for (int k = 0; k < kStepElements; ++k) out.v[k] = convert_bits<kSrc, kDst>(in.v[k]);
    *reinterpret_cast<DstPack*>(dst + step * kStepElements) = out;
  }
  for (std::int64_t i = vector_steps * kStepElements + first; i < n; i += stride) {
    dst[i] = convert_bits<kSrc, kDst>(src[i]);
  }
}

template <Elem kSrc, Elem kDst>
LaunchStatus launch(void* dst, const void* src, std::int64_t n, cudaStream_t stream) {
  const std::int64_t vector_steps = aligned16(dst) && aligned16(src) ? n / kStepElements : 0;
  convert_kernel<kSrc, kDst>
      <<<detail::vector_and_tail_blocks(n, vector_steps, kStepElements, kThreads), kThreads, 0, stream>>>(
          static_cast<typename Format<kDst>::Bits*>(dst), static_cast<const typename Format<kSrc>::Bits*>(src), n,
          vector_steps);
  return detail::last_launch_status();
}

template <Elem kSrc>
LaunchStatus launch_from(Elem dst_elem, void* dst, const void* src, std::int64_t n, cudaStream_t stream) {
  switch (dst_elem) {
    case Elem::kF32:
      return launch<kSrc, Elem::kF32>(dst, src, n, stream);
    case Elem::kBF16:
      return launch<kSrc, Elem::kBF16>(dst, src, n, stream);
    case Elem::kF16:
      return launch<kSrc, Elem::kF16>(dst, src, n, stream);
  }
  return detail::invalid_argument();
}

}  // namespace

LaunchStatus convert(Elem dst_elem, void* dst, Elem src_elem, const void* src, std::int64_t n, Stream stream) {
  if (n < 0) return detail::invalid_argument();
  if (n == 0) return 0;
  if (dst == nullptr || src == nullptr) return detail::invalid_argument();
  const cudaStream_t native = detail::native(stream);
  switch (src_elem) {
    case Elem::kF32:
      return launch_from<Elem::kF32>(dst_elem, dst, src, n, native);
    case Elem::kBF16:
      return launch_from<Elem::kBF16>(dst_elem, dst, src, n, native);
    case Elem::kF16:
      return launch_from<Elem::kF16>(dst_elem, dst, src, n, native);
  }
  return detail::invalid_argument();
}

}  // namespace zinf::kernels::cuda
