#include "reports/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>

#include <fmt/format.h>

#include "reports/humanise.h"
#include "reports/mann_whitney.h"
#include "reports/record_fields.h"

namespace zinf::reports {
namespace {

using nlohmann::json;

// Subtrees that echo the input or describe the machine: not metrics.
const std::vector<std::string> kNotMetrics = {"scenario", "input", "generator", "host",       "model",  "data",
                                              "device",   "units", "layout",    "checkpoint", "schema", "conditions"};

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }
bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string last_component(const std::string& name) {
  const std::size_t cut = name.find_last_of(".]");
  return cut == std::string::npos ? name : name.substr(cut + 1);
}

struct Collected {
  std::map<std::string, std::vector<double>> samples;
  std::map<std::string, double> singles;
};

bool is_number(const json& v) { return v.is_number() && std::isfinite(v.get<double>()); }

void walk(const json& value, const std::string& path, Collected& out, int depth) {
  if (depth > 12) return;
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      if (depth == 0 && std::find(kNotMetrics.begin(), kNotMetrics.end(), key) != kNotMetrics.end()) continue;
      walk(child, path.empty() ? key : path + "." + key, out, depth + 1);
    }
    return;
  }
  if (value.is_array()) {
    if (value.empty()) return;
    bool numbers = true;
    for (const json& e : value) numbers = numbers && is_number(e);
    if (numbers) {
      std::vector<double>& s = out.samples[path];
      for (const json& e : value) s.push_back(e.get<double>());
      return;
    }
    // Elements with names are separate things (tests of a bench): follow each.
    bool named = true;
    for (const json& e : value) named = named && e.is_object() && e.contains("name") && e.at("name").is_string();
    if (named) {
      for (const json& e : value) walk(e, fmt::format("{}[{}]", path, e.at("name").get<std::string>()), out, depth + 1);
      return;
    }
    // Unnamed objects are repetitions of one measurement: each numeric field is a sample set.
    for (const json& e : value) {
      if (!e.is_object() || e.value("warmup", false)) continue;
      for (const auto& [key, field] : e.items()) {
        if (is_number(field)) out.samples[path + "[]." + key].push_back(field.get<double>());
      }
    }
    return;
  }
  if (is_number(value)) out.singles[path] = value.get<double>();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

std::string verdict_word(bool better, bool timing) {
  if (timing) return better ? "faster" : "slower";
  return better ? "better" : "worse";
}

std::string percent(double fraction) { return fmt::format("{:+.1f}%", fraction * 100.0); }

// Sets m.verdict and m.regression for a change that counts (significant where samples exist);
// `counts` false means "no change".
void judge(MetricComparison& m, Direction direction, bool timing, bool counts) {
  const double change = m.change.value_or(m.new_median == m.base_median ? 0.0 : 1.0);
  const bool better = direction == Direction::kHigherIsBetter ? change > 0 : change < 0;
  m.verdict = counts ? verdict_word(better, timing) : "no change";
  m.regression = counts && !better;
}

double change_of(const MetricComparison& m) { return m.change.value_or(m.new_median == m.base_median ? 0.0 : 1.0); }

// "zinf.train/1" -> "1"; "" when the schema has no version.
std::string schema_version(const json& record) {
  const std::string schema = string_at(record, "schema");
  const std::size_t slash = schema.find('/');
  return slash == std::string::npos ? std::string() : schema.substr(slash + 1);
}

