#include "libengine/core/units.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "libengine/core/quote.h"

namespace zinf {
namespace {

struct Unit {
  std::string_view suffix;
  double multiplier;
};

constexpr std::array kCountUnits{Unit{"", 1.0},  Unit{"K", 1e3}, Unit{"k", 1e3},
                                 Unit{"M", 1e6}, Unit{"B", 1e9}, Unit{"T", 1e12}};
constexpr std::string_view kCountAllowed = "a count like 1000, 7M, 175B, 1T or 1.3e12 (K, M, B=billion, T; any case)";

constexpr std::array kByteUnits{Unit{"", 1.0},
                                Unit{"B", 1.0},
                                Unit{"kB", 1e3},
                                Unit{"KB", 1e3},
                                Unit{"MB", 1e6},
                                Unit{"GB", 1e9},
                                Unit{"TB", 1e12},
                                Unit{"PB", 1e15},
                                Unit{"KiB", 1024.0},
                                Unit{"MiB", 1048576.0},
                                Unit{"GiB", 1073741824.0},
                                Unit{"TiB", 1099511627776.0},
                                Unit{"PiB", 1125899906842624.0}};
constexpr std::string_view kBytesAllowed =
    "a size like 512MiB, 80GiB or 1.5TB (B, kB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB; the prefix in any case, "
    "the B upper case: a lower-case b means bits)";

constexpr std::array kBitUnits{Unit{"b", 1.0},  Unit{"Kb", 1e3}, Unit{"kb", 1e3},
                               Unit{"Mb", 1e6}, Unit{"Gb", 1e9}, Unit{"Tb", 1e12}};
constexpr std::string_view kBandwidthAllowed =
    "a bandwidth like 12GB/s, 25GiB/s or 100Gb/s (a byte unit or b, Kb, Mb, Gb, Tb followed by /s; "
    "or Gbps, Gbit/s)";

constexpr std::array kFlopPrefixes{Unit{"", 1.0},  Unit{"K", 1e3},  Unit{"M", 1e6},
                                   Unit{"G", 1e9}, Unit{"T", 1e12}, Unit{"P", 1e15}};
constexpr std::string_view kFlopsAllowed = "a throughput like 989TFLOPS, 70 TFLOP/s, 312T or 1.2e15";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

Status bad(std::string_view field, std::string_view text, std::string_view why, std::string_view allowed) {
  return Status::invalid_argument(fmt::format("{}: {} {}; expected {}", field, zinf::quoted(text), why, allowed));
}

// Splits "1.5 TB" into 1.5 and "TB". The number must start with a digit or '.', so "inf", "nan",
// "-3" and "+3" are refused here rather than half-accepted by from_chars.
struct NumberAndUnit {
  double number = 0.0;
  std::string_view unit;
};

Result<NumberAndUnit> split_number(std::string_view original, std::string_view field, std::string_view allowed) {
  const std::string_view text = trim(original);
  if (text.empty()) return bad(field, original, "is empty", allowed);
  if (text.front() == '-') return bad(field, original, "is negative", allowed);
  const char first = text.front();
  if (!((first >= '0' && first <= '9') || first == '.')) return bad(field, original, "is not a number", allowed);
  NumberAndUnit out;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out.number);
  if (ec == std::errc::result_out_of_range) return bad(field, original, "is out of range", allowed);
  if (ec != std::errc()) return bad(field, original, "is not a number", allowed);
  out.unit = trim(std::string_view(end, static_cast<std::size_t>(text.data() + text.size() - end)));
  return out;
}

template <std::size_t N>
const Unit* find_unit(const std::array<Unit, N>& units, std::string_view suffix) {
  for (const Unit& unit : units) {
    if (unit.suffix == suffix) return &unit;
  }
  return nullptr;
}

// Count suffixes are single letters with one meaning each, so "7b" and "1t" read as "7B" and "1T".
std::string canonical_count_unit(std::string_view unit) {
  std::string out(unit);
  if (out.size() == 1) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

// Byte units: the prefix letter may be any case ("64mib", "80gB", "1.5tB") and the binary "iB" any
// case ("64MIB"), since neither is ambiguous. A decimal unit's final B stays upper case: "Gb" is
// gigabits in every bandwidth field, so "80gb" is refused rather than read as 80 GB.
std::string canonical_byte_unit(std::string_view unit) {
  std::string out(unit);
  const auto upper = [](char c) { return static_cast<char>(std::toupper(static_cast<unsigned char>(c))); };
  if (out.size() == 3 && (out[1] == 'i' || out[1] == 'I') && (out[2] == 'b' || out[2] == 'B')) {
    out = {upper(out[0]), 'i', 'B'};
  } else if (out.size() == 2 && out[1] == 'B' && out[0] != 'k') {
    out[0] = upper(out[0]);
  }
  return out;
}

Result<double> checked_product(double number, double multiplier, std::string_view field, std::string_view text,
                               ZeroIs zero, std::string_view allowed) {
  const double value = number * multiplier;
  if (!std::isfinite(value)) return bad(field, text, "is too large", allowed);
  if (value == 0.0 && zero == ZeroIs::kRejected) return bad(field, text, "is zero", allowed);
  return value;
}

// Counts and byte sizes are whole numbers that must fit in 64 bits.
Result<std::uint64_t> to_whole(double value, std::string_view field, std::string_view text, std::string_view allowed) {
  // 2^64 is exactly representable; anything at or above it cannot be stored.
  if (value >= 18446744073709551616.0) return bad(field, text, "is too large (over 2^64 - 1)", allowed);
  const double rounded = std::nearbyint(value);
  // Decimal fractions such as 1.1T are not exact in binary; accept a relative error far below one
  // unit. A positive value that rounds to zero (1e-300) is a fraction, never a whole zero.
  if (std::fabs(value - rounded) > 1e-9 * std::max(1.0, value) || (rounded == 0.0 && value != 0.0)) {
    return bad(field, text, "is not a whole number", allowed);
  }
  return static_cast<std::uint64_t>(rounded);
}

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The leading run of digits of `text` (after trimming) when the whole number part is an integer
// literal ("9007199254740993", "16MiB"): such values are computed exactly in 64 bits instead of
// through a double, which holds integers exactly only up to 2^53.
std::optional<std::string_view> integer_literal(std::string_view original) {
  const std::string_view text = trim(original);
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return std::nullopt;
  if (digits < text.size() && (text[digits] == '.' || text[digits] == 'e' || text[digits] == 'E')) return std::nullopt;
  return text.substr(0, digits);
}

// n x multiplier exactly, for an integer literal and a whole multiplier. nullopt: not that case.
template <std::size_t N>
std::optional<Result<std::uint64_t>> exact_whole(std::string_view text, const NumberAndUnit& parts,
                                                 const std::array<Unit, N>& units, std::string_view field, ZeroIs zero,
                                                 std::string_view allowed) {
  const std::optional<std::string_view> literal = integer_literal(text);
  const Unit* unit = find_unit(units, parts.unit);
  if (!literal || unit == nullptr || unit->multiplier != std::floor(unit->multiplier)) return std::nullopt;
  std::uint64_t number = 0;
  const auto [end, ec] = std::from_chars(literal->data(), literal->data() + literal->size(), number);
  std::uint64_t value = 0;
  if (ec == std::errc::result_out_of_range ||
      __builtin_mul_overflow(number, static_cast<std::uint64_t>(unit->multiplier), &value)) {
    return Result<std::uint64_t>(bad(field, text, "is too large (over 2^64 - 1)", allowed));
  }
  if (ec != std::errc() || end != literal->data() + literal->size()) return std::nullopt;
  if (value == 0 && zero == ZeroIs::kRejected) return Result<std::uint64_t>(bad(field, text, "is zero", allowed));
  return Result<std::uint64_t>(value);
}

std::string three_digits(double value, std::string_view unit, std::string_view space = "") {
  if (value == 0.0) return fmt::format("0{}{}", space, unit);
  const double magnitude = std::fabs(value);
  if (magnitude >= 100.0) return fmt::format("{:.0f}{}{}", value, space, unit);
  if (magnitude >= 10.0) return fmt::format("{:.1f}{}{}", value, space, unit);
  return fmt::format("{:.2f}{}{}", value, space, unit);
}

template <std::size_t N>
std::string scaled(double value, const std::array<Unit, N>& ladder, std::string_view space) {
  const Unit* best = &ladder[0];
  for (const Unit& unit : ladder) {
    // 999.5 would print as "1000"; move to the next unit slightly early so three digits hold.
    if (std::fabs(value) >= unit.multiplier * 0.9995) best = &unit;
  }
  return three_digits(value / best->multiplier, best->suffix, space);
}

}  // namespace

Result<std::uint64_t> parse_count(std::string_view text, std::string_view field, ZeroIs zero) {
  ZINF_ASSIGN_OR_RETURN(NumberAndUnit parts, split_number(text, field, kCountAllowed));
  const std::string canonical = canonical_count_unit(parts.unit);
  const std::string_view typed = parts.unit;
  parts.unit = canonical;
  const Unit* unit = find_unit(kCountUnits, parts.unit);
  if (unit == nullptr)
    return bad(field, text, fmt::format("has an unknown suffix {}", zinf::quoted(typed)), kCountAllowed);
  if (auto exact = exact_whole(text, parts, kCountUnits, field, zero, kCountAllowed)) return *std::move(exact);
  ZINF_ASSIGN_OR_RETURN(const double value,
                        checked_product(parts.number, unit->multiplier, field, text, zero, kCountAllowed));
  return to_whole(value, field, text, kCountAllowed);
}

Result<std::uint64_t> parse_bytes(std::string_view text, std::string_view field, ZeroIs zero) {
  ZINF_ASSIGN_OR_RETURN(NumberAndUnit parts, split_number(text, field, kBytesAllowed));
  const std::string canonical = canonical_byte_unit(parts.unit);
  const std::string_view typed = parts.unit;
  parts.unit = canonical;
  const Unit* unit = find_unit(kByteUnits, parts.unit);
  if (unit == nullptr)
    return bad(field, text, fmt::format("has an unknown unit {}", zinf::quoted(typed)), kBytesAllowed);
  if (auto exact = exact_whole(text, parts, kByteUnits, field, zero, kBytesAllowed)) return *std::move(exact);
  ZINF_ASSIGN_OR_RETURN(const double value,
                        checked_product(parts.number, unit->multiplier, field, text, zero, kBytesAllowed));
  return to_whole(value, field, text, kBytesAllowed);
}

Result<double> parse_bandwidth(std::string_view text, std::string_view field, ZeroIs zero) {
  ZINF_ASSIGN_OR_RETURN(const NumberAndUnit parts, split_number(text, field, kBandwidthAllowed));
  std::string_view unit = parts.unit;
  double multiplier = 0.0;
  if (unit.empty()) {
    multiplier = 1.0;
  } else if (ends_with(unit, "bps")) {  // 100Gbps: bits
    if (const Unit* bits = find_unit(kBitUnits, unit.substr(0, unit.size() - 2))) multiplier = bits->multiplier / 8.0;
  } else if (ends_with(unit, "bit/s")) {  // 100Gbit/s
    const std::string prefix_and_b = std::string(unit.substr(0, unit.size() - 5)) + "b";
    if (const Unit* bits = find_unit(kBitUnits, prefix_and_b)) multiplier = bits->multiplier / 8.0;
  } else if (ends_with(unit, "/s")) {
    const std::string_view per = unit.substr(0, unit.size() - 2);
    if (const Unit* bytes = find_unit(kByteUnits, per); bytes != nullptr && !per.empty()) {
      multiplier = bytes->multiplier;
    } else if (const Unit* bits = find_unit(kBitUnits, per)) {
      multiplier = bits->multiplier / 8.0;
    }
  }
  if (multiplier == 0.0) {
    const bool missing_rate = find_unit(kByteUnits, unit) != nullptr || find_unit(kBitUnits, unit) != nullptr;
    return bad(field, text,
               missing_rate ? fmt::format("has a size unit {} without '/s'", zinf::quoted(unit))
                            : fmt::format("has an unknown unit {}", zinf::quoted(unit)),
               kBandwidthAllowed);
  }
  return checked_product(parts.number, multiplier, field, text, zero, kBandwidthAllowed);
}

Result<double> parse_flops(std::string_view text, std::string_view field, ZeroIs zero) {
  ZINF_ASSIGN_OR_RETURN(const NumberAndUnit parts, split_number(text, field, kFlopsAllowed));
  std::string_view unit = parts.unit;
  for (std::string_view tail : {"FLOP/s", "FLOPS", "flop/s", "flops"}) {
    if (ends_with(unit, tail)) {
      unit.remove_suffix(tail.size());
      break;
    }
  }
  const Unit* prefix = find_unit(kFlopPrefixes, unit);
  if (prefix == nullptr)
    return bad(field, text, fmt::format("has an unknown unit {}", zinf::quoted(parts.unit)), kFlopsAllowed);
  return checked_product(parts.number, prefix->multiplier, field, text, zero, kFlopsAllowed);
}

Result<std::int64_t> parse_positive_int(std::string_view original, std::string_view field, std::int64_t max) {
  return parse_int_in_range(original, field, 1, max);
}

Result<std::int64_t> parse_int_in_range(std::string_view original, std::string_view field, std::int64_t min,
                                        std::int64_t max) {
  const std::string allowed = fmt::format("a whole number from {} to {}", min, max);
  const std::string_view text = trim(original);
  if (text.empty()) return bad(field, original, "is empty", allowed);
  if (text.front() == '-' && min >= 0) return bad(field, original, "is negative", allowed);
  const std::string_view digits = text.front() == '-' ? text.substr(1) : text;
  // Decimal digits only: no sign, hex (0x10), octal, exponent or fraction.
  if (!all_digits(digits)) return bad(field, original, "is not a whole number", allowed);
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range)
    return bad(field, original, text.front() == '-' ? "is too small" : "is too large", allowed);
  if (ec != std::errc() || end != text.data() + text.size())
    return bad(field, original, "is not a whole number", allowed);
  if (value == 0 && min > 0) return bad(field, original, "is zero", allowed);
  if (value > max) return bad(field, original, "is too large", allowed);
  if (value < min) return bad(field, original, "is too small", allowed);
  return value;
}

