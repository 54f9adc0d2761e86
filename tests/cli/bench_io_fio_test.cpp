// `zinf bench io`, its fio side: the fio argv for a job over the swap files, fio's JSON report
// (a checked-in fixture, and a real fio run where fio is installed), finding fio on PATH, and the
// child-process capture fio runs through. Expected figures are hand-computed, never copied from
// the program's output. The end-to-end run with --fio: bench_io_test.cpp.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
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

using test_support::fixture;
using test_support::read_text;
using testing::TempDir;

constexpr std::uint64_t kMiB = 1024 * 1024;
constexpr std::uint64_t kGiB = 1024 * kMiB;

// ---- fio -------------------------------------------------------------------------------------

TEST_CASE("bench io: fio argv for one job over two swap files") {
  FioJob job;
  job.name = "zinf-seq-read";
  job.filenames = {"/proc/42/fd/7", "/proc/42/fd/8"};
  job.rw = "read";
  job.block_bytes = kMiB;
  job.iodepth = 32;
  job.size_bytes = 4 * kGiB;
  const auto argv = fio_argv("/usr/bin/fio", job);
  REQUIRE(argv.is_ok());
  const std::vector<std::string> expected{"/usr/bin/fio",
                                          "--name=zinf-seq-read",
                                          "--filename=/proc/42/fd/7:/proc/42/fd/8",
                                          "--ioengine=io_uring",
                                          "--direct=1",
                                          "--rw=read",
                                          "--bs=1048576",
                                          "--iodepth=32",
                                          "--size=4294967296",
                                          "--iomem=malloc",
                                          "--allow_file_create=0",
                                          "--group_reporting",
                                          "--output-format=json"};
  CHECK(*argv == expected);
  CHECK(fio_direction("read") == FioDirection::kRead);
  CHECK(fio_direction("randwrite") == FioDirection::kWrite);

  job.rw = "randwrite";
  job.direct = false;
  job.ioengine = "libaio";
  const auto random = fio_argv("fio", job);
  REQUIRE(random.is_ok());
  CHECK(random->back() == "--randrepeat=0");
  CHECK(std::find(random->begin(), random->end(), "--direct=0") != random->end());
  CHECK(std::find(random->begin(), random->end(), "--ioengine=libaio") != random->end());
  CHECK(std::find(random->begin(), random->end(), "--rw=randwrite") != random->end());

  job.filenames = {"/mnt/a:b"};
  const auto colon = fio_argv("fio", job);
  REQUIRE_FALSE(colon.is_ok());
  CHECK(colon.status().message().find("':'") != std::string::npos);

  const std::vector<std::string> line{"/usr/bin/fio", "--name=x y", "--filename=it's", "--bs=1048576"};
  CHECK(shell_command_line(line) == "/usr/bin/fio '--name=x y' '--filename=it'\\''s' --bs=1048576");
}

TEST_CASE("bench io: fio's JSON report, from a real fio run") {
  const std::string report = read_text(fixture("fio/fio-read.json"));
  REQUIRE_FALSE(report.empty());
  const auto m = parse_fio_json(report, FioDirection::kRead);
  REQUIRE(m.is_ok());
  CHECK(m->fio_version == "fio-3.33");
  CHECK(m->io_bytes == 67108864);            // --size=64MiB
  CHECK(m->bytes_per_second == 1398101333);  // 67108864 B / 0.048 s
  CHECK(m->runtime_seconds == Approx(0.048));
  CHECK(m->total_ios == 64);  // 64 MiB / 1 MiB
  CHECK(m->clat_mean_ns == Approx(5496034.5625));
  CHECK(m->clat_p50_ns == 4947968);
  CHECK(m->clat_p90_ns == 8585216);
  CHECK(m->clat_p99_ns == 10813440);
  CHECK(m->clat_max_ns == 10789232);

  // fio sometimes prints notes on stdout before the JSON.
  const auto noted =
      parse_fio_json("note: both iodepth >= 1 and synchronous I/O engine are selected\n" + report, FioDirection::kRead);
  REQUIRE(noted.is_ok());
  CHECK(noted->io_bytes == 67108864);

  // The report's write side moved nothing.
  const auto wrong_side = parse_fio_json(report, FioDirection::kWrite);
  REQUIRE_FALSE(wrong_side.is_ok());
  CHECK(wrong_side.status().message().find("jobs[0].write moved no bytes") != std::string::npos);

  auto failed_job = nlohmann::json::parse(report);
  failed_job["jobs"][0]["error"] = 5;
  const auto failed = parse_fio_json(failed_job.dump(), FioDirection::kRead);
  REQUIRE_FALSE(failed.is_ok());
  CHECK(failed.status().code() == ErrorCode::kIoError);
  CHECK(failed.status().message().find("error 5") != std::string::npos);

  auto no_clat = nlohmann::json::parse(report);
  no_clat["jobs"][0]["read"].erase("clat_ns");
  CHECK(parse_fio_json(no_clat.dump(), FioDirection::kRead).status().message().find("jobs[0].read.clat_ns") !=
        std::string::npos);
  CHECK_FALSE(parse_fio_json("fio: engine io_uring not loadable", FioDirection::kRead).is_ok());
  CHECK_FALSE(parse_fio_json("{\"jobs\": [", FioDirection::kRead).is_ok());
  CHECK(parse_fio_json("{\"jobs\": []}", FioDirection::kRead).status().message().find("'jobs'") != std::string::npos);
}

TEST_CASE("bench io: finding fio on PATH") {
  TempDir dir;
  const std::string program = dir.write("fio", "#!/bin/sh\nexit 0\n");
  const std::string not_executable = dir.write("fio-text", "text");
  REQUIRE(::chmod(program.c_str(), 0755) == 0);
  const auto found = find_program("fio", "/nonexistent-bin::" + dir.path());
  REQUIRE(found.is_ok());
  CHECK(*found == program);
  CHECK(find_program("fio", "/nonexistent-bin").status().code() == ErrorCode::kNotFound);
  CHECK_FALSE(find_program("fio-text", dir.path()).is_ok());
  CHECK(*find_program(program, "") == program);  // a path is taken as it is
}

TEST_CASE("bench io: a child's exit status, stdout and stderr are captured, even when large") {
  const std::vector<std::string> small{"/bin/sh", "-c", "echo out; echo err >&2; exit 3"};
  const auto o = run_process(small);
  REQUIRE(o.is_ok());
  CHECK(o->exit_status == 3);
  CHECK(o->out == "out\n");
  CHECK(o->err == "err\n");
  // More than a pipe holds (64 KiB) on both streams at once: needs both drained together.
  const std::vector<std::string> large{
      "/bin/sh", "-c", "head -c 300000 /dev/zero | tr '\\000' e >&2; head -c 200000 /dev/zero | tr '\\000' o"};
  const auto big = run_process(large);
  REQUIRE(big.is_ok());
  CHECK(big->exit_status == 0);
  CHECK(big->out.size() == 200000);
  CHECK(big->err.size() == 300000);
  const std::vector<std::string> missing{"/nonexistent-bin/fio"};
  const auto not_started = run_process(missing);
  // posix_spawn reports a missing program either as its own error or as exit status 127.
  CHECK((!not_started.is_ok() || not_started->exit_status == 127));
}

}  // namespace
}  // namespace zinf::cli
