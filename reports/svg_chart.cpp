#include "reports/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace zinf::reports {
namespace {

constexpr double kWidth = 720;
constexpr double kHeight = 320;
constexpr double kLeft = 72;  // room for y tick labels
constexpr double kRight = 700;
constexpr double kTop = 44;  // room for the legend
constexpr double kBottom = 262;
// Colour-blind-safe palette (Okabe-Ito), cycled when a chart has more series.
constexpr const char* kPalette[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                    "#CC79A7", "#56B4E9", "#F0E442", "#000000"};

const char* color(std::size_t i) { return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))]; }

struct Axis {
  double low = 0;
  double high = 1;
  bool log = false;
  std::vector<double> ticks;  // in data units

  // Position of `value` in [0, 1] along the axis.
  double fraction(double value) const {
    const double v = log ? std::log10(value) : value;
    const double lo = log ? std::log10(low) : low;
    const double hi = log ? std::log10(high) : high;
    return hi > lo ? (v - lo) / (hi - lo) : 0.5;
  }
};

bool usable(double value, bool log) { return std::isfinite(value) && (!log || value > 0); }

Axis make_axis(double low, double high, bool log, bool include_zero) {
  Axis axis;
  axis.log = log;
  if (log) {
    const double lo = std::floor(std::log10(low));
    double hi = std::ceil(std::log10(high));
    if (hi <= lo) hi = lo + 1;
    const double step = std::max(1.0, std::ceil((hi - lo) / 8));
    for (double e = lo; e <= hi + 1e-9; e += step) axis.ticks.push_back(std::pow(10.0, e));
    axis.low = std::pow(10.0, lo);
    axis.high = axis.ticks.back();
    return axis;
  }
  if (include_zero) {
    low = std::min(low, 0.0);
    high = std::max(high, 0.0);
  }
  axis.ticks = nice_ticks(low, high, 5);
  axis.low = axis.ticks.front();
  axis.high = axis.ticks.back();
  return axis;
}

void text(std::ostream& out, double x, double y, std::string_view anchor, std::string_view content,
          std::string_view extra = "") {
  out << fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="{}"{}>{}</text>)", x, y, anchor, extra,
                     xml_escape(content))
      << '\n';
}

void legend(const Chart& chart, std::ostream& out) {
  // Entries flow left to right and wrap at the plot's right edge, 12 px per row.
  double x = kLeft, y = 22;
  for (std::size_t s = 0; s < chart.series.size(); ++s) {
    const double width = 24 + 6.5 * static_cast<double>(chart.series[s].name.size());
    if (x > kLeft && x + width > kRight) {
      x = kLeft;
      y += 12;
    }
    out << fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="9" height="9" fill="{}"/>)", x, y, color(s)) << '\n';
    text(out, x + 13, y + 8.5, "start", chart.series[s].name);
    x += width;
  }
}

void frame(const Chart& chart, std::ostream& out) {
  out << fmt::format(R"(<svg class="chart" viewBox="0 0 {:.0f} {:.0f}" width="100%" role="img" aria-label="{}">)",
                     kWidth, kHeight, xml_escape(chart.title))
      << '\n';
  out << "<title>" << xml_escape(chart.title) << "</title>\n";
  text(out, kWidth / 2, 14, "middle", chart.title, R"( class="chart-title")");
}

void y_axis(const Chart& chart, const Axis& y, std::ostream& out) {
  for (const double tick : y.ticks) {
    const double py = kBottom - y.fraction(tick) * (kBottom - kTop);
    out << fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" class="grid"/>)", kLeft, py, kRight, py)
        << '\n';
    text(out, kLeft - 6, py + 4, "end", format_figure(tick));
  }
  text(out, 14, (kTop + kBottom) / 2, "middle", chart.y_label,
       fmt::format(R"svg( transform="rotate(-90 14 {:.1f})")svg", (kTop + kBottom) / 2));
  text(out, (kLeft + kRight) / 2, kHeight - 6, "middle", chart.x_label);
  out << fmt::format(R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{2:.1f}" y2="{1:.1f}" class="axis"/>)", kLeft, kBottom,
                     kRight)
      << '\n';
}

void references(const Chart& chart, const Axis& y, std::ostream& out) {
  for (const ReferenceLine& ref : chart.references) {
    if (!usable(ref.y, y.log) || ref.y < y.low || ref.y > y.high) continue;
    const double py = kBottom - y.fraction(ref.y) * (kBottom - kTop);
    out << fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" class="reference"/>)", kLeft, py,
                       kRight, py)
        << '\n';
    text(out, kRight - 4, py - 4, "end", fmt::format("{} {}", ref.label, format_figure(ref.y)),
         R"( class="reference-label")");
  }
}

void no_data(std::ostream& out) {
  text(out, kWidth / 2, kHeight / 2, "middle", "no data");
  out << "</svg>\n";
}