// `name` is `prefix` or a metric under it ("summary" covers "summary.final_loss" and
// "tests[seq-read]" covers "tests[seq-read].gbps.median").
bool covers(const std::string& prefix, const std::string& name) {
  if (name.size() < prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return false;
  return name.size() == prefix.size() || name[prefix.size()] == '.' || name[prefix.size()] == '[';
}

bool excluded(const CompareOptions& options, const std::string& name) {
  return std::any_of(options.exclude.begin(), options.exclude.end(),
                     [&](const std::string& prefix) { return covers(prefix, name); });
}

// Every --exclude name must cover a judged metric of either record: a misspelt name would
// otherwise leave the metric it meant in the gate without a word.
Status check_excludes(const CompareOptions& options, const Collected& a, const Collected& b) {
  for (const std::string& prefix : options.exclude) {
    bool found = false;
    for (const Collected* c : {&a, &b}) {
      for (const auto& [name, values] : c->samples)
        found = found || (covers(prefix, name) && metric_direction(name) != Direction::kUnknown);
      for (const auto& [name, value] : c->singles)
        found = found || (covers(prefix, name) && metric_direction(name) != Direction::kUnknown);
    }
    if (!found) {
      return Status::invalid_argument(fmt::format(
          "--exclude: '{}' names no metric of either record; give a name from the metric column of the table "
          "(e.g. steps[].step_ms) or a prefix of one (e.g. summary)",
          prefix));
    }
  }
  return Status::ok();
}

MetricComparison missing_metric(const std::string& name, bool sampled, const std::vector<double>& base_values) {
  MetricComparison m;
  m.name = name;
  m.sampled = sampled;
  m.base_count = base_values.size();
  m.base_median = median(base_values);
  m.missing = true;
  m.verdict = "missing from the new record";
  return m;
}

MetricComparison new_only_metric(const std::string& name, bool sampled, const std::vector<double>& new_values) {
  MetricComparison m;
  m.name = name;
  m.sampled = sampled;
  m.new_count = new_values.size();
  m.new_median = median(new_values);
  m.new_only = true;
  m.verdict = "only in the new record";
  return m;
}

}  // namespace

Direction metric_direction(const std::string& name) {
  const std::string key = last_component(name);
  if (key == "loss_scale" || key == "lr" || key == "clip_coef" || key == "grad_norm") return Direction::kUnknown;
  for (const std::string_view higher : {"gbps", "per_s", "per_second", "flops", "mfu", "hit_rate", "_over_", "ratio"}) {
    if (contains(key, higher)) return Direction::kHigherIsBetter;
  }
  if (ends_with(key, "_ms") || ends_with(key, "seconds") || contains(key, "latenc") || contains(key, "loss") ||
      contains(key, "bytes") || contains(key, "stall") || contains(key, "wrong") || contains(key, "failures") ||
      contains(key, "mismatch") || key == "median" || key == "p10" || key == "p90" || key == "min" || key == "max" ||
      key == "mean" || key == "p50" || key == "p99") {
    // Percentile leaves take their direction from the object they summarise ("step_ms.median").
    if (key == "median" || key == "p10" || key == "p90" || key == "min" || key == "max" || key == "mean" ||
        key == "p50" || key == "p99") {
      const std::size_t dot = name.find_last_of('.');
      if (dot == std::string::npos || dot == 0) return Direction::kUnknown;
      return metric_direction(name.substr(0, dot));
    }
    return Direction::kLowerIsBetter;
  }
  return Direction::kUnknown;
}

bool is_timing_metric(const std::string& name) {
  for (const std::string_view part : {"_ms", "seconds", "latenc", "gbps", "per_s", "flops", "mfu", "stall", "ms."}) {
    if (contains(name, part)) return true;
  }
  return false;
}

std::string scenario_fingerprint(const json& record) {
  json what;
  if (record.contains("scenario") && record.at("scenario").is_object()) {
    what = record.at("scenario");
    what.erase("output");
  } else if (record.contains("input")) {
    what = record.at("input");
  } else if (record.contains("config")) {
    // bench comm: what it ran is its config and the ranks it ran on.
    what = {{"config", record.at("config")}, {"ranks", record.value("ranks", json(nullptr))}};
  } else {
    return "";
  }
  const std::string text = what.dump();
  std::uint64_t hash = 1469598103934665603ull;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return fmt::format("{:016x}", hash);
}

