// Comparison of two records of the same kind (`zinf compare`): every metric found in both, judged
// as Google Benchmark's compare.py does — raw samples by the change of the median and a two-sided
// Mann-Whitney U test (mann_whitney.h), single values by the threshold alone.
//
// Metrics are found in the records, not listed here, so new fields are compared without new code:
//   - samples: an array of numbers ("zinf.step_ms"), or one numeric field over an array of objects
//     ("steps[].step_ms"; elements flagged "warmup": true are left out); arrays whose elements have
//     a "name" are followed per element ("tests[seq-read].samples[].gbps");
//   - single values: numbers outside arrays ("summary.final_loss").
// The input echo (scenario, input, generator, host, model, data, device, units, layout, checkpoint)
// is not a metric. A metric is compared only when its name says which way is better (metric_direction).
//
// Which records compare: the same "schema" string — kind and version ("zinf.train/1"); a record of
// another kind or version is refused, never read as if its fields meant the same — and the same
// scenario fingerprint unless CompareOptions::allow_different_scenarios.
//
// Every metric of the base must be judged: one the base has and the new record lacks (no steps,
// an empty summary, a test that did not run, a value that became null) gets the verdict "missing
// from the new record" and fails the comparison like a regression, unless the user excluded it
// (CompareOptions::exclude). A metric only the new record has is listed, "only in the new record",
// and fails nothing.
//
// Verdicts: "faster"/"slower" for times and rates, "better"/"worse" for other metrics (loss, bytes),
// "no change", "too few samples" (even complete separation could not reach alpha:
// smallest_p_value > alpha), "not judged" (a timing with one value per record: no spread to judge
// it against), "below noise floor" (a time in ms or seconds whose medians are both under
// CompareOptions::noise_floor_ms). A regression is "slower"/"worse": for samples, |median change| > threshold and
// p < alpha; for single values (never timings), |change| > threshold.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/core/status.h"
#include "reports/compare_conditions.h"
#include "reports/document.h"

namespace zinf::reports {

enum class Direction { kUnknown, kHigherIsBetter, kLowerIsBetter };

// From the metric's last name component: rates, throughput, FLOP/s, MFU, hit rates and ratios are
// better higher; times, latencies, losses, bytes, stalls and error counts better lower; anything
// else (step numbers, learning rates, counts of things) is not a metric.
Direction metric_direction(const std::string& name);

// True for metrics that measure time or speed (ms, seconds, GB/s, tokens/s, FLOP/s, MFU): their
// single values are not judged, and their verdicts read faster/slower.
bool is_timing_metric(const std::string& name);

struct CompareOptions {
  double threshold = 0.05;                 // relative change of the median, > 0
  double alpha = 0.05;                     // significance level of the U test, in (0, 1)
  bool allow_different_scenarios = false;  // compare records whose scenario fingerprints differ
  // Metrics left out of the comparison, by name as the metric table shows it ("steps[].step_ms");
  // a name also covers the metrics under it ("summary" covers "summary.final_loss", "tests[seq-read]"
  // its fields). Each must name a metric of either record.
  std::vector<std::string> exclude;
  // Times whose medians are both below this are not judged: on a shared host, scheduler and timer
  // jitter is tens of microseconds, so a 6 us phase "46% slower" is noise, not a regression.
  double noise_floor_ms = 0.1;
};

struct MetricComparison {
  std::string name;
  bool sampled = false;
  std::size_t base_count = 0;
  std::size_t new_count = 0;
  double base_median = 0;
  double new_median = 0;
  std::optional<double> change;   // (new - base) / |base|; nullopt when base is 0
  std::optional<double> p_value;  // sampled metrics with enough samples
  std::string verdict;
  bool regression = false;
  bool missing = false;   // in the base, not in the new record: fails the comparison
  bool new_only = false;  // in the new record only: listed, fails nothing
};

struct Comparison {
  std::string kind;
  std::string base_fingerprint;
  std::string new_fingerprint;
  std::vector<MetricComparison> metrics;
  bool regressed = false;   // any metric's regression
  std::size_t missing = 0;  // metrics of the base the new record lacks
  ConditionsComparison conditions;
  // The gate's outcome: a regression or a missing metric (`zinf compare` exits 3).
  bool failed() const { return regressed || missing > 0; }
};

// The scenario fingerprint of a record: FNV-1a (64 bit, hex) of the compact JSON of what it ran —
// "scenario" without its "output" block, or "input", or "config" with "ranks" (bench comm) — or ""
// when the record has none of them.
std::string scenario_fingerprint(const nlohmann::json& record);

// Compares `base` and `candidate`. InvalidArgument (one line) when either is not a zinf record, the
// schemas (kind or version) differ, the fingerprints differ without allow_different_scenarios, or
// an options.exclude name matches no metric of either record.
Result<Comparison> compare_records(const nlohmann::json& base, const nlohmann::json& candidate,
                                   const CompareOptions& options);

// The comparison as a document (summary fields with both sides' run conditions, the metric table, a
// chart of the changes) and as the payload of a zinf.compare/1 record: "regressed", "missing" (a
// count), "failed", "metrics" and "run_conditions" ({"base", "new", "differ", "explainable_change",
// "differences", "unknowns"}; the record's own "conditions" are the compare command's).
Document comparison_document(const Comparison& comparison, const CompareOptions& options,
                             const std::string& base_source, const std::string& new_source);
nlohmann::json comparison_json(const Comparison& comparison, const CompareOptions& options);

}  // namespace zinf::reports