void line_chart(const Chart& chart, std::ostream& out) {
  double x_low = std::numeric_limits<double>::infinity(), x_high = -x_low, y_low = x_low, y_high = -x_low;
  for (const Series& s : chart.series) {
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!usable(s.x[i], chart.log_x) || !usable(s.y[i], chart.log_y)) continue;
      x_low = std::min(x_low, s.x[i]);
      x_high = std::max(x_high, s.x[i]);
      y_low = std::min(y_low, s.y[i]);
      y_high = std::max(y_high, s.y[i]);
    }
  }
  for (const ReferenceLine& ref : chart.references) {
    if (!usable(ref.y, chart.log_y) || !std::isfinite(y_low)) continue;
    y_low = std::min(y_low, ref.y);
    y_high = std::max(y_high, ref.y);
  }
  if (!std::isfinite(x_low)) return no_data(out);
  const Axis x = make_axis(x_low, x_high, chart.log_x, false);
  const Axis y = make_axis(y_low, y_high, chart.log_y, !chart.log_y && y_low >= 0);
  y_axis(chart, y, out);
  for (const double tick : x.ticks) {
    const double px = kLeft + x.fraction(tick) * (kRight - kLeft);
    text(out, px, kBottom + 16, "middle", format_figure(tick));
  }
  references(chart, y, out);
  for (std::size_t s = 0; s < chart.series.size(); ++s) {
    const Series& series = chart.series[s];
    std::string points;
    std::string dots;
    for (std::size_t i = 0; i < series.x.size() && i < series.y.size(); ++i) {
      if (!usable(series.x[i], chart.log_x) || !usable(series.y[i], chart.log_y)) continue;
      const double px = kLeft + x.fraction(series.x[i]) * (kRight - kLeft);
      const double py = kBottom - y.fraction(series.y[i]) * (kBottom - kTop);
      points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", px, py);
      if (series.points_only || series.x.size() <= 60) {
        dots += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="{}" fill="{}"><title>{}: {} = {}</title></circle>)",
                            px, py, series.points_only ? 4 : 2.5, color(s), xml_escape(series.name),
                            format_figure(series.x[i]), format_figure(series.y[i]));
        dots += '\n';
      }
    }
    if (!series.points_only && !points.empty()) {
      out << fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" stroke-width="1.8"/>)", points, color(s))
          << '\n';
    }
    out << dots;
  }
  legend(chart, out);
  out << "</svg>\n";
}

void bar_chart(const Chart& chart, std::ostream& out) {
  const bool stacked = chart.kind == ChartKind::kStackedBar;
  const std::size_t n = chart.categories.size();
  double y_high = 0, y_low = 0;
  bool any = false;
  for (std::size_t c = 0; c < n; ++c) {
    double positive = 0;
    for (const Series& s : chart.series) {
      if (c >= s.y.size() || !std::isfinite(s.y[c])) continue;
      any = true;
      if (stacked) {
        positive += std::max(0.0, s.y[c]);
      } else {
        y_high = std::max(y_high, s.y[c]);
        y_low = std::min(y_low, s.y[c]);
      }
    }
    y_high = std::max(y_high, positive);
  }
  if (!any || n == 0) return no_data(out);
  for (const ReferenceLine& ref : chart.references) {
    if (std::isfinite(ref.y)) y_high = std::max(y_high, ref.y);
  }
  const Axis y = make_axis(y_low, y_high, false, true);
  y_axis(chart, y, out);
  const double slot = (kRight - kLeft) / static_cast<double>(n);
  const std::size_t bars = stacked ? 1 : std::max<std::size_t>(1, chart.series.size());
  const double bar_width = slot * 0.8 / static_cast<double>(bars);
  const double zero_y = kBottom - y.fraction(0) * (kBottom - kTop);
  for (std::size_t c = 0; c < n; ++c) {
    const double slot_x = kLeft + slot * static_cast<double>(c);
    // Long category lists (one per step) label every k-th slot only.
    const std::size_t every = std::max<std::size_t>(1, n / 16);
    if (c % every == 0) text(out, slot_x + slot / 2, kBottom + 16, "middle", chart.categories[c]);
    double stack_top = 0;
    for (std::size_t s = 0; s < chart.series.size(); ++s) {
      const Series& series = chart.series[s];
      if (c >= series.y.size() || !std::isfinite(series.y[c])) continue;
      const double value = series.y[c];
      double x = slot_x + slot * 0.1 + bar_width * static_cast<double>(stacked ? 0 : s);
      double from = stacked ? stack_top : 0;
      double to = from + value;
      if (stacked) stack_top = to;
      const double py_from = kBottom - y.fraction(from) * (kBottom - kTop);
      const double py_to = kBottom - y.fraction(to) * (kBottom - kTop);
      const double top = std::min(py_from, py_to);
      const double height = std::max(std::abs(py_from - py_to), 0.5);
      out << fmt::format(
                 R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"><title>{} {}: {}</title></rect>)",
                 x, top, std::max(bar_width, 1.0), height, color(s), xml_escape(chart.categories[c]),
                 xml_escape(series.name), format_figure(value))
          << '\n';
    }
  }
  out << fmt::format(R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{2:.1f}" y2="{1:.1f}" class="axis"/>)", kLeft, zero_y,
                     kRight)
      << '\n';
  references(chart, y, out);
  legend(chart, out);
  out << "</svg>\n";
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        // Control characters are not allowed in XML 1.0 text; show them as a space.
        out += (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') ? ' ' : c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double low, double high, int target) {
  if (!(high > low)) {
    const double pad = low == 0 ? 1.0 : std::abs(low) * 0.1;
    low -= pad;
    high += pad;
  }
  const double raw = (high - low) / std::max(1, target - 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  const double first = std::floor(low / step) * step;
  for (double t = first; ticks.empty() || ticks.back() < high - step * 1e-9; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
    if (ticks.size() > 64) break;  // unreachable for finite input; bounds the loop regardless
  }
  return ticks;
}

void write_svg(const Chart& chart, std::ostream& out) {
  frame(chart, out);
  if (chart.kind == ChartKind::kLine) {
    line_chart(chart, out);
  } else {
    bar_chart(chart, out);
  }
}

}  // namespace zinf::reports