Result<Comparison> compare_records(const json& base, const json& candidate, const CompareOptions& options) {
  Comparison out;
  const std::string base_kind = record_kind(base);
  const std::string new_kind = record_kind(candidate);
  if (base_kind.empty() || new_kind.empty()) {
    return Status::invalid_argument(
        fmt::format("compare: the {} record has no zinf schema (\"schema\": \"zinf.<kind>/<n>\")",
                    base_kind.empty() ? "base" : "new"));
  }
  if (base_kind != new_kind) {
    return Status::invalid_argument(
        fmt::format("compare: cannot compare a {} record with a {} record; give two records of the same kind",
                    base_kind, new_kind));
  }
  // A field of another schema version may mean something else: refuse rather than compare it.
  const std::string base_schema = string_at(base, "schema");
  const std::string new_schema = string_at(candidate, "schema");
  if (schema_version(base) != schema_version(candidate)) {
    return Status::invalid_argument(fmt::format(
        "compare: the base record is {} and the new record {}: records of different schema versions are not "
        "compared (a field may have changed meaning); record the baseline again with the zinf that wrote the other",
        base_schema, new_schema));
  }
  // A run that failed midway or was stopped records the steps it completed: a partial run's
  // figures are no baseline and no candidate.
  for (const auto& [which, record] : {std::pair<const char*, const json*>{"base", &base}, {"new", &candidate}}) {
    const std::string status = string_at(*record, "status");
    if (status == "failed" || status == "stopped") {
      return Status::invalid_argument(
          fmt::format("compare: the {} record is of a run that {} ({}); compare completed runs", which,
                      status == "failed" ? "failed midway" : "was stopped before its end",
                      string_at(*record, "error", "no error recorded")));
    }
  }
  out.kind = base_kind;
  out.base_fingerprint = scenario_fingerprint(base);
  out.new_fingerprint = scenario_fingerprint(candidate);
  if (out.base_fingerprint != out.new_fingerprint && !options.allow_different_scenarios) {
    return Status::invalid_argument(fmt::format(
        "compare: the records ran different scenarios (fingerprints {} and {}); --allow-different-scenarios "
        "compares them anyway",
        out.base_fingerprint.empty() ? "none" : out.base_fingerprint,
        out.new_fingerprint.empty() ? "none" : out.new_fingerprint));
  }
  Collected a, b;
  walk(base, "", a, 0);
  walk(candidate, "", b, 0);
  ZINF_RETURN_IF_ERROR(check_excludes(options, a, b));
  const auto judged = [&](const std::string& name) {
    return metric_direction(name) != Direction::kUnknown && !excluded(options, name);
  };
  for (const auto& [name, base_samples] : a.samples) {
    const auto it = b.samples.find(name);
    const Direction direction = metric_direction(name);
    if (!judged(name)) continue;
    if (it == b.samples.end()) {
      out.metrics.push_back(missing_metric(name, true, base_samples));
      continue;
    }
    MetricComparison m;
    m.name = name;
    m.sampled = true;
    m.base_count = base_samples.size();
    m.new_count = it->second.size();
    m.base_median = median(base_samples);
    m.new_median = median(it->second);
    if (m.base_median != 0) m.change = (m.new_median - m.base_median) / std::abs(m.base_median);
    const bool timing = is_timing_metric(name);
    const double to_ms = ends_with(last_component(name), "_ms") ? 1.0 : ends_with(name, "seconds") ? 1e3 : 0.0;
    if (to_ms > 0 && std::abs(m.base_median) * to_ms < options.noise_floor_ms &&
        std::abs(m.new_median) * to_ms < options.noise_floor_ms) {
      m.verdict = fmt::format("below noise floor ({} ms)", format_figure(options.noise_floor_ms));
    } else if (smallest_p_value(m.base_count, m.new_count) > options.alpha) {
      m.verdict = "too few samples";
    } else {
      m.p_value = mann_whitney_u(base_samples, it->second).p_value;
      judge(m, direction, timing, *m.p_value < options.alpha && std::abs(change_of(m)) > options.threshold);
    }
    out.regressed = out.regressed || m.regression;
    out.metrics.push_back(std::move(m));
  }
  for (const auto& [name, base_value] : a.singles) {
    const auto it = b.singles.find(name);
    const Direction direction = metric_direction(name);
    if (!judged(name)) continue;
    if (it == b.singles.end()) {
      out.metrics.push_back(missing_metric(name, false, {base_value}));
      continue;
    }
    MetricComparison m;
    m.name = name;
    m.base_count = m.new_count = 1;
    m.base_median = base_value;
    m.new_median = it->second;
    if (base_value != 0) m.change = (it->second - base_value) / std::abs(base_value);
    const bool beyond = std::abs(change_of(m)) > options.threshold;
    if (is_timing_metric(name)) {
      m.verdict = beyond ? "not judged (one value, no spread)" : "no change";
    } else {
      judge(m, direction, false, beyond);
    }
    out.regressed = out.regressed || m.regression;
    out.metrics.push_back(std::move(m));
  }
  for (const auto& [name, new_samples] : b.samples) {
    if (judged(name) && a.samples.count(name) == 0) out.metrics.push_back(new_only_metric(name, true, new_samples));
  }
  for (const auto& [name, new_value] : b.singles) {
    if (judged(name) && a.singles.count(name) == 0) out.metrics.push_back(new_only_metric(name, false, {new_value}));
  }
  out.missing = static_cast<std::size_t>(
      std::count_if(out.metrics.begin(), out.metrics.end(), [](const MetricComparison& m) { return m.missing; }));
  out.conditions = compare_conditions(base, candidate, options.threshold);
  return out;
}

