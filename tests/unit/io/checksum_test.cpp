// CRC-32C: known answers (RFC 3720 B.4 and the standard check value), chaining, and the SSE4.2 path
// held to the table path on every length around its block boundaries and at unaligned offsets.
#include "libengine/io/checksum.h"

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "libengine/io/checksum_internal.h"
#include "tests/catch.h"

namespace zinf::io {
namespace {

std::span<const std::byte> as_bytes(std::string_view text) { return std::as_bytes(std::span(text)); }

std::vector<std::byte> filled(std::size_t count, unsigned value) {
  return std::vector<std::byte>(count, static_cast<std::byte>(value));
}

std::vector<std::byte> random_bytes(std::size_t count, std::mt19937_64& rng) {
  std::vector<std::byte> bytes(count);
  for (auto& b : bytes) b = static_cast<std::byte>(rng() & 0xffu);
  return bytes;
}

// Every implementation this CPU can run, by name.
std::vector<std::pair<std::string, std::uint32_t (*)(std::span<const std::byte>, std::uint32_t)>> implementations() {
  std::vector<std::pair<std::string, std::uint32_t (*)(std::span<const std::byte>, std::uint32_t)>> result;
  result.emplace_back("table", &detail::crc32c_table);
  if (detail::crc32c_sse42_supported()) result.emplace_back("sse4.2", &detail::crc32c_sse42);
  result.emplace_back("dispatched", [](std::span<const std::byte> d, std::uint32_t c) { return crc32c(d, c); });
  return result;
}

TEST_CASE("crc32c: known answers", "[checksum]") {
  std::vector<std::byte> incrementing(32);
  for (std::size_t i = 0; i < incrementing.size(); ++i) incrementing[i] = static_cast<std::byte>(i);
  std::vector<std::byte> decrementing(32);
  for (std::size_t i = 0; i < decrementing.size(); ++i) decrementing[i] = static_cast<std::byte>(31 - i);

  for (const auto& [name, fn] : implementations()) {
    INFO(name);
    CHECK(fn(as_bytes("123456789"), 0) == 0xE3069283u);
    CHECK(fn({}, 0) == 0u);
    CHECK(fn(filled(32, 0x00), 0) == 0x8A9136AAu);
    CHECK(fn(filled(32, 0xFF), 0) == 0x62A8AB43u);
    CHECK(fn(incrementing, 0) == 0x46DD794Eu);
    CHECK(fn(decrementing, 0) == 0x113FDB5Cu);
  }
}

TEST_CASE("crc32c: the dispatched implementation is the fast one where the CPU has it", "[checksum]") {
  const std::string_view expected = detail::crc32c_sse42_supported() ? "sse4.2" : "table";
  CHECK(crc32c_implementation() == expected);
}

TEST_CASE("crc32c: sse4.2 and table agree on every length and offset", "[checksum]") {
  if (!detail::crc32c_sse42_supported()) {
    WARN("skipped: this CPU has no SSE4.2");
    return;
  }
  std::mt19937_64 rng(20240611);
  // Lengths 0..2000 cross the 8-byte tail loop and the short (3 x 256) interleaved block; the
  // offsets 0..15 cover every misalignment of the start.
  const std::vector<std::byte> pool = random_bytes(2100, rng);
  for (std::size_t length = 0; length <= 2000; ++length) {
    const std::size_t offset = length % 16;
    const auto slice = std::span(pool).subspan(offset, length);
    const std::uint32_t seed = static_cast<std::uint32_t>(rng());
    INFO("length " << length << " offset " << offset);
    REQUIRE(detail::crc32c_sse42(slice, 0) == detail::crc32c_table(slice, 0));
    REQUIRE(detail::crc32c_sse42(slice, seed) == detail::crc32c_table(slice, seed));
  }
  // Random large buffers reach the long (3 x 8 KiB) interleaved block and mix all three loops.
  const std::vector<std::byte> big = random_bytes(300'000, rng);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t offset = rng() % 64;
    const std::size_t length = rng() % (big.size() - offset);
    const auto slice = std::span(big).subspan(offset, length);
    INFO("length " << length << " offset " << offset);
    REQUIRE(detail::crc32c_sse42(slice, 0) == detail::crc32c_table(slice, 0));
  }
  // Exactly on the block boundaries.
  for (const std::size_t length : {767u, 768u, 769u, 24575u, 24576u, 24577u, 49152u, 49152u + 768u}) {
    const auto slice = std::span(big).subspan(8, length);
    INFO("length " << length);
    REQUIRE(detail::crc32c_sse42(slice, 0) == detail::crc32c_table(slice, 0));
  }
}

TEST_CASE("crc32c: random buffers of lengths 0..300 agree at random unaligned offsets", "[checksum]") {
  std::mt19937_64 rng(7);
  const std::vector<std::byte> pool = random_bytes(400, rng);
  for (std::size_t length = 0; length <= 300; ++length) {
    for (int trial = 0; trial < 4; ++trial) {
      const std::size_t offset = rng() % (pool.size() - length + 1);
      const auto slice = std::span(pool).subspan(offset, length);
      const std::uint32_t reference = detail::crc32c_table(slice, 0);
      for (const auto& [name, fn] : implementations()) {
        INFO(name << " length " << length << " offset " << offset);
        REQUIRE(fn(slice, 0) == reference);
      }
    }
  }
}

TEST_CASE("crc32c: chaining equals one pass over the concatenation", "[checksum]") {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 300; ++trial) {
    const std::vector<std::byte> whole = random_bytes(rng() % 60'000, rng);
    const std::size_t split_at = whole.empty() ? 0 : rng() % (whole.size() + 1);
    const auto a = std::span(whole).first(split_at);
    const auto b = std::span(whole).subspan(split_at);
    for (const auto& [name, fn] : implementations()) {
      INFO(name << " size " << whole.size() << " split " << split_at);
      REQUIRE(fn(b, fn(a, 0)) == fn(whole, 0));
    }
  }
  CHECK(crc32c(as_bytes("6789"), crc32c(as_bytes("12345"))) == 0xE3069283u);
}

TEST_CASE("crc32c: a single flipped bit changes the checksum", "[checksum]") {
  std::mt19937_64 rng(5);
  std::vector<std::byte> data = random_bytes(4096, rng);
  const std::uint32_t before = crc32c(data);
  data[1234] ^= std::byte{0x10};
  CHECK(crc32c(data) != before);
}

TEST_CASE("checksum kinds: names round-trip and bad names are refused", "[checksum]") {
  CHECK(checksum_kind_from_name("none", "--checksum").value() == ChecksumKind::kNone);
  CHECK(checksum_kind_from_name("crc32c", "--checksum").value() == ChecksumKind::kCrc32c);
  CHECK(checksum_kind_name(ChecksumKind::kNone) == "none");
  CHECK(checksum_kind_name(ChecksumKind::kCrc32c) == "crc32c");

  const auto bad = checksum_kind_from_name("md5", "--checksum");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == ErrorCode::kInvalidArgument);
  CHECK(bad.status().message() == "--checksum: 'md5' is not one of none, crc32c");
  CHECK_FALSE(checksum_kind_from_name("CRC32C", "--checksum").is_ok());
  CHECK_FALSE(checksum_kind_from_name("", "--checksum").is_ok());
}

}  // namespace
}  // namespace zinf::io
