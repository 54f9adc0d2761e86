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
};

// Shortest text that reads back as `value` to 4 significant digits ("1250", "0.0031", "2.5e+12");
// "nan"/"inf" for non-finite values. Shared by chart tables and axis labels.
std::string format_figure(double value);

}  // namespace zinf::reports
