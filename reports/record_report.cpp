// Dispatch by record kind, the generic renderer for kinds without their own, the comparison section
// for several records, and the long-form CSV of a report document.
#include "reports/record_report.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "libengine/core/check.h"
#include "libengine/core/units.h"
#include "reports/chart_table.h"
#include "reports/report_parts.h"

namespace zinf::reports {

using nlohmann::json;

namespace detail {

std::vector<Section> generic_sections(const json& record, const std::string& heading) {
  std::vector<Section> out;
  out.push_back(envelope_section(record, heading));
  if (!record.is_object()) {
    out.back().fields.emplace_back("value", value_text(record));
    return out;
  }
  if (std::optional<Section> flags = consistency_section(record, heading)) out.push_back(std::move(*flags));
  std::vector<std::string> tabled;
  for (const auto& [key, value] : record.items()) {
    if (!value.is_array() || value.empty()) continue;
    if (value.front().is_object()) {
      // An array of objects: a table, and a chart of each numeric column against the row number
      // when the array is long enough to be a series.
      Section s = titled(heading, key);
      s.table = objects_table(value);
      if (value.size() >= 3) {
        Chart chart;
        chart.title = fmt::format("{} (numeric fields per element)", key);
        chart.x_label = "element";
        chart.y_label = "value";
        for (const Column& column : s.table.columns) {
          if (column.align != Align::kRight) continue;
          Series series{column.title, {}, {}, false};
          for (std::size_t i = 0; i < value.size(); ++i) {
            if (const std::optional<double> v = number_at(value[i], column.title)) {
              series.x.push_back(static_cast<double>(i));
              series.y.push_back(*v);
            }
          }
          if (!series.x.empty() && chart.series.size() < 6) chart.series.push_back(std::move(series));
        }
        if (!chart.series.empty()) s.charts.push_back(std::move(chart));
      }
      out.push_back(std::move(s));
      tabled.push_back(key);
    } else if (value.front().is_number() && value.size() > 16) {
      Section s = titled(heading, key);
      Chart chart;
      chart.title = key;
      chart.x_label = "index";
      chart.y_label = key;
      Series series{key, {}, {}, false};
      for (std::size_t i = 0; i < value.size(); ++i) {
        if (value[i].is_number()) {
          series.x.push_back(static_cast<double>(i));
          series.y.push_back(value[i].get<double>());
        }
      }
      chart.series.push_back(std::move(series));
      s.charts.push_back(std::move(chart));
      out.push_back(std::move(s));
      tabled.push_back(key);
    }
  }
  tabled.push_back("consistency");
  out.push_back(other_fields_section(record, tabled, heading));
  return out;
}

}  // namespace detail

namespace {

// Side-by-side figures of several records of one family: name -> path in the record.
struct Figure {
  const char* name;
  const char* path;
};
constexpr Figure kTrainFigures[] = {{"parameters", "model.params"},
                                    {"ranks", "engine.zero.world_size"},
                                    {"tokens/s", "summary.tokens_per_s"},
                                    {"step ms (median)", "summary.step_ms.median"},
                                    {"step ms (p90)", "summary.step_ms.p90"},
                                    {"final loss", "summary.final_loss"},
                                    {"held-out loss", "summary.final_eval_loss"},
                                    {"MFU", "summary.mfu"},
                                    {"device peak bytes", "memory.device.peak_bytes"},
                                    {"host peak RSS bytes", "memory.host.peak_rss_bytes"}};
constexpr Figure kBenchTrainFigures[] = {
    {"zinf tokens/s", "zinf.tokens_per_s_median"},     {"zinf step ms", "zinf.step_ms_median"},
    {"PyTorch tokens/s", "torch.tokens_per_s_median"}, {"zinf/PyTorch", "zinf_over_torch"},
    {"engine step ms", "engine.step_ms_median"},       {"ZeRO-0 step ms", "zero0.step_ms_median"}};

Section side_by_side(const std::vector<SourcedRecord>& records, const std::vector<std::size_t>& members,
                     const Figure* figures, std::size_t figure_count, const std::string& title) {
  Section s;
  s.title = title;
  s.table.columns.push_back({"figure"});
  for (const std::size_t i : members) s.table.columns.push_back({records[i].source, Align::kRight});
  for (std::size_t f = 0; f < figure_count; ++f) {
    std::vector<Cell> row{figures[f].name};
    bool any = false;
    for (const std::size_t i : members) {
      const json* v = find_path(records[i].record, figures[f].path);
      any = any || (v != nullptr && !v->is_null());
      row.emplace_back(v == nullptr ? std::string("-") : value_text(*v));
    }
    if (any) s.table.rows.push_back(std::move(row));
  }
  return s;
}

Chart scaling_chart(const std::vector<SourcedRecord>& records, const std::vector<std::size_t>& members,
                    const char* x_path, const std::string& x_label, bool log_x) {
  Chart chart;
  chart.title = fmt::format("Throughput against {}", x_label);
  chart.x_label = x_label;
  chart.y_label = "tokens/s";
  chart.y_quantity = Quantity::kCount;
  chart.x_quantity = quantity_of_key(x_path);
  chart.log_x = log_x;
  Series series{"tokens/s", {}, {}, false};
  // Points in x order so the line reads left to right.
  std::vector<std::pair<double, double>> points;
  for (const std::size_t i : members) {
    const std::optional<double> x = number_at(records[i].record, x_path);
    const std::optional<double> y = number_at(records[i].record, "summary.tokens_per_s");
    if (x && y) points.emplace_back(*x, *y);
  }
  std::sort(points.begin(), points.end());
  for (const auto& [x, y] : points) {
    series.x.push_back(x);
    series.y.push_back(y);
  }
  chart.series.push_back(std::move(series));
  return chart;
}

}  // namespace

std::vector<Section> record_sections(const json& record, const std::string& heading) {
  const std::string kind = record_kind(record);
  if (kind == "train") return detail::train_sections(record, heading);
  if (kind == "bench-io") return detail::bench_io_sections(record, heading);
  if (kind == "bench-train") return detail::bench_train_sections(record, heading);
  if (kind == "bench-suite") return detail::bench_suite_sections(record, heading);
  if (kind == "bench-scaling") return detail::bench_scaling_sections(record, heading);
  if (kind == "bench-peers") return detail::bench_peers_sections(record, heading);
  if (kind == "plan") return detail::plan_sections(record, heading);
  if (kind == "plan-sweep") return detail::plan_sweep_sections(record, heading);
  return detail::generic_sections(record, heading);
}

Document report_of_records(const std::vector<SourcedRecord>& records) {
  ZINF_CHECK(!records.empty(), "a report needs at least one record");
  Document document;
  std::vector<std::size_t> train, bench_train;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const std::string kind = record_kind(records[i].record);
    if (kind == "train") train.push_back(i);
    if (kind == "bench-train") bench_train.push_back(i);
  }
  if (records.size() == 1) {
    const std::string kind = record_kind(records.front().record);
    document.title = fmt::format("zinf report: {} ({})", records.front().source, kind.empty() ? "record" : kind);
  } else {
    document.title = fmt::format("zinf report: {} records", records.size());
  }
  if (train.size() >= 2) {
    Section s = side_by_side(records, train, kTrainFigures, std::size(kTrainFigures), "Train runs side by side");
    s.charts.push_back(scaling_chart(records, train, "model.params", "model size (parameters)", true));
    s.charts.push_back(scaling_chart(records, train, "engine.zero.world_size", "ranks", false));
    // A chart without a point on the ranks axis (records before ranks existed) would say "no data":
    // keep only charts with points.
    std::erase_if(s.charts, [](const Chart& c) { return c.series.front().x.size() < 2; });
    document.sections.push_back(std::move(s));
  }
  if (bench_train.size() >= 2) {
    document.sections.push_back(side_by_side(records, bench_train, kBenchTrainFigures, std::size(kBenchTrainFigures),
                                             "Training benchmarks side by side"));
  }
  for (const SourcedRecord& r : records) {
    const std::string kind = record_kind(r.record);
    const std::string heading = records.size() == 1 ? std::string() : fmt::format("{}: {}", kind, r.source);
    for (Section& s : record_sections(r.record, heading)) {
      const bool empty = s.fields.empty() && s.table.columns.empty() && s.charts.empty() && s.notes.empty();
      if (!empty) document.sections.push_back(std::move(s));
    }
  }
  return document;
}

