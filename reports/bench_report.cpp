// The reports of benchmark records: zinf next to its baseline (fio, PyTorch, ZeRO-0, the suite's
// reference probes) with the ratio and its spread. Figures are record fields only.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "libengine/core/units.h"
#include "reports/humanise.h"
#include "reports/report_parts.h"

namespace zinf::reports::detail {
namespace {

using nlohmann::json;

std::string spread_text(const json& s) {
  const std::optional<double> median = number_at(s, "median");
  const std::optional<double> low = number_at(s, "min");
  const std::optional<double> high = number_at(s, "max");
  if (!median) return "-";
  if (!low || !high) return format_figure(*median);
  return fmt::format("{} ({}..{})", format_figure(*median), format_figure(*low), format_figure(*high));
}

}  // namespace

std::vector<Section> bench_io_sections(const json& record, const std::string& heading) {
  std::vector<Section> out;
  out.push_back(envelope_section(record, heading));
  out.back().fields.emplace_back("store", string_at(record, "store.description", "-"));
  Section results = titled(heading, "zinf next to fio");
  results.table.columns = {{"test"},
                           {"zinf GB/s median (min..max)", Align::kRight},
                           {"fio GB/s median (min..max)", Align::kRight},
                           {"zinf/fio (range)", Align::kRight},
                           {"verified"}};
  Chart chart;
  chart.title = "GB/s per test: zinf next to fio (median)";
  chart.kind = ChartKind::kBar;
  chart.x_label = "test";
  chart.y_label = "throughput (1 GB/s = 1e9 B/s)";
  chart.y_quantity = Quantity::kGBps;
  Series zinf{"zinf", {}, {}, false};
  Series fio{"fio", {}, {}, false};
  Series zinf_min{"zinf min", {}, {}, false};
  Series zinf_max{"zinf max", {}, {}, false};
  const json* tests = find_path(record, "tests");
  if (tests != nullptr && tests->is_array()) {
    for (const json& t : *tests) {
      const std::string name = string_at(t, "name", "?");
      chart.categories.push_back(name);
      zinf.y.push_back(number_at(t, "gbps.median").value_or(std::nan("")));
      zinf_min.y.push_back(number_at(t, "gbps.min").value_or(std::nan("")));
      zinf_max.y.push_back(number_at(t, "gbps.max").value_or(std::nan("")));
      fio.y.push_back(number_at(t, "fio.gbps.median").value_or(std::nan("")));
      const json* fio_gbps = find_path(t, "fio.gbps");
      results.table.rows.push_back(
          {Cell(name, Emphasis::kStrong), spread_text(t.value("gbps", json(nullptr))),
           fio_gbps != nullptr ? spread_text(*fio_gbps) : std::string("-"),
           ratio_cell(t.value("zinf_over_fio", json(nullptr)), find_path(t, "zinf_over_fio_spread")),
           value_text(t.value("verified", json(nullptr)))});
    }
  }
  chart.series = {std::move(zinf), std::move(zinf_min), std::move(zinf_max), std::move(fio)};
  results.charts.push_back(std::move(chart));
  const std::string rule = string_at(record, "spread_rule");
  if (!rule.empty()) results.notes.push_back("Spread rule: " + rule);
  out.push_back(std::move(results));
  out.push_back(other_fields_section(record, {"tests"}, heading));
  return out;
}

std::vector<Section> bench_train_sections(const json& record, const std::string& heading) {
  std::vector<Section> out;
  out.push_back(envelope_section(record, heading));
  out.back().fields.emplace_back("scenario", string_at(record, "scenario_path", "-"));
  Section sides = titled(heading, "zinf next to its baseline");
  Chart chart;
  chart.title = "Step time per repetition";
  chart.kind = ChartKind::kBar;
  chart.x_label = "repetition";
  chart.y_label = "step time";
  chart.y_quantity = Quantity::kMilliseconds;
  sides.table.columns = {{"side"},
                         {"tokens/s median", Align::kRight},
                         {"step ms median", Align::kRight},
                         {"step ms min..max", Align::kRight},
                         {"MFU", Align::kRight}};
  // The sides a bench-train record holds: zinf and torch (--torch), engine and zero0 (--zero0).
  for (const char* side : {"zinf", "torch", "engine", "zero0"}) {
    const json* s = find_path(record, side);
    if (s == nullptr || !s->is_object()) continue;
    const std::vector<double> steps = numbers_at(*s, "step_ms");
    std::string range = "-";
    if (!steps.empty()) {
      range = fmt::format("{}..{}", format_figure(*std::min_element(steps.begin(), steps.end())),
                          format_figure(*std::max_element(steps.begin(), steps.end())));
    }
    sides.table.rows.push_back(
        {Cell(side, Emphasis::kStrong), or_dash(number_at(*s, "tokens_per_s_median"), format_figure),
         or_dash(number_at(*s, "step_ms_median"), format_figure), range, or_dash(number_at(*s, "mfu"), format_figure)});
    Series series{side, {}, steps, false};
    chart.series.push_back(std::move(series));
    for (std::size_t i = chart.categories.size(); i < steps.size(); ++i)
      chart.categories.push_back(std::to_string(i + 1));
  }
  if (!chart.series.empty()) sides.charts.push_back(std::move(chart));
  if (const json* r = find_path(record, "zinf_over_torch")) {
    sides.fields.emplace_back("zinf/PyTorch tokens/s", ratio_cell(*r, find_path(record, "zinf_over_torch_spread")));
  }
  const std::string rule = string_at(record, "spread_rule");
  if (!rule.empty()) sides.notes.push_back("Spread rule: " + rule);
  out.push_back(std::move(sides));
  if (const json* targets = find_path(record, "targets"); targets != nullptr && targets->is_object()) {
    Section t = titled(heading, "Targets");
    t.table.columns = {{"target"}, {"value", Align::kRight}, {"bound", Align::kRight}, {"met"}, {"what"}};
    for (const auto& [name, target] : targets->items()) {
      t.table.rows.push_back({name, ratio_cell(target.value("value", json(nullptr)), find_path(target, "spread")),
                              value_text(target.value("bound", json(nullptr))),
                              Cell(value_text(target.value("met", json(nullptr))),
                                   target.value("met", false) ? Emphasis::kGood : Emphasis::kBad),
                              string_at(target, "what")});
    }
    out.push_back(std::move(t));
  }
  out.push_back(other_fields_section(record, {"scenario"}, heading));
  return out;
}

std::vector<Section> bench_suite_sections(const json& record, const std::string& heading) {
  std::vector<Section> out;
  out.push_back(envelope_section(record, heading));
  Section s = titled(heading, "Machine figures next to their baselines");
  s.table.columns = {{"figure"},
                     {"zinf median (min..max)", Align::kRight},
                     {"baseline"},
                     {"baseline median (min..max)", Align::kRight},
                     {"zinf/baseline (range)", Align::kRight},
                     {"unit"}};
  Chart chart;
  chart.title = "zinf / baseline per figure (1 = as fast as the baseline)";
  chart.kind = ChartKind::kBar;
  chart.x_label = "figure";
  chart.y_label = "ratio";
  Series ratios{"zinf/baseline", {}, {}, false};
  const json* figures = find_path(record, "figures");
  if (figures != nullptr && figures->is_array()) {
    for (const json& f : *figures) {
      const std::string name = string_at(f, "name", "?");
      const json* zinf = find_path(f, "zinf");
      const json* base = find_path(f, "baseline");
      s.table.rows.push_back({Cell(name, Emphasis::kStrong), zinf != nullptr ? spread_text(*zinf) : std::string("-"),
                              base != nullptr ? string_at(*base, "name", "-") : std::string("-"),
                              base != nullptr ? spread_text(*base) : std::string("-"),
                              ratio_cell(f.value("ratio", json(nullptr)), find_path(f, "ratio_spread")),
                              string_at(f, "unit")});
      chart.categories.push_back(name);
      ratios.y.push_back(number_at(f, "ratio").value_or(std::nan("")));
    }
  }
  chart.series.push_back(std::move(ratios));
  chart.references.push_back({"parity", 1.0});
  s.charts.push_back(std::move(chart));
  const std::string rule = string_at(record, "spread_rule");
  if (!rule.empty()) s.notes.push_back("Spread rule: " + rule);
  out.push_back(std::move(s));
  out.push_back(other_fields_section(record, {"figures"}, heading));
  return out;
}

}  // namespace zinf::reports::detail
