#include "reports/chart_table.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

namespace zinf::reports {

std::string format_figure(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // Fixed notation from 1e-4 to 1e15 (a plain "123500" reads better than "1.235e+05" and reads back
  // the same to 4 digits); e-notation only beyond.
  const double a = std::abs(value);
  if (a >= 1e4 && a < 1e15) return fmt::format("{:.0f}", std::stod(fmt::format("{:.4g}", value)));
  return fmt::format("{:.4g}", value);
}

bool chart_has_data(const Chart& chart) {
  for (const Series& s : chart.series) {
    for (const double y : s.y) {
      if (std::isfinite(y) && y != 0) return true;
    }
  }
  return false;
}

std::string chart_absence(const Chart& chart) {
  bool any_finite = false;
  for (const Series& s : chart.series) {
    for (const double y : s.y) any_finite = any_finite || std::isfinite(y);
  }
  return fmt::format("{}: not drawn, {}.", chart.title,
                     any_finite ? "every value is zero" : "the record holds no value for it");
}

Table chart_table(const Chart& chart) {
  Table table;
  const bool line = chart.kind == ChartKind::kLine;
  table.columns.push_back({line ? (chart.x_label.empty() ? std::string("x") : chart.x_label)
                                : (chart.x_label.empty() ? std::string("category") : chart.x_label)});
  for (const Series& s : chart.series) table.columns.push_back({s.name, Align::kRight});
  const std::size_t width = table.columns.size();
  if (line) {
    // x -> one cell per series. Doubles as keys: the x values come from the same record fields, so
    // equal x are bit-equal.
    std::map<double, std::vector<std::string>> rows;
    for (std::size_t s = 0; s < chart.series.size(); ++s) {
      const Series& series = chart.series[s];
      for (std::size_t i = 0; i < series.x.size() && i < series.y.size(); ++i) {
        std::vector<std::string>& row = rows[series.x[i]];
        row.resize(width - 1);
        row[s] = format_figure(series.y[i]);
      }
    }
    for (auto& [x, cells] : rows) {
      std::vector<Cell> row{Cell(format_figure(x))};
      for (std::string& c : cells) row.emplace_back(std::move(c));
      table.rows.push_back(std::move(row));
    }
  } else {
    for (std::size_t c = 0; c < chart.categories.size(); ++c) {
      std::vector<Cell> row{Cell(chart.categories[c])};
      for (const Series& s : chart.series) {
        row.emplace_back(c < s.y.size() && !std::isnan(s.y[c]) ? format_figure(s.y[c]) : std::string());
      }
      table.rows.push_back(std::move(row));
    }
  }
  for (const ReferenceLine& ref : chart.references) {
    std::vector<Cell> row(width);
    row[0] = Cell("reference: " + ref.label);
    if (width > 1) row[1] = Cell(format_figure(ref.y));
    table.rows.push_back(std::move(row));
  }
  return table;
}

}  // namespace zinf::reports