Table document_csv(const Document& document) {
  Table t;
  t.columns = {{"section"}, {"item"}, {"row"}, {"column"}, {"value"}};
  for (const Section& s : document.sections) {
    for (const auto& [key, value] : s.fields) t.rows.push_back({s.title, "field", key, "", value.text});
    // Rows are keyed by their first cell only where it names them and no two rows share it;
    // otherwise by their number (1, 2, ...) with every cell, the first included, as a value.
    const auto table_rows = [&](const Table& table, const std::string& item) {
      std::set<std::string> keys;
      bool by_first = table.first_column_is_key;
      for (const std::vector<Cell>& row : table.rows) {
        by_first = by_first && !row.empty() && !row[0].text.empty() && keys.insert(row[0].text).second;
      }
      for (std::size_t r = 0; r < table.rows.size(); ++r) {
        const std::vector<Cell>& row = table.rows[r];
        const std::string key = by_first ? row[0].text : std::to_string(r + 1);
        for (std::size_t c = by_first ? 1 : 0; c < row.size(); ++c) {
          t.rows.push_back({s.title, item, key, table.columns[c].title, row[c].text});
        }
        if (by_first && row.size() == 1) t.rows.push_back({s.title, item, key, "", ""});
      }
    };
    if (!s.table.columns.empty()) table_rows(s.table, "table");
    for (const Chart& chart : s.charts) table_rows(chart_table(chart), "figure: " + chart.title);
  }
  return t;
}

