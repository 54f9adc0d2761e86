#include "reports/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace zinf::reports {
namespace {

constexpr double kWidth = 720;
constexpr double kRight = 700;
constexpr double kPlotHeight = 218;  // from the legend's last row to the x axis
constexpr double kCharWidth = 6.6;   // an 11 px system-ui character, rounded up: label widths are estimates
constexpr double kLineHeight = 14;
// Colour-blind-safe palette (Okabe-Ito); past its end the colours repeat with a dash pattern, so
// every series of a sweep keeps its own line style.
constexpr const char* kPalette[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                    "#CC79A7", "#56B4E9", "#000000", "#8C6D1F"};
constexpr std::size_t kColours = sizeof(kPalette) / sizeof(kPalette[0]);
constexpr const char* kDashes[] = {"", "7 3", "2 3", "9 3 2 3"};

const char* color(std::size_t i) { return kPalette[i % kColours]; }
std::string dash(std::size_t i) {
  const char* d = kDashes[(i / kColours) % (sizeof(kDashes) / sizeof(kDashes[0]))];
  return *d == '\0' ? std::string() : fmt::format(R"( stroke-dasharray="{}")", d);
}

double text_width(std::string_view text) {
  // Multi-byte UTF-8 sequences are one character.
  double chars = 0;
  for (const char c : text) chars += (static_cast<unsigned char>(c) & 0xC0) == 0x80 ? 0 : 1;
  return chars * kCharWidth;
}

// Where things go: the plot's box grows downwards with the legend's rows and the x labels' depth.
struct Layout {
  double left = 72;  // room for y tick labels
  double top = 44;
  double bottom = 262;
  double height = 320;
  double label_depth = 0;  // vertical room the x tick labels take below the axis
  bool rotated = false;    // bar categories written upright (rotated -90 degrees)
  std::size_t label_every = 1;
};

struct Axis {
  double low = 0;
  double high = 1;
  bool log = false;
  Quantity quantity = Quantity::kNone;
  AxisScale scale;            // linear axes: one unit for every tick
  std::vector<double> ticks;  // in data units

  // Position of `value` in [0, 1] along the axis.
  double fraction(double value) const {
    const double v = log ? std::log10(value) : value;
    const double lo = log ? std::log10(low) : low;
    const double hi = log ? std::log10(high) : high;
    return hi > lo ? (v - lo) / (hi - lo) : 0.5;
  }

  // A count's K, M or B goes on every tick; a physical unit (GiB, ms, s) in the axis title.
  bool unit_on_ticks() const { return quantity == Quantity::kCount || quantity == Quantity::kNone; }

  std::string tick_text(double tick) const {
    if (log) {
      const AxisScale own = axis_scale(quantity, tick);
      const std::string number = format_figure(tick / own.divisor);
      return own.unit.empty() ? number : number + (unit_on_ticks() ? "" : " ") + own.unit;
    }
    const std::string number = format_figure(tick / scale.divisor);
    return unit_on_ticks() && tick != 0 ? number + scale.unit : number;
  }

  std::string title(const std::string& label) const {
    if (log || unit_on_ticks() || scale.unit.empty()) return label;
    return label.empty() ? scale.unit : fmt::format("{} ({})", label, scale.unit);
  }
};

bool usable(double value, bool log) { return std::isfinite(value) && (!log || value > 0); }

Axis make_axis(double low, double high, bool log, bool include_zero, Quantity quantity) {
  Axis axis;
  axis.log = log;
  axis.quantity = quantity;
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
  // Round ticks in the unit the axis reads in (0, 256, 512 MiB rather than 0, 0.25, 0.5 GiB).
  axis.scale = axis_scale(quantity, std::max(std::abs(low), std::abs(high)));
  const double d = axis.scale.divisor;
  for (const double t : nice_ticks(low / d, high / d, 5)) axis.ticks.push_back(t * d);
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

// Legend entries flow left to right and wrap at the plot's right edge; returns the rows used.
int legend(const Chart& chart, std::ostream* out) {
  const bool lines = chart.kind == ChartKind::kLine;
  double x = 72, y = 22;
  int rows = chart.series.empty() ? 0 : 1;
  for (std::size_t s = 0; s < chart.series.size(); ++s) {
    const double width = 30 + text_width(chart.series[s].name);
    if (x > 72 && x + width > kRight) {
      x = 72;
      y += kLineHeight;
      ++rows;
    }
    if (out != nullptr) {
      if (lines && !chart.series[s].points_only) {
        *out << fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}" stroke-width="2"{}/>)",
                            x, y + 4.5, x + 16, y + 4.5, color(s), dash(s))
             << '\n';
      } else {
        *out << fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="9" height="9" fill="{}"/>)", x + 3, y, color(s))
             << '\n';
      }
      text(*out, x + 20, y + 8.5, "start", chart.series[s].name);
    }
    x += width;
  }
  return rows;
}

