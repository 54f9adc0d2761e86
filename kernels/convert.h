// Element-type conversion between fp32 and the 16-bit storage formats, on raw arrays.
//
// Dimension legend: N elements (a flat slice; no other shape matters here).
//
// Rounding is to nearest, ties to even, for both formats; denormals are kept (never flushed).
//   fp32 -> bf16  PyTorch's float -> bfloat16, bit for bit for every non-NaN input: values past the
//                 largest bf16 round to +-inf. Every NaN becomes the quiet NaN 0x7FC0, as
//                 c10::BFloat16 does (PyTorch's vectorised CPU path writes 0xFFFF instead).
//   fp32 -> fp16  IEEE binary16 as the F16C instruction computes it (and PyTorch, for every non-NaN
//                 input): magnitudes >= 65520 become +-inf; a NaN keeps its sign and top ten payload
//                 bits and is made quiet.
//   bf16 -> fp32, fp16 -> fp32  exact (a signalling fp16 NaN comes back quiet; bf16 NaN bits are
//                 copied as they are).
//
// Preconditions (not checked): `in` and `out` point to at least `n` elements and do not overlap.
// Any alignment. Single-threaded and reentrant; callers split very large arrays across threads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cuda_launch.h"

namespace zinf::kernels {

// The two 16-bit floating-point storage formats. Bits are passed as std::uint16_t.
enum class HalfFormat { kBF16, kF16 };

namespace cpu {

void f32_to_bf16(const float* in /*[N]*/, std::uint16_t* out /*[N]*/, std::size_t n);
void bf16_to_f32(const std::uint16_t* in /*[N]*/, float* out /*[N]*/, std::size_t n);
void f32_to_f16(const float* in /*[N]*/, std::uint16_t* out /*[N]*/, std::size_t n);
void f16_to_f32(const std::uint16_t* in /*[N]*/, float* out /*[N]*/, std::size_t n);

// The same, with the 16-bit format chosen at run time.
void f32_to_half(HalfFormat format, const float* in /*[N]*/, std::uint16_t* out /*[N]*/, std::size_t n);
void half_to_f32(HalfFormat format, const std::uint16_t* in /*[N]*/, float* out /*[N]*/, std::size_t n);

// One instruction-set variant on purpose, for tests and benchmarks; the functions above call
// these with best_isa(). Precondition: isa_supported(isa). Every variant gives the same bits.
void f32_to_half(Isa isa, HalfFormat format, const float* in /*[N]*/, std::uint16_t* out /*[N]*/, std::size_t n);
void half_to_f32(Isa isa, HalfFormat format, const std::uint16_t* in /*[N]*/, float* out /*[N]*/, std::size_t n);

}  // namespace cpu
namespace cuda {
// dst = src with the element type converted (any pair of fp32, bf16, fp16; the same type copies),
// with exactly the CPU functions' rounding and NaN rules above, so a value converted on either side
// has the same bits.
LaunchStatus convert(Elem dst_elem, void* dst /*[N]*/, Elem src_elem, const void* src /*[N]*/, std::int64_t n,
                     Stream stream);
}  // namespace cuda

}  // namespace zinf::kernels