json document_json(const Document& document) {
  json sections = json::array();
  const auto table_json = [](const Table& t) {
    json columns = json::array();
    for (const Column& c : t.columns) columns.push_back(c.title);
    json rows = json::array();
    for (const std::vector<Cell>& row : t.rows) {
      json r = json::array();
      for (const Cell& c : row) r.push_back(c.text);
      rows.push_back(std::move(r));
    }
    return json{{"columns", std::move(columns)}, {"rows", std::move(rows)}};
  };
  // NaN (a missing bar) is not JSON: null.
  const auto numbers = [](const std::vector<double>& values) {
    json out = json::array();
    for (const double v : values) out.push_back(std::isfinite(v) ? json(v) : json(nullptr));
    return out;
  };
  for (const Section& s : document.sections) {
    json fields = json::array();
    for (const auto& [key, value] : s.fields) fields.push_back({{"key", key}, {"value", value.text}});
    json charts = json::array();
    for (const Chart& c : s.charts) {
      json series = json::array();
      for (const Series& ser : c.series) {
        series.push_back({{"name", ser.name}, {"x", numbers(ser.x)}, {"y", numbers(ser.y)}});
      }
      json refs = json::array();
      for (const ReferenceLine& r : c.references) refs.push_back({{"label", r.label}, {"y", r.y}});
      const char* kind = c.kind == ChartKind::kLine ? "line" : c.kind == ChartKind::kBar ? "bar" : "stacked-bar";
      charts.push_back({{"title", c.title},
                        {"kind", kind},
                        {"x_label", c.x_label},
                        {"y_label", c.y_label},
                        {"categories", c.categories},
                        {"series", std::move(series)},
                        {"references", std::move(refs)}});
    }
    sections.push_back({{"title", s.title},
                        {"fields", std::move(fields)},
                        {"table", s.table.columns.empty() ? json(nullptr) : table_json(s.table)},
                        {"charts", std::move(charts)},
                        {"notes", s.notes}});
  }
  return {{"title", document.title}, {"sections", std::move(sections)}};
}

}  // namespace zinf::reports