Layout layout(const Chart& chart, double y_label_width) {
  Layout l;
  l.top = 30 + kLineHeight * std::max(1, legend(chart, nullptr));
  l.left = std::max(72.0, y_label_width + 30);
  l.label_depth = 16;
  const std::size_t n = chart.categories.size();
  if (chart.kind != ChartKind::kLine && n > 0) {
    double widest = 0;
    for (const std::string& c : chart.categories) widest = std::max(widest, text_width(c));
    // Long category lists (one per step) label every k-th slot only.
    l.label_every = std::max<std::size_t>(1, n / 16);
    const double slot = (kRight - l.left) / static_cast<double>(n);
    if (widest > slot * static_cast<double>(l.label_every) - 6) {
      // Written upright, reading bottom to top and ending under the slot: each label then needs only
      // a line's height across, and its box is the box a reader sees (no slanted overlaps).
      l.rotated = true;
      l.label_every = std::max<std::size_t>(l.label_every, static_cast<std::size_t>(std::ceil(15.0 / slot)));
      l.label_depth = widest + 14;
    }
  }
  l.bottom = l.top + kPlotHeight;
  l.height = l.bottom + l.label_depth + 22;
  return l;
}

void frame(const Chart& chart, const Layout& l, std::ostream& out) {
  out << fmt::format(R"(<svg class="chart" viewBox="0 0 {:.0f} {:.0f}" width="100%" role="img" aria-label="{}">)",
                     kWidth, l.height, xml_escape(chart.title))
      << '\n';
  out << "<title>" << xml_escape(chart.title) << "</title>\n";
  text(out, kWidth / 2, 14, "middle", chart.title, R"( class="chart-title")");
}

double y_of(const Layout& l, const Axis& y, double value) { return l.bottom - y.fraction(value) * (l.bottom - l.top); }

double widest_tick(const Axis& y) {
  double widest = 0;
  for (const double tick : y.ticks) widest = std::max(widest, text_width(y.tick_text(tick)));
  return widest;
}

void y_axis(const Chart& chart, const Layout& l, const Axis& y, const std::string& x_title, std::ostream& out) {
  for (const double tick : y.ticks) {
    const double py = y_of(l, y, tick);
    out << fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" class="grid"/>)", l.left, py, kRight,
                       py)
        << '\n';
    text(out, l.left - 6, py + 4, "end", y.tick_text(tick));
  }
  const double mid = (l.top + l.bottom) / 2;
  text(out, 14, mid, "middle", y.title(chart.y_label), fmt::format(R"svg( transform="rotate(-90 14 {:.1f})")svg", mid));
  text(out, (l.left + kRight) / 2, l.height - 6, "middle", x_title);
  out << fmt::format(R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{2:.1f}" y2="{1:.1f}" class="axis"/>)", l.left, l.bottom,
                     kRight)
      << '\n';
}

// Labels at the right end of their line; one that would cover an earlier label moves to the left
// end, then further in, so close lines (p10, median, p90) keep readable labels.
void references(const Chart& chart, const Layout& l, const Axis& y, std::ostream& out) {
  struct Box {
    double x0, x1, y0, y1;
  };
  std::vector<Box> placed;
  for (const ReferenceLine& ref : chart.references) {
    if (!usable(ref.y, y.log) || ref.y < y.low || ref.y > y.high) continue;
    const double py = y_of(l, y, ref.y);
    out << fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" class="reference"/>)", l.left, py,
                       kRight, py)
        << '\n';
    const std::string label = fmt::format("{} {}", ref.label, humane(ref.y, chart.y_quantity));
    const double w = text_width(label);
    const double baseline = std::max(l.top + 10, py - 4);
    Box box{};
    bool free = false;
    for (double end = kRight - 4; end - w >= l.left + 2 && !free; end -= std::max(w + 12, 60.0)) {
      box = {end - w, end, baseline - 10, baseline + 2};
      free = true;
      for (const Box& b : placed) free = free && (box.x1 < b.x0 || box.x0 > b.x1 || box.y1 < b.y0 || box.y0 > b.y1);
    }
    if (!free) box = {kRight - 4 - w, kRight - 4, baseline - 10, baseline + 2};
    placed.push_back(box);
    text(out, box.x1, baseline, "end", label, R"( class="reference-label")");
  }
}

