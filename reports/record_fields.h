// Reading figures out of a record for rendering: typed look-ups by dotted path that answer "absent"
// instead of throwing (records from other versions, other helpers' new kinds, hand-edited files),
// the record's kind from its schema, and the generic rendering of any JSON value as text. Nothing
// here computes a figure; a figure absent from the record is absent from the report.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace zinf::reports {

// The value at `path` ("summary.step_ms.median"; object keys only), or nullptr when any step is
// missing or not an object.
const nlohmann::json* find_path(const nlohmann::json& value, std::string_view path);

// The number at `path`, or nullopt when it is absent, null, not a number or not finite.
std::optional<double> number_at(const nlohmann::json& value, std::string_view path);

// The string at `path`, or `fallback` when absent or not a string.
std::string string_at(const nlohmann::json& value, std::string_view path, std::string_view fallback = "");

// The numbers of an array at `path` (non-numbers skipped); empty when absent.
std::vector<double> numbers_at(const nlohmann::json& value, std::string_view path);

// "train" for {"schema": "zinf.train/1"}, "bench-io" for "zinf.bench-io/1"; "" when the record has
// no string schema of the form "zinf.<kind>/<version>".
std::string record_kind(const nlohmann::json& record);

// A scalar as text: integers in full, other numbers without e-notation (humane_number: 4 significant
// digits, K/M/B/T when large), booleans yes/no, null "-", strings as they are; arrays of scalars
// joined with ", "; other arrays and objects as compact JSON cut at 200 characters.
std::string value_text(const nlohmann::json& value);

// A field's value with the unit its name implies (humanise.h: quantity_of_key on the last path
// segment): "peak_bytes" 52.8 MiB, "probe_seconds" 1.45 s, "hit_rate" 100%; value_text otherwise.
std::string field_text(std::string_view path, const nlohmann::json& value);

// Every scalar leaf under `value` as (dotted path, text), depth first in document order, skipping
// keys in `skip` at the top level and arrays longer than 16 elements (those are series, drawn or
// tabled elsewhere), each as field_text. `prefix` is prepended to every path.
std::vector<std::pair<std::string, std::string>> scalar_leaves(const nlohmann::json& value,
                                                               const std::vector<std::string>& skip,
                                                               const std::string& prefix = "");

}  // namespace zinf::reports
