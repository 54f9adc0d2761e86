// compare_records on fixtures: a rerun is no change, a 20% slower copy regresses, kinds must match.
#include "reports/compare.h"

#include <fstream>

#include "tests/catch.h"
#include "tests/unit/reports/fixture.h"

namespace zinf::reports {
namespace {

using nlohmann::json;

using test::fixture;

const MetricComparison* metric(const Comparison& c, const std::string& name) {
  for (const MetricComparison& m : c.metrics) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

TEST_CASE("compare: the same scenario run twice is no regression", "[compare]") {
  const Result<Comparison> c = compare_records(fixture("train.json"), fixture("train-rerun.json"), {});
  REQUIRE(c.is_ok());
  CHECK_FALSE(c->regressed);
  CHECK(c->missing == 0);
  CHECK_FALSE(c->failed());
  const MetricComparison* loss = metric(*c, "steps[].loss");
  REQUIRE(loss != nullptr);
  CHECK(loss->verdict == "no change");  // same seed: the same losses
  CHECK(loss->p_value.value_or(0) == 1.0);
}

TEST_CASE("compare: steps 20% slower regress, named per metric", "[compare]") {
  const Result<Comparison> c = compare_records(fixture("train.json"), fixture("train-slower.json"), {});
  REQUIRE(c.is_ok());
  CHECK(c->regressed);
  const MetricComparison* step = metric(*c, "steps[].step_ms");
  REQUIRE(step != nullptr);
  CHECK(step->verdict == "slower");
  CHECK(step->regression);
  CHECK(step->change.value_or(0) == Approx(0.2));
  CHECK(step->base_count == 22);  // 24 steps less the warm-up
  const MetricComparison* rate = metric(*c, "steps[].tokens_per_s");
  REQUIRE(rate != nullptr);
  CHECK(rate->verdict == "slower");
  // The same copy judged the other way round is faster.
  const Result<Comparison> back = compare_records(fixture("train-slower.json"), fixture("train.json"), {});
  REQUIRE(back.is_ok());
  CHECK_FALSE(back->regressed);
  CHECK(metric(*back, "steps[].step_ms")->verdict == "faster");
}

TEST_CASE("compare: a threshold above the change means no regression", "[compare]") {
  CompareOptions options;
  options.threshold = 0.25;
  const Result<Comparison> c = compare_records(fixture("train.json"), fixture("train-slower.json"), options);
  REQUIRE(c.is_ok());
  CHECK_FALSE(c->regressed);
}

TEST_CASE("compare: too few samples, single values, kinds and fingerprints", "[compare]") {
  json base = {
      {"schema", "zinf.bench-x/1"}, {"input", {{"size", 1}}}, {"run_ms", {1.0, 1.1, 1.2}}, {"peak_bytes", 100}};
  json slower = base;
  slower["run_ms"] = {2.0, 2.1, 2.2};
  slower["peak_bytes"] = 120;
  const Result<Comparison> c = compare_records(base, slower, {});
  REQUIRE(c.is_ok());
  CHECK(metric(*c, "run_ms")->verdict == "too few samples");  // 3 vs 3: p >= 0.1
  CHECK(metric(*c, "peak_bytes")->verdict == "worse");        // +20% bytes, by threshold
  CHECK(c->regressed);

  json other = base;
  other["schema"] = "zinf.bench-y/1";
  const Result<Comparison> kinds = compare_records(base, other, {});
  REQUIRE_FALSE(kinds.is_ok());
  CHECK(kinds.status().message().find("cannot compare a bench-x record with a bench-y record") != std::string::npos);

  json moved = base;
  moved["input"]["size"] = 2;
  REQUIRE_FALSE(compare_records(base, moved, {}).is_ok());
  CompareOptions force;
  force.allow_different_scenarios = true;
  CHECK(compare_records(base, moved, force).is_ok());
}

TEST_CASE("compare: a new record with no steps and an empty summary fails, metric by metric", "[compare]") {
  const json base = fixture("train.json");
  json empty = base;
  empty["steps"] = json::array();
  empty["summary"] = json::object();
  const Result<Comparison> c = compare_records(base, empty, {});
  REQUIRE(c.is_ok());
  CHECK(c->failed());
  CHECK_FALSE(c->regressed);  // nothing got slower: it is missing
  const MetricComparison* step = metric(*c, "steps[].step_ms");
  REQUIRE(step != nullptr);
  CHECK(step->missing);
  CHECK(step->verdict == "missing from the new record");
  CHECK(step->base_count == 22);
  CHECK(step->new_count == 0);
  const MetricComparison* loss = metric(*c, "summary.final_loss");
  REQUIRE(loss != nullptr);
  CHECK(loss->missing);
  // Every judged metric of the two subtrees is counted.
  std::size_t expected = 0;
  for (const MetricComparison& m : c->metrics) expected += m.missing ? 1 : 0;
  CHECK(c->missing == expected);
  CHECK(comparison_json(*c, {}).at("failed") == true);

  // Excluded by name (a prefix covers the metrics under it), they no longer fail the gate.
  CompareOptions options;
  options.exclude = {"steps", "summary"};
  const Result<Comparison> excluded = compare_records(base, empty, options);
  REQUIRE(excluded.is_ok());
  CHECK_FALSE(excluded->failed());
  CHECK(metric(*excluded, "steps[].step_ms") == nullptr);
  // Only the loss excluded: the step times still fail.
  options.exclude = {"summary", "steps[].loss"};
  const Result<Comparison> partly = compare_records(base, empty, options);
  REQUIRE(partly.is_ok());
  CHECK(partly->failed());
  CHECK(metric(*partly, "steps[].loss") == nullptr);
  CHECK(metric(*partly, "steps[].step_ms")->missing);

  // A value that became null is missing too; a metric only the new record has fails nothing.
  json nulled = base;
  nulled["summary"]["final_loss"] = nullptr;
  nulled["summary"]["extra_ms"] = 3.0;
  const Result<Comparison> n = compare_records(base, nulled, {});
  REQUIRE(n.is_ok());
  CHECK(n->missing == 1);
  CHECK(metric(*n, "summary.final_loss")->missing);
  CHECK(metric(*n, "summary.extra_ms")->new_only);
  CHECK_FALSE(metric(*n, "summary.extra_ms")->regression);
}

TEST_CASE("compare: an exclude that names no metric is refused", "[compare]") {
  CompareOptions options;
  options.exclude = {"steps[].step_sm"};
  const Result<Comparison> c = compare_records(fixture("train.json"), fixture("train-rerun.json"), options);
  REQUIRE_FALSE(c.is_ok());
  CHECK(c.status().code() == ErrorCode::kInvalidArgument);
  CHECK(c.status().message().find("--exclude: 'steps[].step_sm' names no metric") != std::string::npos);
}

TEST_CASE("compare: bench comm records at different world sizes are different scenarios", "[compare]") {
  const json two = {{"schema", "zinf.bench-comm/1"},
                    {"ranks", {{"world_size", 2}, {"local_size", 2}}},
                    {"config", {{"dtype", "fp32"}, {"max_bytes", 1048576}}},
                    {"busbw_ratio_from_1MiB", {{"median", 1.0}}}};
  json four = two;
  four["ranks"]["world_size"] = 4;
  CHECK(scenario_fingerprint(two) != "");
  CHECK(compare_records(two, two, {}).is_ok());
  const Result<Comparison> c = compare_records(two, four, {});
  REQUIRE_FALSE(c.is_ok());
  CHECK(c.status().message().find("ran different scenarios") != std::string::npos);
}

TEST_CASE("compare: records of different schema versions are refused", "[compare]") {
  const json base = fixture("train.json");
  json newer = fixture("train-rerun.json");
  newer["schema"] = "zinf.train/2";
  for (const auto& [a, b] : {std::pair<const json*, const json*>{&base, &newer}, {&newer, &base}}) {
    const Result<Comparison> c = compare_records(*a, *b, {});
    REQUIRE_FALSE(c.is_ok());
    CHECK(c.status().code() == ErrorCode::kInvalidArgument);
    CHECK(c.status().message().find("different schema versions") != std::string::npos);
    CHECK(c.status().message().find("zinf.train/2") != std::string::npos);
  }
  // --allow-different-scenarios does not lift it: it is about scenarios, not schemas.
  CompareOptions options;
  options.allow_different_scenarios = true;
  CHECK_FALSE(compare_records(base, newer, options).is_ok());
}

json conditions(double load_before, double load_after, int cores, double steal, const char* governor) {
  return {{"load_avg_1m_before", load_before},
          {"load_avg_1m_after", load_after},
          {"steal_percent", steal},
          {"cores", cores},
          {"governor", governor},
          {"interval_seconds", 10.0}};
}

TEST_CASE("compare: run conditions that differ enough to explain a change are flagged", "[compare]") {
  json base = fixture("train.json");
  json rerun = fixture("train-rerun.json");
  base["conditions"] = conditions(0.2, 2.2, 2, 0.0, "performance");
  rerun["conditions"] = conditions(0.2, 2.2, 2, 0.0, "performance");
  const Result<Comparison> alike = compare_records(base, rerun, {});
  REQUIRE(alike.is_ok());
  CHECK_FALSE(alike->conditions.differ());
  CHECK(alike->conditions.explainable_change.value_or(-1) == Approx(0.0));
  CHECK(alike->conditions.unknowns.empty());

  // 0.1 -> 0.6 runnable tasks per core at the start: (1 + 0.6) / (1 + 0.1) - 1 = 45% of the CPU.
  rerun["conditions"] = conditions(1.2, 2.2, 2, 0.0, "performance");
  const Result<Comparison> loaded = compare_records(base, rerun, {});
  REQUIRE(loaded.is_ok());
  CHECK(loaded->conditions.differ());
  CHECK(loaded->conditions.explainable_change.value_or(0) == Approx(1.6 / 1.1 - 1.0));
  CHECK_FALSE(loaded->failed());  // a warning, not a verdict
  const json out = comparison_json(*loaded, {});
  CHECK(out.at("run_conditions").at("differ") == true);
  CHECK(out.at("run_conditions").at("base") == base["conditions"]);

  // Below the threshold: 0.10 -> 0.12 per core is 1.8%.
  rerun["conditions"] = conditions(0.24, 2.2, 2, 0.0, "performance");
  CHECK_FALSE(compare_records(base, rerun, {})->conditions.differ());
  // Steal 0% -> 8% of the CPU time, cores 2 -> 4 and the governor each differ.
  rerun["conditions"] = conditions(0.2, 2.2, 2, 8.0, "performance");
  CHECK(compare_records(base, rerun, {})->conditions.explainable_change.value_or(0) == Approx(0.08));
  CHECK(compare_records(base, rerun, {})->conditions.differ());
  rerun["conditions"] = conditions(0.2, 2.2, 2, 0.0, "powersave");
  CHECK(compare_records(base, rerun, {})->conditions.differ());

  // A value not readable on one side is not judged, and said so.
  rerun["conditions"] = conditions(0.2, 2.2, 2, 0.0, "performance");
  rerun["conditions"]["steal_percent"] = nullptr;
  const Result<Comparison> partial = compare_records(base, rerun, {});
  CHECK_FALSE(partial->conditions.differ());
  REQUIRE(partial->conditions.unknowns.size() == 1);
  CHECK(partial->conditions.unknowns[0].find("steal (new side)") != std::string::npos);

  // An old record without conditions still compares; its conditions are unknown.
  json old = fixture("train.json");
  const Result<Comparison> unknown = compare_records(old, rerun, {});
  REQUIRE(unknown.is_ok());
  CHECK_FALSE(unknown->conditions.differ());
  REQUIRE(unknown->conditions.unknowns.size() == 1);
  CHECK(unknown->conditions.unknowns[0].find("base record has no run conditions") != std::string::npos);
  const Document doc = comparison_document(*unknown, {}, "old.json", "new.json");
  bool shown = false;
  for (const auto& [key, cell] : doc.sections.front().fields) {
    shown = shown || (key == "base conditions" && cell.text.find("unknown") != std::string::npos);
  }
  CHECK(shown);
}

TEST_CASE("compare: metric directions from names", "[compare]") {
  CHECK(metric_direction("steps[].step_ms") == Direction::kLowerIsBetter);
  CHECK(metric_direction("tests[seq-read].gbps.median") == Direction::kHigherIsBetter);
  CHECK(metric_direction("summary.step_ms.p90") == Direction::kLowerIsBetter);
  CHECK(metric_direction("summary.final_loss") == Direction::kLowerIsBetter);
  CHECK(metric_direction("steps[].loss_scale") == Direction::kUnknown);
  CHECK(metric_direction("steps[].lr") == Direction::kUnknown);
  CHECK(metric_direction("zinf.tokens_per_s_per_repetition") == Direction::kHigherIsBetter);
}

}  // namespace
}  // namespace zinf::reports
