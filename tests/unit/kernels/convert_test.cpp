// fp32 <-> bf16/fp16 conversion: every 16-bit pattern both ways, a million fp32 values (random bit
// patterns, denormals, inf, NaN, exact halfway cases, the fp16 overflow edge) against a reference
// written here independently of the kernels (decode every candidate in fp64 and pick the nearest,
// ties to even), every instruction-set variant this CPU has bit for bit, and every length 0..100 at
// unaligned starts without a write past the end.
#include "kernels/convert.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "tests/catch.h"
#include "tests/unit/kernels/kernel_test_support.h"

namespace zinf::kernels {
namespace {

using test_support::supported_isas;

using cpu::Isa;

// ---- Reference, written from the format definitions ----------------------------------------------

struct Layout {
  int exponent_bits;
  int mantissa_bits;
};

Layout layout(HalfFormat format) { return format == HalfFormat::kBF16 ? Layout{8, 7} : Layout{5, 10}; }

std::uint32_t inf_bits(HalfFormat format) {
  const Layout l = layout(format);
  return ((1u << l.exponent_bits) - 1u) << l.mantissa_bits;
}

// The magnitude a sign-less pattern encodes. The all-ones exponent with a zero mantissa decodes as
// 2^(emax+1), the value a rounding that overflows would reach: rounding compares against it.
double decode_magnitude(HalfFormat format, std::uint32_t bits) {
  const Layout l = layout(format);
  const std::uint32_t exponent = bits >> l.mantissa_bits;
  const std::uint32_t mantissa = bits & ((1u << l.mantissa_bits) - 1u);
  const int bias = (1 << (l.exponent_bits - 1)) - 1;
  if (exponent == 0) return std::ldexp(static_cast<double>(mantissa), 1 - bias - l.mantissa_bits);
  return std::ldexp(static_cast<double>(mantissa + (1u << l.mantissa_bits)),
                    static_cast<int>(exponent) - bias - l.mantissa_bits);
}

bool is_nan_half(HalfFormat format, std::uint16_t bits) { return (bits & 0x7FFFu) > inf_bits(format); }

// Round-to-nearest-even of a non-NaN float: the largest pattern not above |x| by bisection, then the
// nearer of it and the next one (the even one on a tie).
std::uint16_t reference_round(HalfFormat format, float x) {
  const std::uint32_t sign = std::signbit(x) ? 0x8000u : 0u;
  const double magnitude = std::fabs(static_cast<double>(x));
  const std::uint32_t inf = inf_bits(format);
  if (magnitude >= decode_magnitude(format, inf)) return static_cast<std::uint16_t>(sign | inf);
  std::uint32_t lo = 0;  // decode(lo) <= magnitude < decode(hi)
  std::uint32_t hi = inf;
  while (hi - lo > 1) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (decode_magnitude(format, mid) <= magnitude) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const double below = magnitude - decode_magnitude(format, lo);
  const double above = decode_magnitude(format, hi) - magnitude;
  std::uint32_t pick = lo;
  if (above < below || (above == below && (lo & 1u) != 0)) pick = hi;
  return static_cast<std::uint16_t>(sign | pick);
}

std::uint32_t bits_of(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float float_of(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// What a NaN must become: PyTorch's canonical 0x7FC0 for bf16; for fp16 what VCVTPS2PH gives, the
// sign and top ten payload bits with the quiet bit set.
std::uint16_t expected_nan(HalfFormat format, float x) {
  if (format == HalfFormat::kBF16) return 0x7FC0u;
  const std::uint32_t bits = bits_of(x);
  return static_cast<std::uint16_t>(((bits >> 16) & 0x8000u) | 0x7E00u | ((bits >> 13) & 0x3FFu));
}

std::uint16_t expected_f32_to_half(HalfFormat format, float x) {
  return std::isnan(x) ? expected_nan(format, x) : reference_round(format, x);
}

const char* format_name(HalfFormat format) { return format == HalfFormat::kBF16 ? "bf16" : "fp16"; }

// ---- Test data -----------------------------------------------------------------------------------

// A million fp32 values that reach every branch of a conversion to `format`.
std::vector<float> hard_floats(HalfFormat format, std::mt19937_64& rng) {
  std::vector<float> values;
  values.reserve(1'000'000);
  for (float special : {0.0f,
                        -0.0f,
                        std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN(),
                        -std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::signaling_NaN(),
                        std::numeric_limits<float>::max(),
                        std::numeric_limits<float>::lowest(),
                        std::numeric_limits<float>::min(),
                        std::numeric_limits<float>::denorm_min(),
                        65504.0f,
                        65519.996f,
                        65520.0f,
                        65536.0f,
                        -65520.0f,
                        0x1p-24f,
                        0x1p-25f,
                        0x1.000002p-25f,
                        0x1.8p-24f,
                        0x1p-14f,
                        0x1.ffcp-15f}) {
    values.push_back(special);
  }
  std::uniform_int_distribution<std::uint32_t> any_u32;
  const std::uint32_t inf = inf_bits(format);
  std::uniform_int_distribution<std::uint32_t> any_finite_half(0, inf - 1);
  while (values.size() < 1'000'000) {
    const std::uint32_t r = any_u32(rng);
    switch (values.size() % 6) {
      case 0:
        values.push_back(float_of(r));
        break;  // any pattern: NaN, inf, denormal
      case 1:
        values.push_back(float_of(r & 0x807FFFFFu));
        break;   // fp32 denormals and zeros
      case 2: {  // exactly halfway between two neighbouring half values (exact in fp32), or one ulp off
        const std::uint32_t h = any_finite_half(rng);
        const double mid = 0.5 * (decode_magnitude(format, h) + decode_magnitude(format, h + 1));
        float value = static_cast<float>(mid);
        if (static_cast<double>(value) == mid) {
          const int nudge = static_cast<int>(r % 3) - 1;
          value = float_of(bits_of(value) + static_cast<std::uint32_t>(nudge));
        }
        values.push_back((r & 0x80000000u) != 0 ? -value : value);
        break;
      }
      case 3: {  // the largest finite values and the overflow edge
        const float top = static_cast<float>(decode_magnitude(format, inf - 1));
        values.push_back(float_of(bits_of(top) + (r % 8192) - 4096));
        break;
      }
      case 4: {  // the half subnormal range (12 binades below the smallest normal) and the edge
        const std::uint32_t smallest_normal =
            bits_of(static_cast<float>(decode_magnitude(format, 1u << layout(format).mantissa_bits)));
        const std::uint32_t below = std::min(r % 0x06000000u, smallest_normal);
        values.push_back(float_of((r & 0x80000000u) | (smallest_normal - below)));
        break;
      }
      default: {  // ordinary magnitudes
        std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
        values.push_back(uniform(rng) * std::ldexp(1.0f, static_cast<int>(r % 40) - 20));
        break;
      }
    }
  }
  return values;
}

// ---- Tests ---------------------------------------------------------------------------------------

TEST_CASE("convert: the reference itself on hand-checked values", "[convert]") {
  CHECK(reference_round(HalfFormat::kBF16, 1.0f) == 0x3F80u);
  CHECK(reference_round(HalfFormat::kBF16, float_of(0x3F808000u)) == 0x3F80u);  // tie, to even
  CHECK(reference_round(HalfFormat::kBF16, float_of(0x3F818000u)) == 0x3F82u);  // tie, to even
  CHECK(reference_round(HalfFormat::kBF16, float_of(0x3F808001u)) == 0x3F81u);
  CHECK(reference_round(HalfFormat::kBF16, std::numeric_limits<float>::max()) == 0x7F80u);
  CHECK(reference_round(HalfFormat::kBF16, float_of(0x00008000u)) == 0x0000u);  // denormal tie to 0
  CHECK(reference_round(HalfFormat::kBF16, float_of(0x00018000u)) == 0x0002u);
  CHECK(reference_round(HalfFormat::kF16, 1.0f) == 0x3C00u);
  CHECK(reference_round(HalfFormat::kF16, -2.0f) == 0xC000u);
  CHECK(reference_round(HalfFormat::kF16, 65504.0f) == 0x7BFFu);
  CHECK(reference_round(HalfFormat::kF16, 65519.996f) == 0x7BFFu);
  CHECK(reference_round(HalfFormat::kF16, 65520.0f) == 0x7C00u);
  CHECK(reference_round(HalfFormat::kF16, 0x1p-24f) == 0x0001u);
  CHECK(reference_round(HalfFormat::kF16, 0x1p-25f) == 0x0000u);
  CHECK(reference_round(HalfFormat::kF16, 0x1.000002p-25f) == 0x0001u);
  CHECK(reference_round(HalfFormat::kF16, 0x1.8p-24f) == 0x0002u);
  CHECK(reference_round(HalfFormat::kF16, 0x1p-14f) == 0x0400u);
  CHECK(reference_round(HalfFormat::kF16, 0.1f) == 0x2E66u);
}

TEST_CASE("convert: cpu features name a level this CPU runs", "[convert]") {
  const Isa best = cpu::best_isa();
  CHECK(cpu::isa_supported(best));
  CHECK(cpu::isa_supported(Isa::kScalar));
  CHECK((cpu::isa_name(best) == "scalar" || cpu::isa_name(best) == "avx2" || cpu::isa_name(best) == "avx512"));
  if (cpu::isa_supported(Isa::kAvx512)) CHECK(cpu::isa_supported(Isa::kAvx2));
  const cpu::CpuFeatures& f = cpu::cpu_features();
  if (cpu::isa_supported(Isa::kAvx2)) CHECK((f.avx2 && f.fma && f.f16c));
  INFO("best level: " << cpu::isa_name(best));
  SUCCEED();
}

TEST_CASE("convert: every 16-bit pattern -> fp32 -> back is the identity", "[convert]") {
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  for (HalfFormat format : {HalfFormat::kBF16, HalfFormat::kF16}) {
    for (Isa isa : supported_isas()) {
      INFO(format_name(format) << " " << cpu::isa_name(isa));
      std::vector<float> wide(all.size());
      std::vector<std::uint16_t> back(all.size());
      cpu::half_to_f32(isa, format, all.data(), wide.data(), all.size());
      cpu::f32_to_half(isa, format, wide.data(), back.data(), wide.size());
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < all.size(); ++i) {
        const std::uint16_t bits = all[i];
        const double sign = (bits & 0x8000u) != 0 ? -1.0 : 1.0;
        const std::uint32_t magnitude_bits = bits & 0x7FFFu;
        bool ok = true;
        if (is_nan_half(format, bits)) {
          // NaN stays NaN with its sign; bf16 bits widen as they are, fp16 signalling NaNs turn quiet.
          ok = std::isnan(wide[i]) && std::signbit(wide[i]) == ((bits & 0x8000u) != 0);
          if (format == HalfFormat::kBF16) {
            ok = ok && bits_of(wide[i]) == static_cast<std::uint32_t>(bits) << 16 && back[i] == 0x7FC0u;
          } else {
            ok = ok && back[i] == (bits | 0x0200u);
          }
        } else {
          const double expected = magnitude_bits == inf_bits(format) ? sign * std::numeric_limits<double>::infinity()
                                                                     : sign * decode_magnitude(format, magnitude_bits);
          ok = static_cast<double>(wide[i]) == expected && std::signbit(wide[i]) == (sign < 0) && back[i] == bits;
        }
        if (!ok && mismatches++ < 5) {
          FAIL_CHECK("pattern 0x" << std::hex << bits << " -> fp32 0x" << bits_of(wide[i]) << " -> 0x" << back[i]);
        }
      }
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("convert: fp32 -> bf16/fp16 equals the reference on a million hard values", "[convert]") {
  std::mt19937_64 rng(4242);
  for (HalfFormat format : {HalfFormat::kBF16, HalfFormat::kF16}) {
    const std::vector<float> values = hard_floats(format, rng);
    std::vector<std::uint16_t> expected(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) expected[i] = expected_f32_to_half(format, values[i]);
    for (Isa isa : supported_isas()) {
      INFO(format_name(format) << " " << cpu::isa_name(isa));
      std::vector<std::uint16_t> got(values.size());
      cpu::f32_to_half(isa, format, values.data(), got.data(), values.size());
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < values.size(); ++i) {
        if (got[i] != expected[i] && mismatches++ < 5) {
          FAIL_CHECK("fp32 0x" << std::hex << bits_of(values[i]) << " -> 0x" << got[i] << ", expected 0x"
                               << expected[i]);
        }
      }
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("convert: the named entry points dispatch to the same bits", "[convert]") {
  std::mt19937_64 rng(7);
  const std::vector<float> values = hard_floats(HalfFormat::kF16, rng);
  const std::size_t n = 10'007;
  std::vector<std::uint16_t> bf16(n);
  std::vector<std::uint16_t> f16(n);
  cpu::f32_to_bf16(values.data(), bf16.data(), n);
  cpu::f32_to_f16(values.data(), f16.data(), n);
  std::vector<float> from_bf16(n);
  std::vector<float> from_f16(n);
  cpu::bf16_to_f32(bf16.data(), from_bf16.data(), n);
  cpu::f16_to_f32(f16.data(), from_f16.data(), n);
  std::vector<float> f16_scalar(n);
  cpu::half_to_f32(Isa::kScalar, HalfFormat::kF16, f16.data(), f16_scalar.data(), n);
  for (std::size_t i = 0; i < n; ++i) {
    INFO("element " << i);
    REQUIRE(bf16[i] == expected_f32_to_half(HalfFormat::kBF16, values[i]));
    REQUIRE(f16[i] == expected_f32_to_half(HalfFormat::kF16, values[i]));
    REQUIRE(bits_of(from_bf16[i]) == static_cast<std::uint32_t>(bf16[i]) << 16);
    REQUIRE(bits_of(from_f16[i]) == bits_of(f16_scalar[i]));
  }
}

TEST_CASE("convert: lengths 0..100 at unaligned starts write exactly n elements", "[convert]") {
  std::mt19937_64 rng(99);
  const std::vector<float> pool = hard_floats(HalfFormat::kBF16, rng);
  constexpr std::uint16_t kSentinel16 = 0xA5A5u;
  const float sentinel32 = float_of(0x5A5A5A5Au);
  for (HalfFormat format : {HalfFormat::kBF16, HalfFormat::kF16}) {
    for (Isa isa : supported_isas()) {
      for (std::size_t n = 0; n <= 100; ++n) {
        const std::size_t offset = n % 7;  // misaligns both input and output
        INFO(format_name(format) << " " << cpu::isa_name(isa) << " n=" << n);
        std::vector<std::uint16_t> half(offset + n + 8, kSentinel16);
        cpu::f32_to_half(isa, format, pool.data() + offset, half.data() + offset, n);
        for (std::size_t i = 0; i < offset; ++i) REQUIRE(half[i] == kSentinel16);
        for (std::size_t i = 0; i < n; ++i) REQUIRE(half[offset + i] == expected_f32_to_half(format, pool[offset + i]));
        for (std::size_t i = offset + n; i < half.size(); ++i) REQUIRE(half[i] == kSentinel16);

        std::vector<float> wide(offset + n + 8, sentinel32);
        cpu::half_to_f32(isa, format, half.data() + offset, wide.data() + offset, n);
        std::vector<float> scalar(n);
        cpu::half_to_f32(Isa::kScalar, format, half.data() + offset, scalar.data(), n);
        for (std::size_t i = 0; i < offset; ++i) REQUIRE(bits_of(wide[i]) == bits_of(sentinel32));
        for (std::size_t i = 0; i < n; ++i) REQUIRE(bits_of(wide[offset + i]) == bits_of(scalar[i]));
        for (std::size_t i = offset + n; i < wide.size(); ++i) REQUIRE(bits_of(wide[i]) == bits_of(sentinel32));
      }
    }
  }
}

}  // namespace
}  // namespace zinf::kernels
