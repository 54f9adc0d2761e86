// `zinf bench io`, the pieces that need no drive: percentile math, the --tests list, and the run
// layout (queue depth x block, a bounded ring, tensor buffers and staging within the 1 GiB bound).
// Expected figures are hand-computed (comments show the arithmetic), never copied from the
// program's output. fio: bench_io_fio_test.cpp; runs through a real SwapStore and the flags:
// bench_io_test.cpp.
#include <algorithm>
#include <string>
#include <vector>

#include "apps/zinf/cli.h"
#include "probes/fio_runner.h"
#include "probes/io_bench_runner.h"
#include "probes/latency_stats.h"
#include "tests/catch.h"
#include "tests/cli/cli_test_support.h"
#include "tests/temp_dir.h"

namespace zinf::cli {
using probes::find_program;
using probes::fio_argv;
using probes::fio_direction;
using probes::FioDirection;
using probes::FioJob;
using probes::IoBenchConfig;
using probes::IoSample;
using probes::IoTest;
using probes::is_write_test;
using probes::LatencySummary;
using probes::parse_fio_json;
using probes::parse_io_tests;
using probes::percentile_of_sorted;
using probes::plan_io_bench;
using probes::run_io_bench;
using probes::run_process;
using probes::SampleSpread;
using probes::shell_command_line;
using probes::spread_of;
using probes::summarize_latencies;

namespace {

using test_support::Outcome;
using testing::TempDir;

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = 1024 * kKiB;
constexpr std::uint64_t kGiB = 1024 * kMiB;

Outcome zinf(const std::vector<std::string>& args) { return test_support::run_zinf(args); }

// ---- percentiles -----------------------------------------------------------------------------

TEST_CASE("bench io: percentiles interpolate between the nearest ranks") {
  const std::vector<double> four{1.0, 2.0, 3.0, 4.0};
  // rank = p/100 * (n-1) = p/100 * 3
  CHECK(percentile_of_sorted(four, 0.0) == 1.0);
  CHECK(percentile_of_sorted(four, 50.0) == Approx(2.5));   // rank 1.5: 2 + 0.5 * 1
  CHECK(percentile_of_sorted(four, 90.0) == Approx(3.7));   // rank 2.7: 3 + 0.7 * 1
  CHECK(percentile_of_sorted(four, 99.0) == Approx(3.97));  // rank 2.97
  CHECK(percentile_of_sorted(four, 100.0) == 4.0);
  const std::vector<double> one{7.0};
  CHECK(percentile_of_sorted(one, 50.0) == 7.0);
  CHECK(percentile_of_sorted(one, 99.0) == 7.0);

  // 1..10 ms: p50 rank 4.5 -> 5.5; p90 rank 8.1 -> 9.1; p99 rank 8.91 -> 9.91; mean 5.5.
  const std::vector<double> shuffled_ms{7, 3, 10, 1, 9, 2, 8, 5, 4, 6};
  const LatencySummary s = summarize_latencies(shuffled_ms);
  CHECK(s.count == 10);
  CHECK(s.mean == Approx(5.5));
  CHECK(s.p50 == Approx(5.5));
  CHECK(s.p90 == Approx(9.1));
  CHECK(s.p99 == Approx(9.91));
  CHECK(s.max == 10.0);
  CHECK(summarize_latencies({}).count == 0);

  const std::vector<double> runs{3.1, 2.9, 3.4};
  const SampleSpread spread = spread_of(runs);
  CHECK(spread.median == Approx(3.1));
  CHECK(spread.min == Approx(2.9));
  CHECK(spread.max == Approx(3.4));
  const std::vector<double> two_runs{2.0, 4.0};
  CHECK(spread_of(two_runs).median == Approx(3.0));
}

// ---- tests list and layout -----------------------------------------------------------------

TEST_CASE("bench io: --tests names, order and mistakes") {
  const auto tests = parse_io_tests("rand-read,seq-write", "--tests");
  REQUIRE(tests.is_ok());
  CHECK(*tests == std::vector<IoTest>{IoTest::kRandRead, IoTest::kSeqWrite});
  CHECK(parse_io_tests("seq-write,seq-read,rand-write,rand-read", "--tests")->size() == 4);
  for (const char* bad : {"foo", "seq-write,", "seq-write,seq-write", ""}) {
    INFO(bad);
    const auto parsed = parse_io_tests(bad, "--tests");
    REQUIRE_FALSE(parsed.is_ok());
    CHECK(parsed.status().code() == ErrorCode::kInvalidArgument);
    CHECK(parsed.status().message().rfind("--tests: ", 0) == 0);
  }
}

TEST_CASE("bench io: the layout covers queue depth x block with a bounded ring") {
  IoBenchConfig config;
  config.tests = {IoTest::kSeqWrite};
  config.size_bytes = 8 * kMiB;
  config.tensor_bytes = kMiB;
  // qd 4 x 256 KiB = 1 MiB = one tensor, plus one: 2 in flight.
  auto layout = plan_io_bench(config, 256 * kKiB, 4, 4096);
  REQUIRE(layout.is_ok());
  CHECK(layout->tensor_count == 8);
  CHECK(layout->last_tensor_bytes == kMiB);
  CHECK(layout->window_tensors == 2);
  CHECK(layout->ring_bytes == 2 * kMiB);
  CHECK(layout->stamp_stride_bytes == 64 * kKiB);

  // 10 MiB in 3 MiB tensors: 3 full + 1 MiB; qd 32 x 1 MiB = 32 MiB -> ceil(32/3) + 1 = 12, capped at 4 tensors.
  config.size_bytes = 10 * kMiB;
  config.tensor_bytes = 3 * kMiB;
  layout = plan_io_bench(config, kMiB, 32, 4096);
  REQUIRE(layout.is_ok());
  CHECK(layout->tensor_count == 4);
  CHECK(layout->last_tensor_bytes == kMiB);
  CHECK(layout->window_tensors == 4);

  // A 96 KiB block is 3 x 32 KiB: stamps every 32 KiB so every chunk starts with one.
  layout = plan_io_bench(config, 96 * kKiB, 32, 4096);
  REQUIRE(layout.is_ok());
  CHECK(layout->stamp_stride_bytes == 32 * kKiB);

  // 600 MiB tensors, 32 x 64 MiB in flight: ceil(2048/600) + 1 = 5 tensors = 3000 MiB > the 1 GiB
  // memory bound; two do not fit either, so the ring holds one (issue 15: it used to keep two, 1.2 GB).
  config.size_bytes = 4 * kGiB;
  config.tensor_bytes = 600 * kMiB;
  layout = plan_io_bench(config, 64 * kMiB, 32, 4096);
  REQUIRE(layout.is_ok());
  CHECK(layout->window_tensors == 1);
  CHECK(layout->memory_bytes == 600 * kMiB);
  // An unaligned tensor size gets aligned buffers: 4 KiB + 1 byte rounds up to 8 KiB.
  config.size_bytes = kMiB;
  config.tensor_bytes = 4097;
  layout = plan_io_bench(config, kMiB, 1, 4096);
  REQUIRE(layout.is_ok());
  CHECK(layout->ring_bytes == 8192 * layout->window_tensors);
  CHECK(layout->last_tensor_bytes == kMiB - 255 * 4097);  // 256 tensors: 255 full ones and the rest

  config.tensor_bytes = 2 * kMiB;
  const auto too_big = plan_io_bench(config, kMiB, 1, 4096);
  REQUIRE_FALSE(too_big.is_ok());
  CHECK(too_big.status().message().rfind("--tensor: ", 0) == 0);
}

// Issue 15, defect 10: `--tensor 1GiB` peaked at 2.26 GB of RSS (two tensor buffers and the
// staging pool) against the documented 1 GiB. The ring and the staging pool now stay within it.
TEST_CASE("bench io: tensor buffers and staging stay within the 1 GiB bound, or the run is refused") {
  IoBenchConfig config;
  config.tests = {IoTest::kSeqWrite};
  config.size_bytes = 4 * kGiB;
  config.tensor_bytes = kGiB;
  config.staging_bytes = 32 * kMiB;  // qd 32 x 1 MiB
  const auto refused = plan_io_bench(config, kMiB, 32, 4096);
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().message() ==
        "--tensor: 1.00 GiB does not fit the 1.00 GiB memory bound of bench io next to 32.0 MiB of staging buffers; "
        "use --tensor 992 MiB or less");
  for (const std::uint64_t tensor : {kMiB, 64 * kMiB, 300 * kMiB, 511 * kMiB, 600 * kMiB, 992 * kMiB}) {
    for (const std::uint64_t staging : {std::uint64_t{0}, kMiB, 32 * kMiB, 256 * kMiB}) {
      config.tensor_bytes = tensor;
      config.staging_bytes = staging;
      const auto layout = plan_io_bench(config, kMiB, 4096, 4096);
      INFO("tensor " << tensor << " staging " << staging);
      if (!layout.is_ok()) {
        CHECK(tensor + staging > kGiB);
        continue;
      }
      CHECK(layout->window_tensors >= 1);
      CHECK(layout->memory_bytes == layout->ring_bytes + staging);
      CHECK(layout->memory_bytes <= kGiB);
    }
  }
  // On the command line the refusal comes before any disk is touched.
  const TempDir dir;
  const auto o = zinf({"bench", "io", "--path", dir.path(), "--size", "2GiB", "--tensor", "1GiB"});
  test_support::check_usage_error(o, "--tensor: 1.00 GiB does not fit the 1.00 GiB memory bound");
}

}  // namespace
}  // namespace zinf::cli