void no_data(std::ostream& out) {
  text(out, kWidth / 2, 160, "middle", "no data");
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
  if (!std::isfinite(x_low)) {
    frame(chart, Layout{}, out);
    return no_data(out);
  }
  const Axis x = make_axis(x_low, x_high, chart.log_x, false, chart.x_quantity);
  const Axis y = make_axis(y_low, y_high, chart.log_y, !chart.log_y && y_low >= 0, chart.y_quantity);
  const Layout l = layout(chart, widest_tick(y));
  frame(chart, l, out);
  y_axis(chart, l, y, x.title(chart.x_label), out);
  for (const double tick : x.ticks) {
    const double px = l.left + x.fraction(tick) * (kRight - l.left);
    text(out, px, l.bottom + 16, "middle", x.tick_text(tick));
  }
  references(chart, l, y, out);
  for (std::size_t s = 0; s < chart.series.size(); ++s) {
    const Series& series = chart.series[s];
    std::string points;
    std::string dots;
    for (std::size_t i = 0; i < series.x.size() && i < series.y.size(); ++i) {
      if (!usable(series.x[i], chart.log_x) || !usable(series.y[i], chart.log_y)) continue;
      const double px = l.left + x.fraction(series.x[i]) * (kRight - l.left);
      const double py = y_of(l, y, series.y[i]);
      points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", px, py);
      if (series.points_only || series.x.size() <= 60) {
        dots += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="{}" fill="{}"><title>{}: {} = {}</title></circle>)",
                            px, py, series.points_only ? 4 : 2.5, color(s), xml_escape(series.name),
                            xml_escape(humane(series.x[i], chart.x_quantity)),
                            xml_escape(humane(series.y[i], chart.y_quantity)));
        dots += '\n';
      }
    }
    if (!series.points_only && !points.empty()) {
      out << fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" stroke-width="1.8"{}/>)", points, color(s),
                         dash(s))
          << '\n';
    }
    out << dots;
  }
  legend(chart, &out);
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
  if (!any || n == 0) {
    frame(chart, Layout{}, out);
    return no_data(out);
  }
  for (const ReferenceLine& ref : chart.references) {
    if (std::isfinite(ref.y)) y_high = std::max(y_high, ref.y);
  }
  const Axis y = make_axis(y_low, y_high, false, true, chart.y_quantity);
  const Layout l = layout(chart, widest_tick(y));
  frame(chart, l, out);
  y_axis(chart, l, y, chart.x_label, out);
  const double slot = (kRight - l.left) / static_cast<double>(n);
  const std::size_t bars = stacked ? 1 : std::max<std::size_t>(1, chart.series.size());
  const double bar_width = slot * 0.8 / static_cast<double>(bars);
  const double zero_y = y_of(l, y, 0);
  for (std::size_t c = 0; c < n; ++c) {
    const double slot_x = l.left + slot * static_cast<double>(c);
    if (c % l.label_every == 0) {
      const double cx = slot_x + slot / 2;
      if (l.rotated) {
        text(out, cx + 4, l.bottom + 8, "end", chart.categories[c],
             fmt::format(R"svg( transform="rotate(-90 {:.1f} {:.1f})")svg", cx + 4, l.bottom + 8));
      } else {
        text(out, cx, l.bottom + 16, "middle", chart.categories[c]);
      }
    }
    double stack_top = 0;
    for (std::size_t s = 0; s < chart.series.size(); ++s) {
      const Series& series = chart.series[s];
      if (c >= series.y.size() || !std::isfinite(series.y[c])) continue;
      const double value = series.y[c];
      double x = slot_x + slot * 0.1 + bar_width * static_cast<double>(stacked ? 0 : s);
      double from = stacked ? stack_top : 0;
      double to = from + value;
      if (stacked) stack_top = to;
      const double py_from = y_of(l, y, from);
      const double py_to = y_of(l, y, to);
      const double top = std::min(py_from, py_to);
      const double height = std::max(std::abs(py_from - py_to), 0.5);
      out << fmt::format(
                 R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"><title>{} {}: {}</title></rect>)",
                 x, top, std::max(bar_width, 1.0), height, color(s), xml_escape(chart.categories[c]),
                 xml_escape(series.name), xml_escape(humane(value, chart.y_quantity)))
          << '\n';
    }
  }
  out << fmt::format(R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{2:.1f}" y2="{1:.1f}" class="axis"/>)", l.left, zero_y,
                     kRight)
      << '\n';
  references(chart, l, y, out);
  legend(chart, &out);
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
  if (chart.kind == ChartKind::kLine) {
    line_chart(chart, out);
  } else {
    bar_chart(chart, out);
  }
}

}  // namespace zinf::reports
