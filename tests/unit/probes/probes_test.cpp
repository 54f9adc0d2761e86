// The measuring harness called as a library (zinf::probes), each probe at a tiny size. No timing is
// asserted: rates must be positive and finite, counts must agree with the configuration, and the
// statistics (percentiles, spread, ratios, the hardware profile's figures) must equal values
// computed by hand from the inputs.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/device/device_factory.h"
#include "libengine/io/swap_store.h"
#include "libengine/spec/scenario.h"
#include "planner/hardware_profile.h"
#include "probes/block_kernel_probe.h"
#include "probes/compute_peak.h"
#include "probes/fio_runner.h"
#include "probes/hw_profile_probe.h"
#include "probes/io_bench_runner.h"
#include "probes/latency_stats.h"
#include "probes/machine_probes.h"
#include "probes/offload_bench.h"
#include "probes/process.h"
#include "probes/ratio_spread.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::probes {
namespace {

using nlohmann::json;

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = 1024 * kKiB;

bool positive_finite(double v) { return std::isfinite(v) && v > 0; }

// Two layers, hidden 32: trains in milliseconds.
json tiny_scenario_json() {
  return json{{"model", {{"layers", 2}, {"hidden", 32}, {"heads", 4}, {"vocab", 64}}},
              {"data", {{"source", "markov"}, {"successors", 4}, {"skew", 1.0}}},
              {"batch", 2},
              {"seq", 16},
              {"steps", 3},
              {"seed", 3},
              {"threads", 1}};
}

spec::Scenario parsed(const json& document) {
  Result<spec::Scenario> scenario = spec::parse_scenario(document, "probes_test.json", {});
  INFO(scenario.status().message());
  REQUIRE(scenario.is_ok());
  return std::move(scenario).value();
}

TEST_CASE("probes: latency statistics against hand-computed percentiles") {
  // Sorted 1, 2, 3, 4: p50 at rank 1.5 = 2.5; p90 at rank 2.7 = 3 + 0.7 = 3.7; p99 at 2.97 = 3.97.
  const std::vector<double> values{4, 1, 3, 2};
  const LatencySummary s = summarize_latencies(values);
  CHECK(s.count == 4);
  CHECK(s.mean == Approx(2.5));
  CHECK(s.p50 == Approx(2.5));
  CHECK(s.p90 == Approx(3.7));
  CHECK(s.p99 == Approx(3.97));
  CHECK(s.max == 4);
  const std::vector<double> sorted{1, 2, 3, 4};
  CHECK(percentile_of_sorted(sorted, 0) == 1);
  CHECK(percentile_of_sorted(sorted, 100) == 4);
  CHECK(percentile_of_sorted(sorted, 25) == Approx(1.75));
  const SampleSpread spread = spread_of(std::vector<double>{5, 1, 3});
  CHECK(spread.median == 3);
  CHECK(spread.min == 1);
  CHECK(spread.max == 5);
  const SampleSpread none = spread_of(std::vector<double>{});
  CHECK((none.median == 0 && none.min == 0 && none.max == 0));
  CHECK(summarize_latencies(std::vector<double>{}).count == 0);
}

TEST_CASE("probes: ratio and spread against closed forms") {
  CHECK(relative_spread(std::vector<double>{8, 10, 12}) == Approx(0.4));  // (12 - 8) / 10
  CHECK(relative_spread(std::vector<double>{7}) == 0);
  CHECK(relative_spread(std::vector<double>{-1, 0, 1}) == 0);  // zero median
  const std::vector<double> zinf{2, 2.1, 2.2}, base{1, 1.05, 1.1};
  const json r = ratio_with_spread(zinf, base);
  CHECK(r.at("value").get<double>() == Approx(2.1 / 1.05));
  CHECK(r.at("low").get<double>() == Approx(2.0 / 1.1));
  CHECK(r.at("high").get<double>() == Approx(2.2 / 1.0));
  CHECK(r.at("zinf_spread").get<double>() == Approx(0.2 / 2.1));
  CHECK(r.at("baseline_spread").get<double>() == Approx(0.1 / 1.05));
  CHECK_FALSE(r.at("too_wide").get<bool>());
  CHECK(r.at("rule").get<std::string>() == kSpreadRule);
  const std::vector<double> with_zero{0, 1};
  CHECK(ratio_with_spread(zinf, with_zero).at("value").is_null());
}

TEST_CASE("probes: machine probes at a tiny size give positive finite rates") {
  MachineProbes probes(MachineProbeSizes{std::size_t{1} << 18, std::size_t{1} << 16, 96});
  for (int sample = 0; sample < 2; ++sample) {  // the second call reuses the buffers
    const Result<ProbeSample> memory = probes.memory_bandwidth();
    REQUIRE(memory.is_ok());
    CHECK(positive_finite(memory->zinf));
    CHECK(positive_finite(memory->baseline));
    const Result<ProbeSample> matmul = probes.matmul_fp32();
    INFO(matmul.status().message());
    REQUIRE(matmul.is_ok());
    CHECK(positive_finite(matmul->zinf));
    CHECK(positive_finite(matmul->baseline));
    const Result<ProbeSample> adam = probes.cpu_adam();
    REQUIRE(adam.is_ok());
    CHECK(positive_finite(adam->zinf));
    CHECK(positive_finite(adam->baseline));
  }
  CHECK(probes.sizes().matmul_size == 96);
}

TEST_CASE("probes: the matmul peak on the CPU device reports its size, kind and a positive rate") {
  Result<std::unique_ptr<device::Device>> cpu = device::make_device(device::DeviceOptions{});
  REQUIRE(cpu.is_ok());
  const Result<ComputePeak> peak = measure_matmul_peak(**cpu, DType::kF32, 128);
  REQUIRE(peak.is_ok());
  CHECK(peak->matrix_size == 128);
  CHECK(peak->kind == "fp32 matmul");
  CHECK(positive_finite(peak->flops_per_s));
  CHECK(positive_finite(peak->seconds));
}

TEST_CASE("probes: the block kernel probe times a forward and a backward pass") {
  const BlockKernelSeconds block = probe_block_kernels(parsed(tiny_scenario_json()));
  CHECK(positive_finite(block.forward));
  CHECK(positive_finite(block.backward));
}

TEST_CASE("probes: the swap-store benchmark's counts agree with its configuration") {
  testing::TempDir dir;
  io::SwapStoreOptions options;
  options.paths = {dir.path()};
  options.planned_bytes = 2 * kMiB;
  options.block_bytes = 256 * kKiB;
  options.queue_depth = 4;
  options.largest_transfer_bytes = 512 * kKiB;
  Result<std::unique_ptr<io::SwapStore>> store = io::SwapStore::open(options);
  REQUIRE(store.is_ok());
  IoBenchConfig config;
  config.size_bytes = 2 * kMiB;
  config.tensor_bytes = 512 * kKiB;
  config.tests = {IoTest::kSeqWrite, IoTest::kSeqRead, IoTest::kRandRead};
  config.repeat = 2;
  unsigned callbacks = 0;
  config.after_sample = [&](IoTest, unsigned, unsigned count, const IoSample&) {
    CHECK(count == 2);
    ++callbacks;
    return Status::ok();
  };
  const Result<IoBenchResult> result = run_io_bench(**store, config);
  INFO(result.status().message());
  REQUIRE(result.is_ok());
  CHECK(callbacks == 6);
  CHECK(result->layout.tensor_count == 4);
  CHECK(result->verified == true);
  REQUIRE(result->tests.size() == 3);
  for (const IoTestResult& test : result->tests) {
    INFO(io_test_name(test.test));
    REQUIRE(test.samples.size() == 2);
    for (const IoSample& sample : test.samples) {
      CHECK(sample.bytes == config.size_bytes);
      CHECK(sample.latencies_seconds.size() == 4);
      CHECK(positive_finite(sample.gbps));
      CHECK(sample.gbps == Approx(static_cast<double>(sample.bytes) / sample.seconds / 1e9));
      CHECK(sample.tensors_wrong == 0);
    }
    CHECK(test.latency.count == 8);  // every tensor of both samples
    CHECK((test.gbps.min <= test.gbps.median && test.gbps.median <= test.gbps.max));
    CHECK(test.verified == (is_write_test(test.test) ? std::optional<bool>() : std::optional<bool>(true)));
  }
  CHECK((*store)->stats().extents_live == 0);
}

TEST_CASE("probes: fio's job runs on a file and reports the bytes it was asked for") {
  const char* path = std::getenv("PATH");
  const Result<std::string> fio = find_program("fio", path == nullptr ? "" : path);
  if (!fio.is_ok()) {
    WARN("skipped: fio is not on PATH");
    return;
  }
  testing::TempDir dir;
  // fio_argv forbids fio to create files (it measures the swap store's own): the file exists first.
  const std::string file = dir.write("fio-file", std::string(kMiB, 'x'));
  FioJob job;
  job.name = "probes-test";
  job.filenames = {file};
  job.rw = "write";
  job.ioengine = "psync";
  job.direct = false;
  job.block_bytes = 64 * kKiB;
  job.iodepth = 1;
  job.size_bytes = kMiB;
  const Result<std::vector<std::string>> argv = fio_argv(*fio, job);
  REQUIRE(argv.is_ok());
  const Result<FioMeasurement> m = run_fio(*argv, fio_direction(job.rw));
  INFO(m.status().message());
  REQUIRE(m.is_ok());
  CHECK(m->io_bytes == kMiB);
  CHECK(m->total_ios == 16);  // 1 MiB in 64 KiB blocks
  CHECK(positive_finite(m->bytes_per_second));
  CHECK(m->fio_version.rfind("fio-", 0) == 0);
}

TEST_CASE("probes: a child process's output and exit status come back") {
  const std::vector<std::string> argv{"/bin/sh", "-c", "printf out; printf err >&2; exit 3"};
  const Result<ProcessOutput> out = run_process(argv);
  REQUIRE(out.is_ok());
  CHECK(out->exit_status == 3);
  CHECK(out->out == "out");
  CHECK(out->err == "err");
}

TEST_CASE("probes: a hardware profile from a suite record takes the measured medians") {
  // Medians in GB/s and GFLOP/s, as the suite writes them.
  const json suite{
      {"host", {{"hostname", "box"}, {"cpu_model", "Test CPU"}, {"memory_bytes", 16.0 * 1024 * 1024 * 1024}}},
      {"created_at", "2026-01-01T00:00:00Z"},
      {"figures",
       {{{"name", "memory bandwidth"},
         {"zinf", {{"samples", {9.0, 10.0, 11.0}}, {"median", 10.0}}},
         {"baseline", {{"samples", {7.0, 8.0}}, {"median", 8.0}}}},
        {{"name", "fp32 matmul peak"},
         {"zinf", {{"samples", {50.0, 60.0}}, {"median", 55.0}}},
         {"baseline", {{"samples", {70.0}}, {"median", 70.0}}}}}}};
  CHECK(suite_figure(suite, "fp32 matmul peak") == &suite.at("figures").at(1));
  CHECK(suite_figure(suite, "nothing") == nullptr);
  const Result<planner::HardwareProfile> base = planner::load_hardware_profile("cpu-only");
  REQUIRE(base.is_ok());
  const Result<planner::HardwareProfile> hw = profile_from_suite(suite, *base, {}, "mine");
  INFO(hw.status().message());
  REQUIRE(hw.is_ok());
  CHECK(hw->name == "mine");
  CHECK(hw->node.cpu_memory_bandwidth == Approx(10e9));
  CHECK(hw->node.gpu.memory_bandwidth == Approx(10e9));
  CHECK(hw->node.pcie_bandwidth_per_gpu == Approx(4e9));  // half the memcpy figure
  CHECK(hw->node.cpu_memory_bytes == static_cast<std::uint64_t>(12.0 * 1024 * 1024 * 1024));
  CHECK(hw->node.gpu.achievable_flops[planner::MathMode::kFp32] == Approx(55e9));
  CHECK(hw->node.gpu.peak_flops[planner::MathMode::kFp32] == Approx(70e9));  // best sample of either side
  CHECK(hw->node.gpu.name == "Test CPU (CPU backend)");
  CHECK(hw->node.nvme_read_bandwidth == base->node.nvme_read_bandwidth);  // no paths: the base's
}

TEST_CASE("probes: the offload benchmark runs each side the configured number of steps") {
  json document = tiny_scenario_json();
  document["steps"] = 3;  // 1 warm-up + 2 timed
  document["zero"] = {{"stage", 3}, {"params", "cpu"}, {"optimizer", "cpu"}, {"host_memory", "64MiB"}};
  const spec::Scenario scenario = parsed(document);
  std::vector<std::string> lines;
  const Result<OffloadBenchResult> result =
      run_offload_bench(scenario, 1, 2, [&](const std::string& line) { lines.push_back(line); });
  INFO(result.status().message());
  REQUIRE(result.is_ok());
  CHECK(result->engine.step_ms.size() == 4);  // 2 repetitions x 2 timed steps
  CHECK(result->zero0.step_ms.size() == 4);
  for (const double ms : result->engine.step_ms) CHECK(positive_finite(ms));
  CHECK_FALSE(result->nvme_read_gbps.has_value());  // nothing on NVMe
  const double tax = spread_of(result->engine.step_ms).median / spread_of(result->zero0.step_ms).median;
  CHECK(result->ratios.at("offload_tax").at("value").get<double>() == Approx(tax));
  CHECK_FALSE(lines.empty());
  const json side = offload_side_json(result->engine);
  CHECK(side.at("step_ms").size() == 4);
}

}  // namespace
}  // namespace zinf::probes
