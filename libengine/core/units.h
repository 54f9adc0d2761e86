// Units: the one parser and formatter for every quantity a user types or reads.
//
// Every CLI flag, scenario field and hardware-profile field that holds a size goes through these
// functions, so "1T", "175B", "1.3e12", "80GiB", "1.5TB" and "12GB/s" mean the same thing
// everywhere and bad input gets the same clear error everywhere. `field` is the name the user knows
// the value by ("--params", "hw.node.nvme.capacity") and starts every error message.
//
// Conventions:
//   counts     K=1e3 M=1e6 B=1e9 (billion) T=1e12 — "175B" is 175 billion parameters
//   bytes      B, kB/KB, MB, GB, TB, PB (powers of 1000) and KiB, MiB, GiB, TiB, PiB (powers of 1024)
//   bandwidth  any byte unit followed by "/s" ("12GB/s", "25GiB/s"), or bits: "100Gb/s", "100Gbps",
//              "100Gbit/s" (1 byte = 8 bits); a bare number is bytes per second
//   FLOP/s     "989TFLOPS", "989 TFLOP/s", "989T", or a bare number
// A number is decimal or scientific ("1.3e12"), optionally followed by spaces before the unit.
// Counts and byte sizes must come out whole; nothing may be negative, NaN or infinite. Integer
// literals ("9007199254740993", "18446744073709551615", "16MiB") are computed exactly in 64 bits.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "libengine/core/status.h"

namespace zinf {

enum class ZeroIs { kRejected, kAllowed };

Result<std::uint64_t> parse_count(std::string_view text, std::string_view field, ZeroIs zero = ZeroIs::kRejected);
Result<std::uint64_t> parse_bytes(std::string_view text, std::string_view field, ZeroIs zero = ZeroIs::kRejected);
Result<double> parse_bandwidth(std::string_view text, std::string_view field, ZeroIs zero = ZeroIs::kRejected);
Result<double> parse_flops(std::string_view text, std::string_view field, ZeroIs zero = ZeroIs::kRejected);
// A positive whole number without units, at most `max`.
Result<std::int64_t> parse_positive_int(std::string_view text, std::string_view field, std::int64_t max = INT32_MAX);
// A whole number in [min, max] written in plain decimal digits (leading '-' only when min < 0): no
// hex, octal, exponent, fraction or '+'. "--steps: '0x10' is not a whole number; expected a whole
// number from 1 to 1099511627776". Every flag that sets an integer parses through this (or
// parse_positive_int), never through a library's own integer conversion.
Result<std::int64_t> parse_int_in_range(std::string_view text, std::string_view field, std::int64_t min,
                                        std::int64_t max);

// Human-readable renderings with three significant digits.
std::string format_count(double count);            // 1.00T, 175B, 124M, 950
std::string format_bytes(double bytes);            // 80.0 GiB, 1.36 TiB, 512 B (IEC)
std::string format_bandwidth(double bytes_per_s);  // 12.0 GB/s (SI, as drives and links are sold)
std::string format_flops(double flops_per_s);      // 70.0 TFLOP/s
std::string format_duration(double seconds);       // 850 ms, 12.3 s, 4.5 min, 3.2 h

}  // namespace zinf
