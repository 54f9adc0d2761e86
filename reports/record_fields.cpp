#include "reports/record_fields.h"

#include <cmath>

#include <fmt/format.h>

#include "reports/chart.h"
#include "reports/humanise.h"

namespace zinf::reports {
namespace {

using nlohmann::json;

}  // namespace

std::string field_text(std::string_view path, const json& value) {
  const Quantity q = quantity_of_key(path);
  if (q == Quantity::kNone) return value_text(value);
  if (value.is_number()) return humane(value.get<double>(), q);
  if (value.is_array()) {
    std::string out;
    for (const json& e : value)
      out += (out.empty() ? "" : ", ") + (e.is_number() ? humane(e.get<double>(), q) : value_text(e));
    return out.size() > 200 ? out.substr(0, 197) + "..." : out;
  }
  return value_text(value);
}

namespace {

void collect(const json& value, const std::string& path, int depth,
             std::vector<std::pair<std::string, std::string>>& out) {
  if (value.is_object()) {
    if (depth > 8) {
      out.emplace_back(path, value_text(value));
      return;
    }
    for (const auto& [key, child] : value.items()) {
      collect(child, path.empty() ? key : path + "." + key, depth + 1, out);
    }
    return;
  }
  if (value.is_array()) {
    bool scalars = true;
    for (const json& e : value) scalars = scalars && !e.is_structured();
    if (value.size() > 16) return;
    if (scalars || depth > 8) {
      out.emplace_back(path, field_text(path, value));
      return;
    }
    for (std::size_t i = 0; i < value.size(); ++i) collect(value[i], fmt::format("{}[{}]", path, i), depth + 1, out);
    return;
  }
  out.emplace_back(path, field_text(path, value));
}

}  // namespace

const json* find_path(const json& value, std::string_view path) {
  const json* at = &value;
  while (!path.empty()) {
    const std::size_t dot = path.find('.');
    const std::string key(path.substr(0, dot));
    if (!at->is_object()) return nullptr;
    const auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  }
  return at;
}

std::optional<double> number_at(const json& value, std::string_view path) {
  const json* at = find_path(value, path);
  if (at == nullptr || !at->is_number()) return std::nullopt;
  const double v = at->get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::string string_at(const json& value, std::string_view path, std::string_view fallback) {
  const json* at = find_path(value, path);
  if (at == nullptr || !at->is_string()) return std::string(fallback);
  return at->get<std::string>();
}

std::vector<double> numbers_at(const json& value, std::string_view path) {
  std::vector<double> out;
  const json* at = find_path(value, path);
  if (at == nullptr || !at->is_array()) return out;
  for (const json& e : *at) {
    if (e.is_number()) out.push_back(e.get<double>());
  }
  return out;
}

std::string record_kind(const json& record) {
  if (!record.is_object()) return "";
  const std::string schema = string_at(record, "schema");
  if (schema.rfind("zinf.", 0) != 0) return "";
  const std::size_t slash = schema.find('/');
  if (slash == std::string::npos || slash <= 5) return "";
  return schema.substr(5, slash - 5);
}

std::string value_text(const json& value) {
  if (value.is_null()) return "-";
  if (value.is_boolean()) return value.get<bool>() ? "yes" : "no";
  if (value.is_number_integer()) return value.dump();
  if (value.is_number()) return humane_number(value.get<double>());
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {
    bool scalars = true;
    for (const json& e : value) scalars = scalars && !e.is_structured();
    if (scalars) {
      std::string out;
      for (const json& e : value) out += (out.empty() ? "" : ", ") + value_text(e);
      if (out.size() > 200) out = out.substr(0, 197) + "...";
      return out;
    }
  }
  std::string text = value.dump();
  if (text.size() > 200) text = text.substr(0, 197) + "...";
  return text;
}

std::vector<std::pair<std::string, std::string>> scalar_leaves(const json& value, const std::vector<std::string>& skip,
                                                               const std::string& prefix) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!value.is_object()) {
    collect(value, prefix, 0, out);
    return out;
  }
  for (const auto& [key, child] : value.items()) {
    bool skipped = false;
    for (const std::string& s : skip) skipped = skipped || s == key;
    if (!skipped) collect(child, prefix.empty() ? key : prefix + "." + key, 1, out);
  }
  return out;
}

}  // namespace zinf::reports
