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
  force.force = true;
  CHECK(compare_records(base, moved, force).is_ok());
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