std::string format_count(double count) {
  static constexpr std::array kLadder{Unit{"", 1.0},  Unit{"K", 1e3},  Unit{"M", 1e6},
                                      Unit{"B", 1e9}, Unit{"T", 1e12}, Unit{"Q", 1e15}};
  return scaled(count, kLadder, "");
}

std::string format_bytes(double bytes) {
  static constexpr std::array kLadder{Unit{"B", 1.0},
                                      Unit{"KiB", 1024.0},
                                      Unit{"MiB", 1048576.0},
                                      Unit{"GiB", 1073741824.0},
                                      Unit{"TiB", 1099511627776.0},
                                      Unit{"PiB", 1125899906842624.0},
                                      Unit{"EiB", 1152921504606846976.0}};
  return scaled(bytes, kLadder, " ");
}

std::string format_bandwidth(double bytes_per_s) {
  static constexpr std::array kLadder{Unit{"B/s", 1.0},  Unit{"kB/s", 1e3},  Unit{"MB/s", 1e6},
                                      Unit{"GB/s", 1e9}, Unit{"TB/s", 1e12}, Unit{"PB/s", 1e15}};
  return scaled(bytes_per_s, kLadder, " ");
}

std::string format_flops(double flops_per_s) {
  static constexpr std::array kLadder{Unit{"FLOP/s", 1.0},  Unit{"kFLOP/s", 1e3},  Unit{"MFLOP/s", 1e6},
                                      Unit{"GFLOP/s", 1e9}, Unit{"TFLOP/s", 1e12}, Unit{"PFLOP/s", 1e15},
                                      Unit{"EFLOP/s", 1e18}};
  return scaled(flops_per_s, kLadder, " ");
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds)) return "inf";
  if (seconds < 1e-3) return three_digits(seconds * 1e6, "us", " ");
  if (seconds < 1.0) return three_digits(seconds * 1e3, "ms", " ");
  if (seconds < 120.0) return three_digits(seconds, "s", " ");
  if (seconds < 7200.0) return three_digits(seconds / 60.0, "min", " ");
  if (seconds < 3.0 * 86400.0) return three_digits(seconds / 3600.0, "h", " ");
  return three_digits(seconds / 86400.0, "days", " ");
}

}  // namespace zinf
