// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) for swapped extents, and the checksum kind
// names. Two implementations, chosen once at run time:
//   sse4.2  the crc32 instruction over three interleaved streams; the instruction has a latency of
//           three cycles and a throughput of one, so three independent streams keep it busy. The
//           streams' CRCs are joined with precomputed "append N zero bytes" tables (the GF(2)
//           operator zlib's crc32_combine uses), which needs no pclmul.
//   table   slicing-by-8, for CPUs without SSE4.2 (and as the reference the tests hold the fast
//           path to).
// All tables are built at compile time; nothing here is mutable.
#include "libengine/io/checksum.h"

#include <array>
#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "libengine/io/checksum_internal.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace zinf::io {
namespace {

constexpr std::uint32_t kPolynomial = 0x82F63B78u;  // Castagnoli, bit-reflected

// ---- Slicing-by-8 tables ---------------------------------------------------------------------

using ByteTables = std::array<std::array<std::uint32_t, 256>, 8>;

constexpr ByteTables make_byte_tables() {
  ByteTables tables{};
  for (std::uint32_t n = 0; n < 256; ++n) {
    std::uint32_t crc = n;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) != 0 ? kPolynomial : 0u);
    tables[0][n] = crc;
  }
  // tables[k][n]: the CRC contribution of byte n followed by k zero bytes.
  for (std::size_t k = 1; k < tables.size(); ++k) {
    for (std::size_t n = 0; n < 256; ++n) {
      const std::uint32_t prev = tables[k - 1][n];
      tables[k][n] = (prev >> 8) ^ tables[0][prev & 0xffu];
    }
  }
  return tables;
}

constexpr ByteTables kByteTables = make_byte_tables();

std::uint64_t load_u64(const unsigned char* p) {
  std::uint64_t word;
  std::memcpy(&word, p, sizeof(word));
  return word;
}

// ---- Zero-append operators, to join interleaved streams ---------------------------------------
//
// The CRC register is linear over GF(2): appending `n` bytes B to a message whose register is `s`
// gives shift_n(s) ^ crc_raw(B), where shift_n is "append n zero bytes" and crc_raw(B) is B's
// register started from 0. shift_n is a 32x32 bit matrix; applying it through four byte-indexed
// tables costs four lookups.

using Gf2Matrix = std::array<std::uint32_t, 32>;  // column i = image of bit i

constexpr std::uint32_t gf2_times(const Gf2Matrix& matrix, std::uint32_t vector) {
  std::uint32_t sum = 0;
  for (int i = 0; vector != 0; ++i, vector >>= 1) {
    if ((vector & 1u) != 0) sum ^= matrix[static_cast<std::size_t>(i)];
  }
  return sum;
}

constexpr Gf2Matrix gf2_product(const Gf2Matrix& a, const Gf2Matrix& b) {
  Gf2Matrix result{};
  for (std::size_t i = 0; i < 32; ++i) result[i] = gf2_times(a, b[i]);
  return result;
}

// The operator that appends `length_bytes` zero bytes to the CRC register.
constexpr Gf2Matrix zeros_operator(std::size_t length_bytes) {
  Gf2Matrix one_bit{};  // one zero bit: crc = (crc >> 1) ^ (crc & 1 ? poly : 0)
  one_bit[0] = kPolynomial;
  for (std::size_t i = 1; i < 32; ++i) one_bit[i] = 1u << (i - 1);
  Gf2Matrix one_byte = one_bit;
  for (int i = 0; i < 3; ++i) one_byte = gf2_product(one_byte, one_byte);  // 2, 4, 8 bits

  Gf2Matrix result{};  // identity
  for (std::size_t i = 0; i < 32; ++i) result[i] = 1u << i;
  Gf2Matrix power = one_byte;
  for (std::size_t n = length_bytes; n != 0; n >>= 1) {
    if ((n & 1u) != 0) result = gf2_product(power, result);
    power = gf2_product(power, power);
  }
  return result;
}

using ShiftTables = std::array<std::array<std::uint32_t, 256>, 4>;

constexpr ShiftTables make_shift_tables(std::size_t length_bytes) {
  const Gf2Matrix op = zeros_operator(length_bytes);
  ShiftTables tables{};
  for (std::size_t k = 0; k < 4; ++k) {
    for (std::uint32_t n = 0; n < 256; ++n) tables[k][n] = gf2_times(op, n << (8 * k));
  }
  return tables;
}

[[maybe_unused]] std::uint32_t shift(const ShiftTables& tables, std::uint32_t crc) {
  return tables[0][crc & 0xffu] ^ tables[1][(crc >> 8) & 0xffu] ^ tables[2][(crc >> 16) & 0xffu] ^ tables[3][crc >> 24];
}

// Stream lengths for the interleaved loops: long blocks amortise the join (4+4 lookups per 24 KiB);
// short blocks keep medium buffers (from 768 bytes) on three streams too.
constexpr std::size_t kLongBlockBytes = 8192;
constexpr std::size_t kShortBlockBytes = 256;
[[maybe_unused]] constexpr ShiftTables kLongShift = make_shift_tables(kLongBlockBytes);
[[maybe_unused]] constexpr ShiftTables kShortShift = make_shift_tables(kShortBlockBytes);

