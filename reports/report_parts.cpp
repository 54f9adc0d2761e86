// Shared pieces of the per-kind report builders (report_parts.h).
#include "reports/report_parts.h"

#include "reports/compare_conditions.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace zinf::reports::detail {

using nlohmann::json;

namespace {
const std::vector<std::string> kEnvelopeKeys = {"schema", "generator", "created_at", "host", "conditions"};
}  // namespace

Section titled(const std::string& heading, std::string_view title) {
  Section s;
  s.title = heading.empty() ? std::string(title) : fmt::format("{} — {}", heading, title);
  return s;
}

Section envelope_section(const json& record, const std::string& heading) {
  Section s = titled(heading, "Record");
  s.fields.emplace_back("schema", string_at(record, "schema", "(none)"));
  s.fields.emplace_back("created", string_at(record, "created_at", "-"));
  if (find_path(record, "generator") != nullptr) {
    s.fields.emplace_back("zinf", fmt::format("{} (git {}, {})", string_at(record, "generator.version", "?"),
                                              string_at(record, "generator.git_sha", "?"),
                                              string_at(record, "generator.build_type", "?")));
  }
  if (const json* host = find_path(record, "host"); host != nullptr && host->is_object()) {
    s.fields.emplace_back("host", fmt::format("{}: {}, {} logical CPUs", string_at(*host, "hostname", "?"),
                                              string_at(*host, "cpu_model", "?"),
                                              value_text(host->value("logical_cpus", json(nullptr)))));
  }
  if (const json* conditions = find_path(record, "conditions"); conditions != nullptr) {
    s.fields.emplace_back("conditions", conditions_line(*conditions));
  }
  return s;
}

Section other_fields_section(const json& record, const std::vector<std::string>& used, const std::string& heading) {
  Section s = titled(heading, "Other fields");
  const auto is_used = [&used](const std::string& path) {
    for (const std::string& u : used) {
      if (path.compare(0, u.size(), u) == 0 &&
          (path.size() == u.size() || path[u.size()] == '.' || path[u.size()] == '['))
        return true;
    }
    return false;
  };
  s.table.columns = {{"field"}, {"value"}};
  for (auto& [path, text] : scalar_leaves(record, kEnvelopeKeys)) {
    if (!is_used(path)) s.table.rows.push_back({path, text});
  }
  if (s.table.rows.empty()) s.table.columns.clear();
  return s;
}

Table objects_table(const json& array) {
  Table t;
  std::vector<std::string> keys;
  std::vector<bool> numeric;
  for (const json& e : array) {
    if (!e.is_object()) continue;
    for (const auto& [key, value] : e.items()) {
      const auto it = std::find(keys.begin(), keys.end(), key);
      if (it == keys.end()) {
        if (keys.size() >= 12) continue;
        keys.push_back(key);
        numeric.push_back(value.is_number());
      } else if (!value.is_number() && !value.is_null()) {
        numeric[static_cast<std::size_t>(it - keys.begin())] = false;
      }
    }
  }
  // A column that names every element ("name" or "id": present in each, a string, no two alike)
  // goes first and keys the rows; without one the first key is just a value.
  std::set<std::string> seen;
  const auto identifies = [&](const std::string& key) {
    seen.clear();
    for (const json& e : array) {
      if (!e.is_object()) continue;
      const auto it = e.find(key);
      if (it == e.end() || !it->is_string() || it->get<std::string>().empty()) return false;
      if (!seen.insert(it->get<std::string>()).second) return false;
    }
    return !seen.empty();
  };
  t.first_column_is_key = false;
  for (const std::string identifier : {"name", "id"}) {
    const auto it = std::find(keys.begin(), keys.end(), identifier);
    if (it == keys.end() || !identifies(identifier)) continue;
    const std::size_t at = static_cast<std::size_t>(it - keys.begin());
    std::rotate(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(at),
                keys.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    const bool flag = numeric[at];
    numeric.erase(numeric.begin() + static_cast<std::ptrdiff_t>(at));
    numeric.insert(numeric.begin(), flag);
    t.first_column_is_key = true;
    break;
  }
  for (std::size_t k = 0; k < keys.size(); ++k)
    t.columns.push_back({keys[k], numeric[k] ? Align::kRight : Align::kLeft});
  for (const json& e : array) {
    if (!e.is_object()) continue;
    std::vector<Cell> row;
    for (const std::string& key : keys) row.emplace_back(e.contains(key) ? field_text(key, e.at(key)) : std::string());
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string or_dash(const std::optional<double>& value, std::string (*format)(double)) {
  return value ? format(*value) : std::string("-");
}

Cell ratio_cell(const json& ratio, const json* spread) {
  if (!ratio.is_number()) return Cell("-", Emphasis::kMuted);
  const double r = ratio.get<double>();
  if (spread == nullptr || !spread->is_object()) return Cell(fmt::format("{:.2f}", r));
  const std::optional<double> low = number_at(*spread, "low");
  const std::optional<double> high = number_at(*spread, "high");
  const bool wide = spread->value("too_wide", false);
  std::string text = low && high ? fmt::format("{:.2f} ({:.2f}..{:.2f})", r, *low, *high) : fmt::format("{:.2f}", r);
  if (wide) text += ", spread too wide to judge";
  return Cell(text, wide ? Emphasis::kWarn : Emphasis::kNone);
}

std::optional<Section> consistency_section(const json& record, const std::string& heading) {
  const json* c = find_path(record, "consistency");
  if (c == nullptr || !c->is_object() || c->value("consistent", true)) return std::nullopt;
  Section s = titled(heading, "Inconsistent record");
  const json* issues = find_path(*c, "issues");
  if (issues != nullptr && issues->is_array()) {
    for (const json& issue : *issues) s.fields.emplace_back("issue", Cell(value_text(issue), Emphasis::kBad));
  }
  s.notes.push_back(
      "zinf found figures in this record that cannot all be true (see above); they are shown, flagged, not taken as "
      "fact.");
  return s;
}

}  // namespace zinf::reports::detail
