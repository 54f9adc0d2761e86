// Whether two records were measured under conditions that differ enough to explain a change
// (`zinf compare`): the rule over the records' "conditions" (run_conditions.h).
//
// The rule. A change the gate counts is a relative change beyond --threshold; conditions "differ
// enough to explain" one when they could move a CPU-bound time by more than that:
//   - load: with L runnable tasks per core besides zinf, zinf's threads get about 1 / (1 + L) of
//     the cores, so the same work takes (1 + L) times as long. Load per core is the 1-minute load
//     average over "cores"; when (1 + L_new) / (1 + L_base) differs from 1 by more than the
//     threshold — at the start (load_avg_1m_before: other processes only) or at the record
//     (load_avg_1m_after: includes zinf's own threads, alike on both sides when the same scenario
//     ran for as long) — the load alone could explain the change;
//   - steal: CPU time the hypervisor gave to other guests is time zinf did not run, so steal
//     percentages that differ by more than the threshold (in points of CPU time) explain as much;
//   - cores or frequency governor that differ ("powersave" against "performance") change the
//     machine itself: always reported.
// The 1-minute load average lags (a run that just ended still counts in it for a minute), so the
// rule says "may explain", not "explains": it warns and never changes the verdict or exit code.
// A record without "conditions" (written before zinf recorded them) has unknown conditions; a
// null value in one is "not readable" there; either way that part of the rule is not applied and
// the report says so.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zinf::reports {

struct ConditionsComparison {
  nlohmann::json base;       // the base record's "conditions", or null when it has none
  nlohmann::json candidate;  // the new record's
  // The largest relative change of a CPU-bound time the differences could explain (load and
  // steal); nullopt when neither could be judged.
  std::optional<double> explainable_change;
  std::vector<std::string> differences;  // each reason they differ enough, one sentence each
  std::vector<std::string> unknowns;     // what could not be judged and why
  bool differ() const { return !differences.empty(); }
};

// Applies the rule above with `threshold` (CompareOptions::threshold, > 0). Never fails: values
// of the wrong type count as not readable.
ConditionsComparison compare_conditions(const nlohmann::json& base, const nlohmann::json& candidate, double threshold);

// One line for a record's conditions: "load 0.42 at the start, 1.90 at the record (1-min average) on
// 16 cores, steal 0.3%, governor performance", "not readable" for null values, "unknown (...)" for
// a record without them.
std::string conditions_line(const nlohmann::json& conditions);

}  // namespace zinf::reports