Document comparison_document(const Comparison& c, const CompareOptions& options, const std::string& base_source,
                             const std::string& new_source) {
  Document doc;
  doc.title = fmt::format("zinf compare: {} -> {}", base_source, new_source);
  Section summary;
  summary.title = "Verdict";
  std::size_t regressions = 0, improvements = 0;
  for (const MetricComparison& m : c.metrics) {
    regressions += m.regression ? 1 : 0;
    improvements += (m.verdict == "faster" || m.verdict == "better") ? 1 : 0;
  }
  std::string failure;
  if (c.regressed) failure = fmt::format("REGRESSED: {} metric{}", regressions, regressions == 1 ? "" : "s");
  if (c.missing > 0) {
    failure += fmt::format("{}MISSING: {} metric{} of the base not in the new record", failure.empty() ? "" : "; ",
                           c.missing, c.missing == 1 ? "" : "s");
  }
  summary.fields.emplace_back("verdict",
                              c.failed() ? Cell(failure, Emphasis::kBad) : Cell("no regression", Emphasis::kGood));
  summary.fields.emplace_back("improved", std::to_string(improvements));
  summary.fields.emplace_back("kind", c.kind);
  summary.fields.emplace_back("scenario fingerprints", c.base_fingerprint == c.new_fingerprint
                                                           ? Cell(c.base_fingerprint)
                                                           : Cell(fmt::format("{} vs {} (--allow-different-scenarios)",
                                                                              c.base_fingerprint, c.new_fingerprint),
                                                                  Emphasis::kWarn));
  if (!options.exclude.empty()) {
    std::string names;
    for (const std::string& e : options.exclude) names += (names.empty() ? "" : ", ") + e;
    summary.fields.emplace_back("excluded", Cell(names, Emphasis::kMuted));
  }
  summary.fields.emplace_back("base conditions", conditions_line(c.conditions.base));
  summary.fields.emplace_back("new conditions", conditions_line(c.conditions.candidate));
  if (c.conditions.differ()) {
    summary.fields.emplace_back(
        "conditions",
        Cell(fmt::format("DIFFER: they may explain a change of up to {:.1f}%; a verdict here may be the machine's",
                         c.conditions.explainable_change.value_or(0.0) * 100.0),
             Emphasis::kWarn));
    for (const std::string& d : c.conditions.differences) summary.notes.push_back("Conditions differ: " + d + ".");
  } else if (!c.conditions.base.is_object() || !c.conditions.candidate.is_object()) {
    summary.fields.emplace_back("conditions", Cell("UNKNOWN for one side or both", Emphasis::kWarn));
  } else {
    summary.fields.emplace_back("conditions", c.conditions.explainable_change
                                                  ? Cell(fmt::format("alike (could explain {:.1f}% at most)",
                                                                     *c.conditions.explainable_change * 100.0))
                                                  : Cell("alike where readable"));
  }
  for (const std::string& u : c.conditions.unknowns) summary.notes.push_back("Conditions: " + u + ".");
  summary.fields.emplace_back("threshold", fmt::format("{:.1f}% change of the median", options.threshold * 100.0));
  summary.fields.emplace_back("alpha", fmt::format("{} (two-sided Mann-Whitney U)", format_figure(options.alpha)));
  summary.fields.emplace_back(
      "noise floor", fmt::format("{} ms (shorter times are not judged)", format_figure(options.noise_floor_ms)));
  // The first few missing metrics by name; the table lists them all.
  constexpr std::size_t kMissingNotes = 5;
  std::size_t missing_noted = 0;
  for (const MetricComparison& m : c.metrics) {
    if (m.missing && missing_noted++ < kMissingNotes) {
      summary.notes.push_back(
          fmt::format("{} is missing from the new record (base median {}); --exclude {} leaves it out", m.name,
                      format_figure(m.base_median), m.name));
    }
    if (m.regression)
      summary.notes.push_back(fmt::format("{} regressed: {} ({} -> {})", m.name,
                                          m.change ? percent(*m.change) : std::string("changed"),
                                          format_figure(m.base_median), format_figure(m.new_median)));
  }
  if (c.missing > kMissingNotes) {
    summary.notes.push_back(
        fmt::format("... and {} more missing from the new record (see the metric table)", c.missing - kMissingNotes));
  }
  doc.sections.push_back(std::move(summary));

  Section metrics;
  metrics.title = "Metrics";
  metrics.table.columns = {{"metric"},
                           {"n base", Align::kRight},
                           {"n new", Align::kRight},
                           {"base median", Align::kRight},
                           {"new median", Align::kRight},
                           {"change", Align::kRight},
                           {"p-value", Align::kRight},
                           {"verdict"}};
  Chart chart;
  chart.title = "Median change of each sampled metric";
  chart.kind = ChartKind::kBar;
  chart.x_label = "metric";
  chart.y_label = "change, new vs base";
  chart.y_quantity = Quantity::kPercent;
  Series changes{"change %", {}, {}, false};
  for (const MetricComparison& m : c.metrics) {
    const Emphasis e = m.regression || m.missing                          ? Emphasis::kBad
                       : (m.verdict == "faster" || m.verdict == "better") ? Emphasis::kGood
                       : m.verdict == "no change"                         ? Emphasis::kNone
                                                                          : Emphasis::kMuted;
    metrics.table.rows.push_back({m.name, std::to_string(m.base_count), std::to_string(m.new_count),
                                  m.new_only ? std::string("-") : humane(m.base_median, quantity_of_key(m.name)),
                                  m.missing ? std::string("-") : humane(m.new_median, quantity_of_key(m.name)),
                                  m.change ? percent(*m.change) : std::string("-"),
                                  m.p_value ? fmt::format("{:.4f}", *m.p_value) : std::string("-"),
                                  Cell(m.verdict, e)});
    if (m.sampled && !m.missing && !m.new_only) {
      chart.categories.push_back(m.name);
      changes.y.push_back(m.change ? *m.change * 100.0 : std::nan(""));
    }
  }
  chart.series.push_back(std::move(changes));
  if (!chart.categories.empty()) metrics.charts.push_back(std::move(chart));
  metrics.notes.push_back(
      "Sampled metrics: change of the median and a two-sided Mann-Whitney U test (exact without ties up to 50 "
      "samples a side, normal approximation otherwise); a regression needs p < alpha and a change beyond the "
      "threshold. Single values: the threshold alone; timings with one value per record are not judged. A metric of "
      "the base missing from the new record fails the comparison unless --exclude names it.");
  doc.sections.push_back(std::move(metrics));
  return doc;
}

