// The parts of a zinf.train/1 report beyond loss, time, memory and links (docs/records/train-record.md):
// the plan next to what was measured — predicted, measured and error per phase, per tier and per
// link — with the hardware the plan used, the engine's counters, and the run's settings. Each
// builder names the record paths it shows (`used`), so "Other fields" lists only what has no home.
#include <cmath>

#include <fmt/format.h>

#include "libengine/core/units.h"
#include "reports/humanise.h"
#include "reports/report_parts.h"

namespace zinf::reports::detail {
namespace {

using nlohmann::json;

// "phase", "tier" or "link" of a plan row, from its unit: the record writes durations in ms, a
// tier's peak in bytes and a link's traffic in bytes/step.
std::string row_group(const std::string& unit) {
  if (unit == "ms") return "phase";
  if (unit == "bytes") return "tier peak";
  if (unit == "bytes/step") return "link";
  return unit;
}

std::string row_value(const json& row, const char* key) {
  const std::optional<double> v = number_at(row, key);
  if (!v) return "-";
  const std::string unit = string_at(row, "unit");
  if (unit == "ms") return humane(*v, Quantity::kMilliseconds);
  if (unit == "bytes") return humane(*v, Quantity::kBytes);
  if (unit == "bytes/step") return humane(*v, Quantity::kBytes) + "/step";
  return humane(*v, Quantity::kNone) + (unit.empty() ? "" : " " + unit);
}

// "key value, key value" of an object's scalar members with humane numbers, for one line.
std::string object_line(const json& object) {
  std::string out;
  for (const auto& [key, value] : object.items()) {
    if (value.is_object()) continue;
    std::string text = value.is_number() ? humane(value.get<double>(), quantity_of_key(key)) : value_text(value);
    if (value.is_array() && value.empty()) text = "none";
    std::string name = key;
    for (char& c : name) c = c == '_' ? ' ' : c;
    out += fmt::format("{}{} {}", out.empty() ? "" : " · ", name, text);
  }
  return out;
}

}  // namespace

std::vector<Section> train_plan_sections(const json& record, const std::string& heading,
                                         std::vector<std::string>& used) {
  const json* plan = find_path(record, "plan");
  const json* rows = plan != nullptr ? find_path(*plan, "rows") : nullptr;
  if (rows == nullptr || !rows->is_array() || rows->empty()) return {};
  Section table = titled(heading, fmt::format("Plan vs measured ({} schedule)", string_at(*plan, "schedule", "zinf")));
  used.push_back("plan");
  Section& s = table;
  s.table.columns = {
      {"figure"}, {"kind"}, {"predicted", Align::kRight}, {"measured", Align::kRight}, {"error", Align::kRight}};
  for (const json& row : *rows) {
    const std::optional<double> error = number_at(row, "error_percent");
    Cell error_cell("-", Emphasis::kMuted);
    if (error) {
      const double a = std::abs(*error);
      error_cell = Cell(fmt::format("{:+.1f}%", *error), a >= 50   ? Emphasis::kBad
                                                         : a >= 20 ? Emphasis::kWarn
                                                                   : Emphasis::kNone);
    }
    s.table.rows.push_back({string_at(row, "figure", "?"), Cell(row_group(string_at(row, "unit")), Emphasis::kMuted),
                            row_value(row, "predicted"), row_value(row, "measured"), std::move(error_cell)});
  }
  const std::string note = string_at(*plan, "note");
  if (!note.empty()) s.notes.push_back(note);
  s.notes.push_back(
      "error = (predicted - measured) / measured; '-' where both are zero. Phases are medians over the measured "
      "steps; a tier's figure is its peak; a link's is its bytes per step.");
  Section inputs = titled(heading, "What the plan assumed");
  const json* hw = find_path(*plan, "hardware");
  if (hw != nullptr && hw->is_object()) {
    inputs.fields.emplace_back("hardware", string_at(*hw, "source.from", "-"));
    std::string figures;
    for (const auto& [key, value] : hw->items()) {
      if (!value.is_number()) continue;
      Quantity q = quantity_of_key(key);
      if (key == "compute_flops") q = Quantity::kFlops;
      const std::string text = value.get<double>() == 0 ? "not used" : humane(value.get<double>(), q);
      std::string name = key;
      for (char& c : name) c = c == '_' ? ' ' : c;
      figures += fmt::format("{}{} {}", figures.empty() ? "" : " · ", name, text);
    }
    inputs.fields.emplace_back("hardware figures", figures);
    if (const json* sources = find_path(*hw, "source"); sources != nullptr && sources->is_object()) {
      for (const auto& [key, value] : sources->items()) {
        if (key != "from" && value.is_string())
          inputs.fields.emplace_back("how: " + key, Cell(value_text(value), Emphasis::kMuted));
      }
    }
  }
  if (const std::optional<double> work = number_at(*plan, "optimizer_work_ms")) {
    inputs.fields.emplace_back("optimizer",
                               fmt::format("{} of CPU Adam per step, {} of it hidden behind the backward pass",
                                           humane(*work, Quantity::kMilliseconds),
                                           or_dash(number_at(*plan, "optimizer_hidden_ms"),
                                                   [](double v) { return humane(v, Quantity::kMilliseconds); })));
  }
  if (const json* resolved = find_path(*plan, "resolved"); resolved != nullptr && resolved->is_object()) {
    inputs.fields.emplace_back("resolved settings", object_line(*resolved));
  }
  if (const std::optional<double> ranks = number_at(*plan, "ranks_modelled")) {
    inputs.fields.emplace_back("ranks modelled", humane_number(*ranks));
  }
  if (const json* items = find_path(*plan, "memory_items"); items != nullptr && items->is_object()) {
    for (const auto& [tier, list] : items->items()) {
      if (!list.is_array() || list.empty()) continue;
      std::string line;
      for (const json& item : list) {
        line += fmt::format("{}{} {}", line.empty() ? "" : " · ", string_at(item, "what", "?"),
                            or_dash(number_at(item, "bytes"), [](double v) { return humane(v, Quantity::kBytes); }));
      }
      inputs.fields.emplace_back("predicted " + tier + " memory", line);
    }
  }
  if (const json* unmeasured = find_path(*plan, "unmeasured"); unmeasured != nullptr && unmeasured->is_array()) {
    for (const json& u : *unmeasured) inputs.notes.push_back("not measured: " + value_text(u));
  }
  std::vector<Section> out;
  out.push_back(std::move(table));
  out.push_back(std::move(inputs));
  return out;
}

Section train_engine_section(const json& record, const std::string& heading, std::vector<std::string>& used) {
  Section s = titled(heading, "Engine");
  const json* engine = find_path(record, "engine");
  if (engine == nullptr || !engine->is_object()) return s;
  for (const auto& [key, value] : engine->items()) {
    if (key == "links" || key == "description" || !value.is_object()) continue;
    const std::string line = object_line(value);
    if (line.empty()) continue;
    std::string name = key;
    for (char& c : name) c = c == '_' ? ' ' : c;
    s.fields.emplace_back(name, line);
    used.push_back("engine." + key);
  }
  return s;
}

}  // namespace zinf::reports::detail