#if defined(__x86_64__)
// Three streams of `block_bytes` each from `p`; returns the register after all 3 * block_bytes.
__attribute__((target("sse4.2"))) std::uint64_t crc_three_streams(std::uint64_t crc0, const unsigned char* p,
                                                                  std::size_t block_bytes,
                                                                  const ShiftTables& shift_tables) {
  std::uint64_t crc1 = 0;
  std::uint64_t crc2 = 0;
  const unsigned char* const end = p + block_bytes;
  for (; p < end; p += 8) {
    crc0 = _mm_crc32_u64(crc0, load_u64(p));
    crc1 = _mm_crc32_u64(crc1, load_u64(p + block_bytes));
    crc2 = _mm_crc32_u64(crc2, load_u64(p + 2 * block_bytes));
  }
  crc0 = shift(shift_tables, static_cast<std::uint32_t>(crc0)) ^ crc1;
  crc0 = shift(shift_tables, static_cast<std::uint32_t>(crc0)) ^ crc2;
  return crc0;
}
#endif

using Crc32cFunction = std::uint32_t (*)(std::span<const std::byte>, std::uint32_t);

Crc32cFunction dispatched_crc32c() {
  static const Crc32cFunction function =
      detail::crc32c_sse42_supported() ? &detail::crc32c_sse42 : &detail::crc32c_table;
  return function;
}

}  // namespace

namespace detail {

std::uint32_t crc32c_table(std::span<const std::byte> data, std::uint32_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t length = data.size();
  std::uint32_t reg = ~crc;
  const auto byte_step = [&reg](unsigned char byte) { reg = kByteTables[0][(reg ^ byte) & 0xffu] ^ (reg >> 8); };

  if constexpr (std::endian::native == std::endian::little) {
    // Word loads are aligned so the eight lookups per word are the only cost.
    while (length > 0 && reinterpret_cast<std::uintptr_t>(p) % 8 != 0) {
      byte_step(*p++);
      --length;
    }
    for (; length >= 8; p += 8, length -= 8) {
      const std::uint64_t word = load_u64(p) ^ reg;
      reg = kByteTables[7][word & 0xffu] ^ kByteTables[6][(word >> 8) & 0xffu] ^ kByteTables[5][(word >> 16) & 0xffu] ^
            kByteTables[4][(word >> 24) & 0xffu] ^ kByteTables[3][(word >> 32) & 0xffu] ^
            kByteTables[2][(word >> 40) & 0xffu] ^ kByteTables[1][(word >> 48) & 0xffu] ^ kByteTables[0][word >> 56];
    }
  }
  for (; length > 0; --length) byte_step(*p++);
  return ~reg;
}

bool crc32c_sse42_supported() {
#if defined(__x86_64__)
  static const bool supported = [] {
    __builtin_cpu_init();  // needed when called before static constructors have run
    return __builtin_cpu_supports("sse4.2") != 0;
  }();
  return supported;
#else
  return false;
#endif
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42(std::span<const std::byte> data, std::uint32_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t length = data.size();
  std::uint64_t reg = ~crc;

  // Aligned 8-byte loads never straddle a cache line.
  while (length > 0 && reinterpret_cast<std::uintptr_t>(p) % 8 != 0) {
    reg = _mm_crc32_u8(static_cast<std::uint32_t>(reg), *p++);
    --length;
  }
  for (; length >= 3 * kLongBlockBytes; p += 3 * kLongBlockBytes, length -= 3 * kLongBlockBytes) {
    reg = crc_three_streams(reg, p, kLongBlockBytes, kLongShift);
  }
  for (; length >= 3 * kShortBlockBytes; p += 3 * kShortBlockBytes, length -= 3 * kShortBlockBytes) {
    reg = crc_three_streams(reg, p, kShortBlockBytes, kShortShift);
  }
  for (; length >= 8; p += 8, length -= 8) reg = _mm_crc32_u64(reg, load_u64(p));
  for (; length > 0; --length) reg = _mm_crc32_u8(static_cast<std::uint32_t>(reg), *p++);
  return ~static_cast<std::uint32_t>(reg);
}
#else
std::uint32_t crc32c_sse42(std::span<const std::byte> data, std::uint32_t crc) { return crc32c_table(data, crc); }
#endif

}  // namespace detail

Result<ChecksumKind> checksum_kind_from_name(std::string_view name, std::string_view field) {
  if (name == "none") return ChecksumKind::kNone;
  if (name == "crc32c") return ChecksumKind::kCrc32c;
  return Status::invalid_argument(fmt::format("{}: '{}' is not one of none, crc32c", field, name));
}

std::string_view checksum_kind_name(ChecksumKind kind) {
  switch (kind) {
    case ChecksumKind::kNone:
      return "none";
    case ChecksumKind::kCrc32c:
      return "crc32c";
  }
  return "unknown";
}

std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc) { return dispatched_crc32c()(data, crc); }

std::string_view crc32c_implementation() { return dispatched_crc32c() == &detail::crc32c_sse42 ? "sse4.2" : "table"; }

}  // namespace zinf::io
