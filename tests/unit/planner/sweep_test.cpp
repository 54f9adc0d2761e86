// Sweeps: parsing "key=values" dimensions (lists, ranges, steps) with errors that name the field
// and the bad text, and run_sweep's grid over sizes x nodes on a DGX-2.
#include "planner/sweep.h"

#include <cstdint>
#include <vector>

#include "planner/hardware_profile.h"
#include "planner/shape_rule.h"
#include "tests/catch.h"

namespace zinf::planner {
namespace {

using Values = std::vector<std::uint64_t>;

Values values_of(std::string_view text) {
  const Result<SweepDimension> dimension = parse_sweep_dimension(text, "--sweep");
  REQUIRE(dimension.is_ok());
  return dimension->values;
}

std::string error_of(std::string_view text) {
  const Result<SweepDimension> dimension = parse_sweep_dimension(text, "--sweep");
  REQUIRE_FALSE(dimension.is_ok());
  CHECK(dimension.status().code() == ErrorCode::kInvalidArgument);
  return dimension.status().message();
}

TEST_CASE("params=1B..100T is the 1-2-5 series") {
  const Result<SweepDimension> dimension = parse_sweep_dimension("params=1B..100T", "--sweep");
  REQUIRE(dimension.is_ok());
  CHECK(dimension->key == SweepKey::kParams);
  const Values expected{1'000'000'000ULL,      2'000'000'000ULL,      5'000'000'000ULL,      10'000'000'000ULL,
                        20'000'000'000ULL,     50'000'000'000ULL,     100'000'000'000ULL,    200'000'000'000ULL,
                        500'000'000'000ULL,    1'000'000'000'000ULL,  2'000'000'000'000ULL,  5'000'000'000'000ULL,
                        10'000'000'000'000ULL, 20'000'000'000'000ULL, 50'000'000'000'000ULL, 100'000'000'000'000ULL};
  CHECK(dimension->values.size() == 16);
  CHECK(dimension->values == expected);
  // Ends that are not on the series are kept: 3B, 5B, 10B, 20B, 50B, 70B.
  CHECK(values_of("params=3B..70B") == Values{3'000'000'000ULL, 5'000'000'000ULL, 10'000'000'000ULL, 20'000'000'000ULL,
                                              50'000'000'000ULL, 70'000'000'000ULL});
}

TEST_CASE("ranges, steps and lists of other keys") {
  CHECK(values_of("nodes=1..64") == Values{1, 2, 4, 8, 16, 32, 64});
  CHECK(values_of("nodes=1..10") == Values{1, 2, 4, 8, 10});  // x2, with the top end kept
  CHECK(values_of("nodes=1..10:+3") == Values{1, 4, 7, 10});
  CHECK(values_of("nodes=1..9:+3") == Values{1, 4, 7});  // a step never overshoots
  CHECK(values_of("nodes=1..100:x10") == Values{1, 10, 100});
  CHECK(values_of("nodes=3,1,2,2") == Values{1, 2, 3});  // sorted, deduplicated
  CHECK(values_of("nodes=8") == Values{8});
  CHECK(values_of("nodes=4..4") == Values{4});
  CHECK(values_of("micro-batch=1..8") == Values{1, 2, 4, 8});
  CHECK(values_of("params=1B,175B") == Values{1'000'000'000ULL, 175'000'000'000ULL});
  CHECK(parse_sweep_dimension("gpus-per-node=8", "--sweep")->key == SweepKey::kGpusPerNode);
  CHECK(parse_sweep_dimension("ckpt-interval=1,2", "--sweep")->key == SweepKey::kCkptInterval);
  CHECK(sweep_key_name(SweepKey::kMicroBatch) == "micro-batch");
}

TEST_CASE("parse_sweep_values for a known key") {
  const auto values = parse_sweep_values(SweepKey::kNodes, "1,2,4", "--nodes");
  REQUIRE(values.is_ok());
  CHECK(*values == Values{1, 2, 4});
  const auto bad = parse_sweep_values(SweepKey::kNodes, "1,x", "--nodes");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message().find("--nodes: 'x'") == 0);
}

TEST_CASE("bad sweep dimensions name the field and the bad text") {
  // No '='.
  std::string message = error_of("params");
  CHECK(message.find("--sweep: 'params' is not key=values") == 0);
  // Unknown key.
  message = error_of("layers=1..4");
  CHECK(message.find("--sweep: 'layers' is not a sweep key; keys: params, nodes") == 0);
  // Reversed range.
  message = error_of("nodes=64..1");
  CHECK(message == "--sweep nodes: range '64..1' runs backwards; write low..high");
  // Bad steps.
  message = error_of("nodes=1..64:x1");
  CHECK(message.find("--sweep nodes: step 'x1' is not valid") == 0);
  message = error_of("nodes=1..64:y2");
  CHECK(message.find("--sweep nodes: step 'y2' is not valid") == 0);
  message = error_of("nodes=1..64:+0");
  CHECK(message.find("--sweep nodes: step '+0' is not valid") == 0);
  message = error_of("nodes=1..64:x");
  CHECK(message.find("--sweep nodes: step 'x' is not valid") == 0);
  // Negative and empty values.
  message = error_of("nodes=-2..4");
  CHECK(message.find("--sweep nodes: '-2' is negative") == 0);
  message = error_of("nodes=");
  CHECK(message.find("--sweep nodes: '' is empty") == 0);
  message = error_of("params=-1B");
  CHECK(message.find("--sweep params: '-1B' is negative") == 0);
  message = error_of("nodes=1,,2");
  CHECK(message.find("--sweep nodes: '' is empty") == 0);
  message = error_of("nodes=0..4");
  CHECK(message.find("--sweep nodes: '0' is zero") == 0);
  message = error_of("params=1X..2B");
  CHECK(message.find("--sweep params: '1X'") == 0);
}

TEST_CASE("an empty step after ':' is an error, not the default step") {
  // "nodes=1..64:" has a ':' and no step: rejected like ':x', ':y2' and ':x1', not read as the
  // default x2 series.
  const Result<SweepDimension> dimension = parse_sweep_dimension("nodes=1..64:", "--sweep");
  REQUIRE_FALSE(dimension.is_ok());
  CHECK(dimension.status().message().find("--sweep nodes: step '' is not valid") == 0);
}

TEST_CASE("a multiplying step that would overflow 64 bits stops instead of wrapping") {
  // 1, 1e6, 1e12, 1e18 are the values of 1..18e18 in steps of x1e6; the next, 1e24, exceeds 2^64
  // and would wrap around (1e24 mod 2^64 < 18e18) if the loop multiplied before checking.
  const Result<SweepDimension> dimension = parse_sweep_dimension("params=1..18000000000000000000:x1000000", "--sweep");
  REQUIRE(dimension.is_ok());
  CHECK(dimension->values == Values{1ULL, 1'000'000ULL, 1'000'000'000'000ULL, 1'000'000'000'000'000'000ULL});
}

PlanInput dgx2_base() {
  PlanInput base;
  base.hardware = load_hardware_profile("dgx2-v100").value();
  base.shape = shape_for_params(1'000'000'000ULL, kDefaultVocab, base.training.seq).value();
  return base;
}

TEST_CASE("run_sweep over params=1B..100T x nodes=1..64 on a DGX-2") {
  const std::vector<SweepDimension> dimensions{parse_sweep_dimension("params=1B..100T", "--sweep").value(),
                                               parse_sweep_dimension("nodes=1..64", "--sweep").value()};
  const Result<std::vector<SweepPoint>> points = run_sweep(dgx2_base(), dimensions);
  REQUIRE(points.is_ok());
  REQUIRE(points->size() == 16 * 7);
  const Values& sizes = dimensions[0].values;
  const Values& nodes = dimensions[1].values;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    bool was_feasible = false;
    for (std::size_t j = 0; j < nodes.size(); ++j) {
      const SweepPoint& point = (*points)[i * nodes.size() + j];  // first dimension slowest
      INFO("params " << sizes[i] << " nodes " << nodes[j]);
      CHECK(point.input.requested_params == sizes[i]);
      CHECK(point.input.hardware.nodes == static_cast<std::int64_t>(nodes[j]));
      const double count = static_cast<double>(spec::count_parameters(point.input.shape).total);
      CHECK(std::fabs(count / static_cast<double>(sizes[i]) - 1.0) <= 0.02);
      // Feasibility is monotone in nodes: more nodes only spread partitioned states thinner.
      if (was_feasible) CHECK(point.feasible);
      was_feasible = was_feasible || point.feasible;
      if (point.feasible) {
        CHECK(point.prediction.step_seconds > 0);
        CHECK(point.worst_fraction <= 1.0);
      } else {
        CHECK(point.prediction.step_seconds == 0.0);
        CHECK(point.worst_fraction > 1.0);
      }
    }
  }
  // 1B fits one node; 1T fits one node (NVMe); 100T (2 PB of states) does not fit one node (29.5 TB).
  CHECK((*points)[0].feasible);
  CHECK((*points)[9 * 7].feasible);         // 1T, 1 node
  CHECK_FALSE((*points)[15 * 7].feasible);  // 100T, 1 node
}

TEST_CASE("run_sweep rejects an empty dimension and too many points") {
  std::vector<SweepDimension> dimensions{SweepDimension{SweepKey::kNodes, {}}};
  const auto empty = run_sweep(dgx2_base(), dimensions);
  REQUIRE_FALSE(empty.is_ok());
  CHECK(empty.status().message() == "sweep nodes: no values");

  Values many(1001);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = i + 1;
  dimensions = {SweepDimension{SweepKey::kNodes, many}, SweepDimension{SweepKey::kMicroBatch, many}};
  const auto too_many = run_sweep(dgx2_base(), dimensions);
  REQUIRE_FALSE(too_many.is_ok());
  CHECK(too_many.status().message().find("sweep: more than 1000000 points") == 0);
}

TEST_CASE("run_sweep over micro-batch keeps the shape and applies the value") {
  const std::vector<SweepDimension> dimensions{parse_sweep_dimension("micro-batch=1..4", "--sweep").value()};
  const PlanInput base = dgx2_base();
  const auto points = run_sweep(base, dimensions);
  REQUIRE(points.is_ok());
  REQUIRE(points->size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK((*points)[i].input.training.micro_batch == std::int64_t{1} << i);
    CHECK((*points)[i].input.shape.hidden == base.shape.hidden);
  }
  // Twice the tokens per GPU, twice the compute: a compute-bound 1B model's tokens/s stays the same
  // (16 GPUs * bsz * 1024 tokens per 8 * bsz * 1024 * P / 70e12 seconds).
  for (const SweepPoint& point : *points) {
    REQUIRE(point.feasible);
    CHECK(point.bottleneck == Resource::kCompute);
    const double p = static_cast<double>(spec::count_parameters(point.input.shape).total);
    // With every transfer hidden; the scheduled step adds the optimizer phase after the backward pass.
    const double tokens = 16.0 * static_cast<double>(point.input.training.micro_batch) * 1024;
    CHECK(tokens / point.prediction.step_seconds_full_overlap == Approx(16.0 * 70e12 / (8.0 * p)));
    CHECK(point.prediction.tokens_per_second == Approx(tokens / point.prediction.step_seconds));
  }
}

}  // namespace
}  // namespace zinf::planner
