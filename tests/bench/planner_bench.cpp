// Planner micro-benchmarks on the DGX-2 profile: one make_plan() for a 1T model (81 placements and
// the explanation), a 112-point sweep (params=1B..100T x nodes=1..64, reported as points/s) and the
// max-params bisection for every strategy. The planner is pure computation, so these measure the
// search itself; a regression here makes `zinf plan --sweep` and `--max-params` feel slow.
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "planner/hardware_profile.h"
#include "planner/max_params.h"
#include "planner/planner.h"
#include "planner/shape_rule.h"
#include "planner/sweep.h"

namespace zinf::planner {
namespace {

// Benchmarks cannot continue on bad setup; say why and stop.
template <typename T>
T value_or_die(Result<T> result, const char* what) {
  if (!result.is_ok()) {
    std::fprintf(stderr, "planner_bench: %s: %s\n", what, result.status().message().c_str());
    std::exit(1);
  }
  return std::move(result).value();
}

PlanInput dgx2_input(std::uint64_t params) {
  PlanInput input;
  input.hardware = value_or_die(load_hardware_profile("dgx2-v100"), "dgx2-v100");
  input.shape = value_or_die(shape_for_params(params, kDefaultVocab, input.training.seq), "shape");
  input.requested_params = params;
  input.model_source = "bench";
  return input;
}

void BM_MakePlan_1T_dgx2(benchmark::State& state) {
  const PlanInput input = dgx2_input(1'000'000'000'000ULL);
  for (auto _ : state) {
    Result<Plan> plan = make_plan(input);
    benchmark::DoNotOptimize(plan);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MakePlan_1T_dgx2)->Unit(benchmark::kMicrosecond);

void BM_Sweep_1B_100T_x_1_64_nodes(benchmark::State& state) {
  const PlanInput base = dgx2_input(1'000'000'000ULL);
  const std::vector<SweepDimension> dimensions{
      value_or_die(parse_sweep_dimension("params=1B..100T", "--sweep"), "params"),
      value_or_die(parse_sweep_dimension("nodes=1..64", "--sweep"), "nodes")};
  std::size_t points = 0;
  for (auto _ : state) {
    Result<std::vector<SweepPoint>> result = run_sweep(base, dimensions);
    points = result.is_ok() ? result->size() : 0;
    benchmark::DoNotOptimize(result);
  }
  if (points != 16 * 7) state.SkipWithError("the sweep did not return 112 points");
  state.counters["points"] = static_cast<double>(points);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(points));
}
BENCHMARK(BM_Sweep_1B_100T_x_1_64_nodes)->Unit(benchmark::kMillisecond);

void BM_MaxParams_dgx2(benchmark::State& state) {
  const PlanInput base = dgx2_input(1'000'000'000ULL);
  const std::vector<Strategy> strategies(kAllStrategies.begin(), kAllStrategies.end());
  for (auto _ : state) {
    Result<std::vector<MaxParamsResult>> results = max_params_per_strategy(base, strategies);
    benchmark::DoNotOptimize(results);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(strategies.size()));
}
BENCHMARK(BM_MaxParams_dgx2)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace zinf::planner
