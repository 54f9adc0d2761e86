// cuda::convert against the CPU conversions (kernels/convert.h), bit for bit: every 16-bit pattern
// through each conversion out of bf16 and fp16, fp32 special values (zeros, denormals, infinities,
// NaN payloads, rounding ties of both formats, the fp16 overflow edge) and random fp32 bit patterns
// into bf16 and fp16, same-type copies, and lengths 0..40 at misaligned starts (the scalar path)
// with guard elements around the range that must stay untouched.
#include "kernels/convert.h"

#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tests/cuda/cuda_buffer.h"

namespace zinf::cuda_test {
namespace {

using kernels::HalfFormat;

HalfFormat format_of(Elem elem) { return elem == Elem::kBF16 ? HalfFormat::kBF16 : HalfFormat::kF16; }

// Raw bytes on the device (cudaMalloc: 256-byte aligned).
class DeviceBytes {
 public:
  explicit DeviceBytes(std::size_t bytes) { REQUIRE(cudaMalloc(&data_, bytes == 0 ? 1 : bytes) == cudaSuccess); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  ~DeviceBytes() { cudaFree(data_); }
  unsigned char* data() const { return static_cast<unsigned char*>(data_); }

 private:
  void* data_ = nullptr;
};

// Elements as raw bits: uint32 for fp32, uint16 for bf16/fp16, widened to uint32 here.
std::vector<std::uint32_t> to_bits(Elem elem, const std::vector<unsigned char>& bytes) {
  const std::size_t width = elem_bytes(elem);
  std::vector<std::uint32_t> bits(bytes.size() / width);
  for (std::size_t i = 0; i < bits.size(); ++i) {
    if (width == 4) {
      std::memcpy(&bits[i], bytes.data() + 4 * i, 4);
    } else {
      std::uint16_t half;
      std::memcpy(&half, bytes.data() + 2 * i, 2);
      bits[i] = half;
    }
  }
  return bits;
}

std::vector<unsigned char> from_bits(Elem elem, const std::vector<std::uint32_t>& bits) {
  const std::size_t width = elem_bytes(elem);
  std::vector<unsigned char> bytes(bits.size() * width);
  for (std::size_t i = 0; i < bits.size(); ++i) {
    if (width == 4) {
      std::memcpy(bytes.data() + 4 * i, &bits[i], 4);
    } else {
      const auto half = static_cast<std::uint16_t>(bits[i]);
      std::memcpy(bytes.data() + 2 * i, &half, 2);
    }
  }
  return bytes;
}

// What the CPU functions make of `bits` (elements of `src`) in `dst`: widen to fp32 exactly, then
// narrow with the CPU's rounding; the same type is a copy.
std::vector<std::uint32_t> cpu_convert(Elem dst, Elem src, const std::vector<std::uint32_t>& bits) {
  if (dst == src) return bits;
  std::vector<float> wide(bits.size());
  if (src == Elem::kF32) {
    for (std::size_t i = 0; i < bits.size(); ++i) std::memcpy(&wide[i], &bits[i], 4);
  } else {
    std::vector<std::uint16_t> half(bits.begin(), bits.end());
    kernels::cpu::half_to_f32(format_of(src), half.data(), wide.data(), half.size());
  }
  std::vector<std::uint32_t> out(bits.size());
  if (dst == Elem::kF32) {
    for (std::size_t i = 0; i < bits.size(); ++i) std::memcpy(&out[i], &wide[i], 4);
  } else {
    std::vector<std::uint16_t> half(bits.size());
    kernels::cpu::f32_to_half(format_of(dst), wide.data(), half.data(), wide.size());
    out.assign(half.begin(), half.end());
  }
  return out;
}

// Converts `bits` on the GPU with the source at element offset src_offset and the destination at
// dst_offset of their buffers, and checks the result bit for bit against the CPU and that the guard
// elements around the destination range (pre-filled with 0xA5 bytes) are unchanged.
void check_convert(Elem dst, Elem src, const std::vector<std::uint32_t>& bits, std::size_t src_offset = 0,
                   std::size_t dst_offset = 0) {
  INFO("dst " << static_cast<int>(dst) << " src " << static_cast<int>(src) << " n " << bits.size() << " offsets "
              << src_offset << "/" << dst_offset);
  constexpr std::size_t kGuard = 8;
  const std::size_t n = bits.size();
  const std::size_t src_width = elem_bytes(src);
  const std::size_t dst_width = elem_bytes(dst);
  DeviceBytes src_buffer((src_offset + n) * src_width);
  DeviceBytes dst_buffer((dst_offset + n + kGuard) * dst_width);
  const std::vector<unsigned char> src_bytes = from_bits(src, bits);
  if (n > 0) {
    REQUIRE(cudaMemcpy(src_buffer.data() + src_offset * src_width, src_bytes.data(), src_bytes.size(),
                       cudaMemcpyHostToDevice) == cudaSuccess);
  }
  const std::size_t dst_total = (dst_offset + n + kGuard) * dst_width;
  REQUIRE(cudaMemset(dst_buffer.data(), 0xA5, dst_total) == cudaSuccess);

  const auto status =
      kernels::cuda::convert(dst, dst_buffer.data() + dst_offset * dst_width, src,
                             src_buffer.data() + src_offset * src_width, static_cast<std::int64_t>(n), nullptr);
  REQUIRE(status == 0);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  std::vector<unsigned char> dst_bytes(dst_total);
  REQUIRE(cudaMemcpy(dst_bytes.data(), dst_buffer.data(), dst_total, cudaMemcpyDeviceToHost) == cudaSuccess);

  for (std::size_t i = 0; i < dst_offset * dst_width; ++i) REQUIRE(dst_bytes[i] == 0xA5);
  for (std::size_t i = (dst_offset + n) * dst_width; i < dst_total; ++i) REQUIRE(dst_bytes[i] == 0xA5);
  const std::vector<unsigned char> range(dst_bytes.begin() + static_cast<std::ptrdiff_t>(dst_offset * dst_width),
                                         dst_bytes.begin() + static_cast<std::ptrdiff_t>((dst_offset + n) * dst_width));
  const std::vector<std::uint32_t> actual = to_bits(dst, range);
  const std::vector<std::uint32_t> expected = cpu_convert(dst, src, bits);
  for (std::size_t i = 0; i < n; ++i) {
    if (actual[i] != expected[i]) {
      INFO("element " << i << ": input 0x" << std::hex << bits[i] << " gave 0x" << actual[i] << ", CPU 0x"
                      << expected[i]);
      REQUIRE(actual[i] == expected[i]);
    }
  }
}

std::vector<std::uint32_t> every_16bit_pattern() {
  std::vector<std::uint32_t> bits(65536);
  for (std::uint32_t i = 0; i < 65536; ++i) bits[i] = i;
  return bits;
}

// fp32 patterns where rounding and NaN rules matter, each with both signs.
std::vector<std::uint32_t> special_f32_bits() {
  const std::vector<std::uint32_t> magnitudes = {
      0x00000000u,                                                                   // zero
      0x00000001u, 0x00000002u, 0x00400000u, 0x007FFFFFu,                            // fp32 denormals
      0x00800000u,                                                                   // smallest normal
      0x7F800000u,                                                                   // inf
      0x7FC00000u, 0x7F800001u, 0x7FA12345u, 0x7FFFFFFFu, 0x7FC0FFFFu, 0x7F802000u,  // NaNs, quiet and signalling
      0x7F7FFFFFu,                                         // largest finite: past both formats
      0x3F800000u,                                         // 1
      0x3F808000u, 0x3F818000u, 0x3F808001u, 0x3F807FFFu,  // bf16 ties (to even: down, up) and neighbours
      0x7F7F8000u, 0x7F7F7FFFu,                            // bf16 tie at the top: rounds to inf / stays finite
      0x3F801000u, 0x3F803000u, 0x3F801001u, 0x3F800FFFu,  // fp16 ties and neighbours
      0x477FE000u,                                         // 65504, largest fp16
      0x477FEFFFu,                                         // just below 65520: rounds to 65504
      0x477FF000u,                                         // 65520: rounds to inf
      0x47800000u,                                         // 65536
      0x38800000u, 0x387FFFFFu, 0x387FF000u,               // fp16 normal edge 2^-14 and just below
      0x33000000u, 0x33000001u, 0x33C00000u, 0x33A00000u,  // 2^-25 (tie to 0), just above, 1.5 * 2^-24, 1.25 * 2^-24
      0x34400000u, 0x34200000u,                            // 3 * 2^-24 / 2 ... ties between fp16 subnormals
      0x32FFFFFFu, 0x33800000u,                            // just below 2^-25, 2^-24 (smallest fp16 subnormal)
      0x00800001u, 0x0000FFFFu, 0x00018000u,               // bf16 subnormal ties and denormal rounding
  };
  std::vector<std::uint32_t> bits;
  for (std::uint32_t m : magnitudes) {
    bits.push_back(m);
    bits.push_back(m | 0x80000000u);
  }
  return bits;
}

std::vector<std::uint32_t> random_f32_bits(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint32_t> bits(n);
  for (auto& b : bits) b = static_cast<std::uint32_t>(rng());
  return bits;
}

constexpr Elem kElems[] = {Elem::kF32, Elem::kBF16, Elem::kF16};

TEST_CASE("cuda convert: every 16-bit pattern to each format, bit for bit", "[cuda][convert]") {
  const std::vector<std::uint32_t> bits = every_16bit_pattern();
  for (Elem src : {Elem::kBF16, Elem::kF16}) {
    for (Elem dst : kElems) check_convert(dst, src, bits);
  }
}

TEST_CASE("cuda convert: fp32 special values and random patterns, bit for bit", "[cuda][convert]") {
  const std::vector<std::uint32_t> special = special_f32_bits();
  const std::vector<std::uint32_t> random = random_f32_bits(200003, 7);
  for (Elem dst : kElems) {
    check_convert(dst, Elem::kF32, special);
    check_convert(dst, Elem::kF32, random);
  }
}

TEST_CASE("cuda convert: odd lengths and misaligned starts leave neighbours untouched", "[cuda][convert]") {
  const std::vector<std::uint32_t> source = random_f32_bits(41, 11);
  const std::vector<std::uint32_t> halves = every_16bit_pattern();
  for (std::size_t n = 0; n <= 40; ++n) {
    for (Elem src : kElems) {
      std::vector<std::uint32_t> bits(n);
      for (std::size_t i = 0; i < n; ++i) bits[i] = src == Elem::kF32 ? source[i] : halves[(i * 2731u + 17u) % 65536u];
      for (Elem dst : kElems) {
        check_convert(dst, src, bits, 0, 0);  // aligned: vector steps plus a tail
        check_convert(dst, src, bits, 1, 0);  // misaligned source: scalar path
        check_convert(dst, src, bits, 0, 3);  // misaligned destination: scalar path
      }
    }
  }
}

TEST_CASE("cuda convert: rejects a negative length and does nothing for zero", "[cuda][convert]") {
  DeviceBytes buffer(64);
  REQUIRE(kernels::cuda::convert(Elem::kBF16, buffer.data(), Elem::kF32, buffer.data() + 32, -1, nullptr) != 0);
  REQUIRE(kernels::cuda::convert(Elem::kBF16, nullptr, Elem::kF32, nullptr, 0, nullptr) == 0);
}

}  // namespace
}  // namespace zinf::cuda_test
