// Internal to reports/: the pieces the per-kind report builders (train_report.cpp,
// bench_report.cpp, plan_report.cpp, record_report.cpp) share. Not installed API.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/document.h"
#include "reports/record_fields.h"

namespace zinf::reports::detail {

// The record section: schema, created_at, generator version/SHA, host.
Section envelope_section(const nlohmann::json& record, const std::string& heading);

// "Other fields": every scalar leaf of `record` outside `used` (dotted paths: "summary" hides the
// whole object, "engine.links" one member; the envelope is always hidden). Numbers are written with
// the unit their key names (humanise.h: quantity_of_key). Empty (no fields) when nothing is left.
Section other_fields_section(const nlohmann::json& record, const std::vector<std::string>& used,
                             const std::string& heading);

// A table of an array of objects: one column per key (first-seen order, at most 12), one row per
// element, values via value_text; numeric columns right-aligned. A "name" or "id" column that names
// every element uniquely goes first and keys the rows (Table::first_column_is_key); otherwise the
// table is keyed by row number.
Table objects_table(const nlohmann::json& array);

// Section "<heading> — <title>" helper.
Section titled(const std::string& heading, std::string_view title);

// Text of an optional number with a formatter, "-" when absent.
std::string or_dash(const std::optional<double>& value, std::string (*format)(double));

// `bytes` in GiB, for chart axes.
inline double gib(double bytes) { return bytes / 1073741824.0; }

// Renders ratio spread fields written by the benchmarks ({"low", "high", "too_wide", "rule"}) as
// "0.93 (0.88..0.97)" with a warning emphasis and suffix when too wide; `ratio` alone when absent.
Cell ratio_cell(const nlohmann::json& ratio, const nlohmann::json* spread);

// The record's consistency flags ({"consistent": false, "issues": [...]}) as a section of kBad
// fields; no section when absent or consistent.
std::optional<Section> consistency_section(const nlohmann::json& record, const std::string& heading);

// The plan-vs-measured sections of a train record (its "plan" object: the rows as a table, then the
// hardware, settings and memory items the plan assumed; none without rows), and its engine counters
// (engine.* objects except links); each appends the paths it shows to `used`.
std::vector<Section> train_plan_sections(const nlohmann::json& record, const std::string& heading,
                                         std::vector<std::string>& used);
Section train_engine_section(const nlohmann::json& record, const std::string& heading, std::vector<std::string>& used);

std::vector<Section> train_sections(const nlohmann::json& record, const std::string& heading);
std::vector<Section> bench_io_sections(const nlohmann::json& record, const std::string& heading);
std::vector<Section> bench_train_sections(const nlohmann::json& record, const std::string& heading);
std::vector<Section> bench_suite_sections(const nlohmann::json& record, const std::string& heading);
std::vector<Section> bench_scaling_sections(const nlohmann::json& record, const std::string& heading);
std::vector<Section> bench_peers_sections(const nlohmann::json& record, const std::string& heading);
std::vector<Section> plan_sections(const nlohmann::json& record, const std::string& heading);
std::vector<Section> plan_sweep_sections(const nlohmann::json& record, const std::string& heading);
std::vector<Section> generic_sections(const nlohmann::json& record, const std::string& heading);

}  // namespace zinf::reports::detail