json comparison_json(const Comparison& c, const CompareOptions& options) {
  json metrics = json::array();
  for (const MetricComparison& m : c.metrics) {
    metrics.push_back({{"name", m.name},
                       {"sampled", m.sampled},
                       {"base_count", m.base_count},
                       {"new_count", m.new_count},
                       {"base_median", m.new_only ? json(nullptr) : json(m.base_median)},
                       {"new_median", m.missing ? json(nullptr) : json(m.new_median)},
                       {"change", m.change ? json(*m.change) : json(nullptr)},
                       {"p_value", m.p_value ? json(*m.p_value) : json(nullptr)},
                       {"verdict", m.verdict},
                       {"regression", m.regression},
                       {"missing", m.missing}});
  }
  json conditions = {
      {"base", c.conditions.base},
      {"new", c.conditions.candidate},
      {"differ", c.conditions.differ()},
      {"explainable_change", c.conditions.explainable_change ? json(*c.conditions.explainable_change) : json(nullptr)},
      {"differences", c.conditions.differences},
      {"unknowns", c.conditions.unknowns}};
  return {{"kind", c.kind},
          {"base_fingerprint", c.base_fingerprint},
          {"new_fingerprint", c.new_fingerprint},
          {"threshold", options.threshold},
          {"alpha", options.alpha},
          {"allow_different_scenarios", options.allow_different_scenarios},
          {"exclude", options.exclude},
          {"noise_floor_ms", options.noise_floor_ms},
          {"regressed", c.regressed},
          {"missing", c.missing},
          {"failed", c.failed()},
          {"run_conditions", std::move(conditions)},
          {"metrics", std::move(metrics)}};
}

}  // namespace zinf::reports
