// Numbers as people read them in a report: every figure with its unit, scaled to its size — bytes in
// B/KiB/MiB/GiB/TiB (binary), durations in µs/ms/s/min/h, fractions as %, counts as K/M/B/T — and
// never in e-notation ("2.608e+04 GiB", "2e+06 ms" and "mfu 0.02508" are what this replaces). Charts
// use the axis half (axis_scale): one divisor and unit for a whole axis, so the ticks stay round
// numbers of the unit the axis reads in. Pure functions; nothing here reads a record.
#pragma once

#include <string>
#include <string_view>

namespace zinf::reports {

// What a number measures, which decides how it is written.
enum class Quantity {
  kNone,            // a plain number ("3.5", "1200", "1.5M" when large)
  kCount,           // things: 1.5K, 175B, 1.00T
  kBytes,           // bytes, scaled in powers of 1024
  kBytesPerSecond,  // bytes per second, SI GB/s as links are sold
  kGBps,            // a value already in GB/s (1e9 B/s)
  kMilliseconds,    // a duration in ms, written in µs/ms/s/min/h
  kSeconds,         // a duration in s, written the same way
  kFlops,           // FLOP/s
  kFraction,        // 0..1, written as %
  kPercent,         // already in %, written with "%"
};

// `value` written with its unit ("52.8 MiB", "369 ms", "21.7%", "6.77 GFLOP/s", "1.0×10⁻⁸"); "-"
// for non-finite values. Never e-notation.
std::string humane(double value, Quantity quantity);

// A plain number without e-notation: integers below a million in full, larger values with K/M/B/T,
// tiny ones as "a×10⁻ⁿ", others to 4 significant digits.
std::string humane_number(double value);

// What a record field measures, from its name (the last dotted segment): "*tokens_per_s*", "params",
// "*flops_per_step" counts; "*flops*" FLOP/s; "*gbps" GB/s; "*bandwidth" bytes per second; "*bytes*"
// bytes; "*_ms" milliseconds; "*seconds*" seconds; "*hit_rate", "*fraction*", "mfu", "efficiency"
// fractions; "*percent" percent; kNone otherwise.
Quantity quantity_of_key(std::string_view key);

// One scale for a chart axis whose values reach `largest` (absolute): divide every value by
// `divisor` and the axis reads in `unit` ("GiB", "ms", "%", "M", ""). kNone and kCount pick K/M/B/T
// for large values.
struct AxisScale {
  double divisor = 1;
  std::string unit;
};
AxisScale axis_scale(Quantity quantity, double largest);

}  // namespace zinf::reports
