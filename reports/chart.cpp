#include "reports/chart_table.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

namespace zinf::reports {

std::string format_figure(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return fmt::format("{:.4g}", value);
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
