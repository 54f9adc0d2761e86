// The reports of planner records: zinf.plan/1 (memory per tier per state against capacity, the
// bottleneck, busy time per resource, the prediction) and zinf.plan-sweep/1 (throughput against
// nodes and against model size, and the feasible region). Figures are record fields only.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "libengine/core/units.h"
#include "reports/humanise.h"
#include "reports/report_parts.h"

namespace zinf::reports::detail {

using nlohmann::json;

std::vector<Section> plan_sections(const json& record, const std::string& heading) {
  std::vector<Section> out;
  out.push_back(envelope_section(record, heading));
  Section& head = out.back();
  head.fields.emplace_back("model", string_at(record, "input.model_source", "-"));
  head.fields.emplace_back("hardware", string_at(record, "input.hardware.name", "-"));
  head.fields.emplace_back("feasible", Cell(value_text(record.value("feasible", json(nullptr))),
                                            record.value("feasible", false) ? Emphasis::kGood : Emphasis::kBad));
  head.fields.emplace_back("family", string_at(record, "family", "-"));

  Section memory = titled(heading, "Memory per tier per state");
  const json* tiers = find_path(record, "memory.tiers");
  if (tiers != nullptr && tiers->is_array()) {
    memory.table.columns = {{"tier"}, {"unit"}, {"used", Align::kRight}, {"capacity", Align::kRight}, {"fits"}};
    for (const json& tier : *tiers) {
      const std::string name = string_at(tier, "tier", "?");
      memory.table.rows.push_back({name, string_at(tier, "unit"), or_dash(number_at(tier, "used_bytes"), format_bytes),
                                   or_dash(number_at(tier, "capacity_bytes"), format_bytes),
                                   Cell(value_text(tier.value("fits", json(nullptr))),
                                        tier.value("fits", true) ? Emphasis::kGood : Emphasis::kBad)});
      // One chart per tier: its states stacked, the capacity as the line they must stay under.
      Chart chart;
      chart.title = fmt::format("{} ({}): states against capacity", name, string_at(tier, "unit"));
      chart.kind = ChartKind::kStackedBar;
      chart.x_label = "tier";
      chart.y_label = "memory";
      chart.y_quantity = Quantity::kBytes;
      chart.categories = {name};
      const json* items = find_path(tier, "items");
      if (items != nullptr && items->is_array()) {
        for (const json& item : *items) {
          chart.series.push_back({string_at(item, "what", "?"), {}, {number_at(item, "bytes").value_or(0)}, false});
        }
      }
      if (const std::optional<double> cap = number_at(tier, "capacity_bytes"))
        chart.references.push_back({"capacity", *cap});
      if (!chart.series.empty()) memory.charts.push_back(std::move(chart));
    }
  }
  out.push_back(std::move(memory));

  Section bottleneck = titled(heading, "Bottleneck and prediction");
  bottleneck.fields.emplace_back("bottleneck", Cell(string_at(record, "bottleneck.resource", "-"), Emphasis::kStrong));
  const std::string why = string_at(record, "bottleneck.explanation");
  if (!why.empty()) bottleneck.notes.push_back(why);
  if (const json* prediction = find_path(record, "prediction"); prediction != nullptr && prediction->is_object()) {
    for (const auto& [key, value] : prediction->items()) bottleneck.fields.emplace_back(key, field_text(key, value));
  }
  if (const json* resources = find_path(record, "resources"); resources != nullptr && resources->is_array()) {
    Chart chart;
    chart.title = "Busy time per resource per step";
    chart.kind = ChartKind::kBar;
    chart.x_label = "resource";
    chart.y_label = "busy per step";
    chart.y_quantity = Quantity::kMilliseconds;
    Series busy{"busy", {}, {}, false};
    for (const json& r : *resources) {
      chart.categories.push_back(string_at(r, "resource", "?"));
      const std::optional<double> seconds = number_at(r, "seconds");
      busy.y.push_back(seconds ? *seconds * 1e3 : std::nan(""));
    }
    chart.series.push_back(std::move(busy));
    if (const std::optional<double> step = number_at(record, "prediction.step_seconds")) {
      chart.references.push_back({"predicted step", *step * 1e3});
    }
    bottleneck.charts.push_back(std::move(chart));
  }
  out.push_back(std::move(bottleneck));
  if (const json* suggestions = find_path(record, "suggestions"); suggestions != nullptr && !suggestions->empty()) {
    Section s = titled(heading, "What would make it fit");
    s.table = objects_table(*suggestions);
    out.push_back(std::move(s));
  }
  out.push_back(other_fields_section(record, {"memory", "resources", "bandwidth", "suggestions", "input"}, heading));
  return out;
}

namespace {

// A family of curves from the sweep's rows: y against `x_key`, one series per value of `group_key`.
Chart sweep_curves(const json& rows, const std::string& x_key, const std::string& group_key, const std::string& title,
                   const std::string& x_label) {
  Chart chart;
  chart.title = title;
  chart.x_label = x_label;
  chart.y_label = "tokens/s (cluster)";
  chart.y_quantity = Quantity::kCount;
  chart.x_quantity = x_key == "params" ? Quantity::kCount : Quantity::kNone;
  chart.log_x = true;
  chart.log_y = true;
  std::map<double, Series> by_group;
  for (const json& row : rows) {
    const std::optional<double> x = number_at(row, x_key);
    const std::optional<double> g = number_at(row, group_key);
    const std::optional<double> y = number_at(row, "prediction.tokens_per_second");
    if (!x || !g || !y || !row.value("feasible", false)) continue;
    Series& s = by_group[*g];
    s.name = fmt::format("{} {}", group_key, group_key == "params" ? format_count(*g) : format_figure(*g));
    s.x.push_back(*x);
    s.y.push_back(*y);
  }
  for (auto& [g, s] : by_group) chart.series.push_back(std::move(s));
  return chart;
}

}  // namespace

std::vector<Section> plan_sweep_sections(const json& record, const std::string& heading) {
  std::vector<Section> out;
  out.push_back(envelope_section(record, heading));
  const json* rows = find_path(record, "rows");
  if (rows == nullptr || !rows->is_array()) return out;
  Section curves = titled(heading, "Sweep");
  curves.charts.push_back(sweep_curves(*rows, "nodes", "params", "Throughput against nodes", "nodes"));
  curves.charts.push_back(sweep_curves(*rows, "params", "nodes", "Throughput against model size", "parameters"));
  Chart region;
  region.title = "Feasible region (parameters x nodes)";
  region.x_label = "parameters";
  region.y_label = "nodes";
  region.x_quantity = Quantity::kCount;
  region.log_x = true;
  region.log_y = true;
  Series feasible{"feasible", {}, {}, true};
  Series infeasible{"does not fit", {}, {}, true};
  for (const json& row : *rows) {
    const std::optional<double> x = number_at(row, "params");
    const std::optional<double> y = number_at(row, "nodes");
    if (!x || !y) continue;
    Series& s = row.value("feasible", false) ? feasible : infeasible;
    s.x.push_back(*x);
    s.y.push_back(*y);
  }
  region.series = {std::move(feasible), std::move(infeasible)};
  curves.charts.push_back(std::move(region));
  curves.table = objects_table(*rows);
  out.push_back(std::move(curves));
  out.push_back(other_fields_section(record, {"rows", "input"}, heading));
  return out;
}

}  // namespace zinf::reports::detail
