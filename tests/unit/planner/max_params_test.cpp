// Largest model per strategy on one DGX-2 (16 x V100 32 GiB, 1.5 TB CPU memory, 28 TB NVMe),
// seq 1024, micro-batch 1, paper accounting (20 B/param). Every range below is derived by hand
// from the tier capacities; the search itself is not consulted for the expected values.
#include "planner/max_params.h"

#include <map>

#include "planner/hardware_profile.h"
#include "tests/catch.h"

namespace zinf::planner {
namespace {

constexpr double kGpuBytes = 32.0 * 1024 * 1024 * 1024;  // 34,359,738,368
constexpr double kCpuBytes = 1.5e12;
constexpr double kNvmeBytes = 28e12;

std::map<Strategy, MaxParamsResult> run_all() {
  PlanInput base;
  base.hardware = load_hardware_profile("dgx2-v100").value();
  base.training.seq = 1024;
  base.training.micro_batch = 1;
  const std::vector<Strategy> strategies(kAllStrategies.begin(), kAllStrategies.end());
  const auto results = max_params_per_strategy(base, strategies);
  REQUIRE(results.is_ok());
  REQUIRE(results->size() == strategies.size());
  std::map<Strategy, MaxParamsResult> by_strategy;
  for (std::size_t i = 0; i < strategies.size(); ++i) {
    CHECK((*results)[i].strategy == strategies[i]);  // in the order asked
    by_strategy[strategies[i]] = (*results)[i];
  }
  return by_strategy;
}

double max_of(const std::map<Strategy, MaxParamsResult>& results, Strategy strategy) {
  return static_cast<double>(results.at(strategy).max_params);
}

TEST_CASE("max params per strategy on one DGX-2") {
  const auto results = run_all();
  for (const auto& [strategy, result] : results) {
    INFO(strategy_name(strategy));
    CHECK_FALSE(result.at_search_limit);
    CHECK(result.max_params > 0);
    CHECK(result.max_params == spec::count_parameters(result.shape).total);
    CHECK_FALSE(result.limit.empty());
  }
  const double dp = max_of(results, Strategy::kDataParallel);
  const double zero2 = max_of(results, Strategy::kZero2);
  const double offload = max_of(results, Strategy::kZeroOffload);
  const double zero3 = max_of(results, Strategy::kZero3);
  const double zinf_cpu = max_of(results, Strategy::kInfinityCpu);
  const double zinf_nvme = max_of(results, Strategy::kInfinityNvme);
  const double automatic = max_of(results, Strategy::kAuto);

  // Data parallel: every GPU holds 20 B/param, whatever the GPU count; working memory for a ~1.7B
  // model (hd ~2.5k, ~20 layers) is ~0.2 GB: (32 GiB - 0.2 GB) / 20 ~ 1.71B, never above 32 GiB / 20.
  CHECK(dp > 1.5e9);
  CHECK(dp < kGpuBytes / 20);  // 1,717,986,918

  // ZeRO-2: half parameters replicated (2 B/param) plus gradients and optimizer states partitioned
  // over 16 GPUs (18/16 B/param): 3.125 B/param per GPU, (32 GiB - ~0.5 GB) / 3.125 ~ 10.8B.
  CHECK(zero2 > 9.5e9);
  CHECK(zero2 < kGpuBytes / 3.125);  // 10,995,116,277

  // ZeRO-Offload: the half parameters stay replicated on every GPU (2 B/param), the rest goes to CPU
  // (18 B/param < 1.5 TB up to 83B): (32 GiB - ~0.7 GB of checkpoints and working memory) / 2 ~ 16.8B.
  CHECK(offload > 15e9);
  CHECK(offload < kGpuBytes / 2);  // 17,179,869,184

  // ZeRO-3: 20 B/param spread over 16 GPUs plus ~1.5 GB working memory per GPU:
  // 16 * (32 GiB - 1.5 GB) / 20 ~ 26.3B, below 16 * 32 GiB / 20 = 27.5B.
  CHECK(zero3 > 24e9);
  CHECK(zero3 < 16 * kGpuBytes / 20);

  // ZeRO-Infinity CPU: all 20 B/param in 1.5 TB of CPU memory (checkpoints fit on the GPUs): 75B.
  CHECK(zinf_cpu > 70e9);
  CHECK(zinf_cpu <= kCpuBytes / 20);

  // ZeRO-Infinity NVMe: params + optimizer (18 B/param) on 28 TB of NVMe; above 750B the 2 B/param
  // of gradients no longer fit 1.5 TB of CPU memory and go to NVMe too: 28 TB / 20 = 1.4T.
  // The paper's headline: at least 1T parameters on a single DGX-2.
  CHECK(zinf_nvme >= 1e12);
  CHECK(zinf_nvme > 1.3e12);
  CHECK(zinf_nvme <= kNvmeBytes / 20);

  // Auto may use every tier, so it holds at least what zinf-nvme holds (within the 0.1% bisection
  // and ~1% shape-rule granularity), and at most all tiers together: (28 TB + 1.5 TB + 550 GB) / 20.
  CHECK(automatic >= 0.98 * zinf_nvme);
  CHECK(automatic <= (kNvmeBytes + kCpuBytes + 16 * kGpuBytes) / 20);

  // The order the tier capacities force.
  CHECK(dp < zero2);
  CHECK(zero2 < offload);
  CHECK(dp < offload);
  CHECK(offload < zero3);
  CHECK(zero3 < zinf_cpu);
  CHECK(zinf_cpu < zinf_nvme);

  // What stops each one.
  CHECK(results.at(Strategy::kDataParallel).limit.find("gpu memory") != std::string::npos);
  CHECK(results.at(Strategy::kZero3).limit.find("gpu memory") != std::string::npos);
  CHECK(results.at(Strategy::kInfinityCpu).limit.find("cpu memory") != std::string::npos);
  CHECK(results.at(Strategy::kInfinityNvme).limit.find("nvme") != std::string::npos);
  // And where the states went.
  CHECK(results.at(Strategy::kInfinityNvme).placement[spec::StateKind::kOptimizer] == spec::Tier::kNvme);
  CHECK(results.at(Strategy::kZero3).placement[spec::StateKind::kOptimizer] == spec::Tier::kDevice);
}

TEST_CASE("max params scales with nodes for the partitioned strategies") {
  PlanInput base;
  base.hardware = load_hardware_profile("dgx2-v100").value();
  const auto one = max_params_per_strategy(base, {Strategy::kDataParallel, Strategy::kZero3});
  base.hardware.nodes = 4;
  const auto four = max_params_per_strategy(base, {Strategy::kDataParallel, Strategy::kZero3});
  REQUIRE(one.is_ok());
  REQUIRE(four.is_ok());
  // Data parallelism replicates: more nodes hold no bigger model (same answer up to bisection noise).
  CHECK(static_cast<double>((*four)[0].max_params) == Approx(static_cast<double>((*one)[0].max_params)).epsilon(0.02));
  // ZeRO-3 partitions over 64 GPUs instead of 16: roughly 4x (a bit less: working memory grows with size).
  const double ratio = static_cast<double>((*four)[1].max_params) / static_cast<double>((*one)[1].max_params);
  CHECK(ratio > 3.5);
  CHECK(ratio < 4.05);
}

TEST_CASE("max params rejects invalid training input") {
  PlanInput base;
  base.hardware = load_hardware_profile("dgx2-v100").value();
  base.training.seq = 0;
  const auto results = max_params_per_strategy(base, {Strategy::kAuto});
  REQUIRE_FALSE(results.is_ok());
  CHECK(results.status().code() == ErrorCode::kInvalidArgument);
  CHECK(results.status().message().find("training.seq") == 0);
}

}  // namespace
}  // namespace zinf::planner
