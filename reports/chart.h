// Chart: the data of one figure in a report — what is plotted, never how. A record's renderer
// (record_report.h) fills charts from record fields; the HTML writer draws them as inline SVG
// (svg_chart.h) and the Markdown and CSV writers print the same numbers as tables (chart_table.h), so
// every format carries the same figures. Nothing here reads a record or computes a figure.
//
//   kLine:       each series is a polyline through its (x, y) points; a series with points_only is
//                drawn as dots (held-out losses, infeasible plans). Optional log axes.
//   kBar:        grouped bars: one group per category, one bar per series (y[i] for category i).
//   kStackedBar: one bar per category, the series stacked on each other (phase breakdowns).
//
// Reference lines are horizontal (an entropy floor, a memory budget) and labelled.
#pragma once

#include <string>
#include <vector>

#include "reports/humanise.h"

namespace zinf::reports {

enum class ChartKind { kLine, kBar, kStackedBar };

struct Series {
  std::string name;
  std::vector<double> x;  // kLine only; ignored for bars (the category index is the x)
  std::vector<double> y;  // same length as x for kLine, as the chart's categories for bars; NaN: no value
  bool points_only = false;
};

struct ReferenceLine {
  std::string label;
  double y = 0;
};

struct Chart {
  std::string title;
  ChartKind kind = ChartKind::kLine;
  std::string x_label;
  std::string y_label;
  std::vector<std::string> categories;  // bar charts
  std::vector<Series> series;
  std::vector<ReferenceLine> references;
  bool log_x = false;  // kLine only; non-positive values are left out
  bool log_y = false;
  // What the axes measure, in the units of the values (humanise.h): the SVG scales each axis to
  // the unit that reads (MiB or GiB, ms or s) and writes every tick, reference and point with it.
  // x_label and y_label name the quantity without its unit.
  Quantity x_quantity = Quantity::kNone;
  Quantity y_quantity = Quantity::kNone;
};

// True when the chart has at least one finite value that is not zero: a chart without one (all links
// idle, nothing recorded) is not worth drawing; the HTML writer leaves it out and says why in one
// line (chart_absence).
bool chart_has_data(const Chart& chart);

// The one line the HTML writer prints in place of a chart without data: "<title>: not drawn, every
// value is zero" or "...: not drawn, the record holds no value for it".
std::string chart_absence(const Chart& chart);

// Shortest text that reads back as `value` to 4 significant digits ("1250", "0.0031", "123500"; fixed
// notation up to 1e15, e-notation beyond);
// "nan"/"inf" for non-finite values. Shared by chart tables and axis labels.
std::string format_figure(double value);

}  // namespace zinf::reports
