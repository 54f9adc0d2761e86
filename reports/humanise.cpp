#include "reports/humanise.h"

#include <cmath>

#include <fmt/format.h>

#include "libengine/core/units.h"

namespace zinf::reports {
namespace {

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }
bool ends_with(std::string_view text, std::string_view tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// "×10⁻⁸": superscript digits, so a tiny value reads as a power of ten without e-notation.
std::string power_of_ten(int exponent) {
  static constexpr const char* kDigits[] = {"⁰", "¹", "²", "³", "⁴", "⁵", "⁶", "⁷", "⁸", "⁹"};
  std::string out = exponent < 0 ? "×10⁻" : "×10";
  const std::string digits = fmt::format("{}", std::abs(exponent));
  for (const char d : digits) out.append(kDigits[d - '0']);
  return out;
}

// Three significant digits without e-notation: "0.00123", "12.3", "1234".
std::string sig3(double v) { return std::abs(v) >= 1000 ? fmt::format("{:.0f}", v) : fmt::format("{:.3g}", v); }

std::string duration_ms(double ms) {
  const double a = std::abs(ms);
  if (a == 0) return "0 ms";
  if (a < 1.0) return sig3(ms * 1e3) + " µs";
  if (a < 1000.0) return sig3(ms) + " ms";
  if (a < 120e3) return sig3(ms / 1e3) + " s";
  if (a < 7200e3) return sig3(ms / 60e3) + " min";
  return sig3(ms / 3600e3) + " h";
}

}  // namespace

std::string humane_number(double value) {
  if (!std::isfinite(value)) return "-";
  const double a = std::abs(value);
  if (a >= 1e6) return fmt::format("{}{}", value < 0 ? "-" : "", format_count(a));
  if (a == std::floor(a)) return fmt::format("{:.0f}", value);
  if (a < 1e-3) {
    const int exponent = static_cast<int>(std::floor(std::log10(a)));
    return fmt::format("{:.3g}{}", value / std::pow(10.0, exponent), power_of_ten(exponent));
  }
  if (a >= 1e4) return fmt::format("{:.0f}", value);  // {:.4g} would write 1.457e+04
  return fmt::format("{:.4g}", value);
}

std::string humane(double value, Quantity quantity) {
  if (!std::isfinite(value)) return "-";
  const char* sign = value < 0 ? "-" : "";
  const double a = std::abs(value);
  switch (quantity) {
    case Quantity::kCount:
      return fmt::format("{}{}", sign, a < 1e3 ? humane_number(a) : format_count(a));
    case Quantity::kBytes:
      return fmt::format("{}{}", sign, format_bytes(a));
    case Quantity::kBytesPerSecond:
      return fmt::format("{}{}", sign, format_bandwidth(a));
    case Quantity::kGBps:
      return a != 0 && a < 0.01 ? sig3(value * 1e3) + " MB/s" : sig3(value) + " GB/s";
    case Quantity::kMilliseconds:
      return duration_ms(value);
    case Quantity::kSeconds:
      return duration_ms(value * 1e3);
    case Quantity::kFlops:
      return fmt::format("{}{}", sign, format_flops(a));
    case Quantity::kFraction:
      return sig3(value * 100.0) + "%";
    case Quantity::kPercent:
      return sig3(value) + "%";
    case Quantity::kNone:
      break;
  }
  return humane_number(value);
}

Quantity quantity_of_key(std::string_view key) {
  if (const std::size_t dot = key.rfind('.'); dot != std::string_view::npos) key = key.substr(dot + 1);
  if (ends_with(key, "tokens_per_s") || ends_with(key, "tokens_per_second") || key == "params" ||
      ends_with(key, "_params") || contains(key, "flops_per_step"))
    return Quantity::kCount;
  if (contains(key, "flops")) return Quantity::kFlops;
  if (ends_with(key, "gbps")) return Quantity::kGBps;
  if (ends_with(key, "bandwidth")) return Quantity::kBytesPerSecond;
  if (contains(key, "bytes")) return Quantity::kBytes;
  if (ends_with(key, "_ms") || contains(key, "_ms_") || key == "ms") return Quantity::kMilliseconds;
  if (contains(key, "seconds")) return Quantity::kSeconds;
  if (ends_with(key, "hit_rate") || contains(key, "fraction") || key == "mfu" || ends_with(key, "_mfu") ||
      key == "efficiency")
    return Quantity::kFraction;
  if (ends_with(key, "percent")) return Quantity::kPercent;
  return Quantity::kNone;
}

AxisScale axis_scale(Quantity quantity, double largest) {
  const double a = std::isfinite(largest) ? std::abs(largest) : 0.0;
  const auto ladder = [a](std::initializer_list<AxisScale> steps) {
    AxisScale pick = *steps.begin();
    for (const AxisScale& s : steps) {
      if (a >= s.divisor) pick = s;
    }
    return pick;
  };
  switch (quantity) {
    case Quantity::kBytes:
      return ladder({{1, "B"},
                     {1024.0, "KiB"},
                     {1048576.0, "MiB"},
                     {1073741824.0, "GiB"},
                     {1099511627776.0, "TiB"},
                     {1125899906842624.0, "PiB"}});
    case Quantity::kBytesPerSecond:
      return ladder({{1, "B/s"}, {1e3, "kB/s"}, {1e6, "MB/s"}, {1e9, "GB/s"}, {1e12, "TB/s"}});
    case Quantity::kGBps:
      return a != 0 && a < 0.01 ? AxisScale{1e-3, "MB/s"} : AxisScale{1, "GB/s"};
    case Quantity::kMilliseconds:
    case Quantity::kSeconds: {
      const double ms = quantity == Quantity::kSeconds ? 1e3 : 1.0;  // divisors below are in ms
      const AxisScale pick = a * ms < 1.0 && a != 0 ? AxisScale{1e-3, "µs"}
                             : a * ms < 1e3         ? AxisScale{1, "ms"}
                             : a * ms < 120e3       ? AxisScale{1e3, "s"}
                             : a * ms < 7200e3      ? AxisScale{60e3, "min"}
                                                    : AxisScale{3600e3, "h"};
      return {pick.divisor / ms, pick.unit};
    }
    case Quantity::kFlops:
      return ladder(
          {{1, "FLOP/s"}, {1e3, "KFLOP/s"}, {1e6, "MFLOP/s"}, {1e9, "GFLOP/s"}, {1e12, "TFLOP/s"}, {1e15, "PFLOP/s"}});
    case Quantity::kFraction:
      return {0.01, "%"};
    case Quantity::kPercent:
      return {1, "%"};
    case Quantity::kCount:
    case Quantity::kNone:
      break;
  }
  if (quantity == Quantity::kCount)
    return ladder({{1, ""}, {1e3, "K"}, {1e6, "M"}, {1e9, "B"}, {1e12, "T"}, {1e15, "Q"}});
  return ladder({{1, ""}, {1e6, "M"}, {1e9, "B"}, {1e12, "T"}, {1e15, "Q"}});
}

}  // namespace zinf::reports
