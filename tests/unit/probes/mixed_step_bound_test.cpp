// The I/O-bound step target (probes/mixed_step_bound.h) against its closed form, and fio's mixed
// job (probes/fio_runner.h): the argv it builds, the report it parses, and a real run on a file
// when fio is on PATH. No timing is asserted.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "probes/fio_runner.h"
#include "probes/mixed_step_bound.h"
#include "probes/process.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::probes {
namespace {

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = 1024 * kKiB;

bool has_arg(const std::vector<std::string>& argv, const std::string& arg) {
  for (const std::string& a : argv) {
    if (a == arg) return true;
  }
  return false;
}

TEST_CASE("mixed step bound: the drive sets the bound when its time exceeds the compute's") {
  // 1.5 GB read + 1.0 GB write at 1.25 GB/s mixed: 2000 ms, above a 1800 ms ZeRO-0 step.
  const MixedStepBound b = mixed_step_bound(2100.0, 1800.0, 1.5e9, 1.0e9, 1.25e9);
  CHECK(b.nvme_ms == Approx(2000.0));
  CHECK(b.bound_ms == Approx(2000.0));
  CHECK(b.ratio == Approx(2100.0 / 2000.0));
  CHECK(b.met);  // 1.05 <= 1.10
}

TEST_CASE("mixed step bound: the compute sets the bound on a fast drive, and 1.10 is the line") {
  // 0.5 GB at 2 GB/s: 250 ms, below a 1000 ms ZeRO-0 step.
  const MixedStepBound fast = mixed_step_bound(1100.0, 1000.0, 0.3e9, 0.2e9, 2.0e9);
  CHECK(fast.nvme_ms == Approx(250.0));
  CHECK(fast.bound_ms == Approx(1000.0));
  CHECK(fast.ratio == Approx(1.1));
  const MixedStepBound slow = mixed_step_bound(1101.0, 1000.0, 0.3e9, 0.2e9, 2.0e9);
  CHECK_FALSE(slow.met);
  CHECK(kMixedStepBoundTarget == 1.10);
}

TEST_CASE("mixed step bound: a mixed rate below what the step itself moved bounds nothing") {
  // The quiet run of bench-overlap-nvme.json: 2.65 GB a step in 2467 ms is 1.07 GB/s, against fio's
  // 0.58 GB/s mixed; the "bound" would be 4.6 s and pass the step at 0.54. Not met, not a bound.
  const MixedStepBound b = mixed_step_bound(2467.0, 1792.0, 1.22e9, 1.43e9, 0.58e9);
  CHECK(b.engine_bytes_per_second == Approx(2.65e9 / 2.467));
  CHECK_FALSE(b.bounds);
  CHECK_FALSE(b.met);
  CHECK(b.ratio < kMixedStepBoundTarget);  // what the verdict would have said
  // At exactly the measured rate the measurement still bounds the step.
  const MixedStepBound edge = mixed_step_bound(2000.0, 1000.0, 1.5e9, 1.0e9, 1.25e9);
  CHECK(edge.bounds);
}

TEST_CASE("mixed step bound: fio's read percentage is the step's read share, rounded and kept in 1..99") {
  CHECK(step_read_percent(1.6e9, 1.4e9) == 53);  // 53.33
  CHECK(step_read_percent(3.0, 1.0) == 75);
  CHECK(step_read_percent(1.0, 0.0) == 99);  // fio's mixed job needs both directions
  CHECK(step_read_percent(0.0, 1.0) == 1);
  CHECK(step_read_percent(0.0, 0.0) == 50);
}

TEST_CASE("fio mixed job: the argv names the mix, and a mix outside 1..99 or an unknown rw is refused") {
  FioJob job;
  job.name = "mix";
  job.filenames = {"/tmp/a"};
  job.rw = "rw";
  job.rwmixread = 53;
  job.size_bytes = kMiB;
  const Result<std::vector<std::string>> argv = fio_argv("/usr/bin/fio", job);
  REQUIRE(argv.is_ok());
  CHECK(has_arg(*argv, "--rw=rw"));
  CHECK(has_arg(*argv, "--rwmixread=53"));
  job.rwmixread = 100;
  const Result<std::vector<std::string>> full = fio_argv("/usr/bin/fio", job);
  REQUIRE_FALSE(full.is_ok());
  CHECK(full.status().message().find("rwmixread 100") != std::string::npos);
  job.rwmixread = 0;
  CHECK_FALSE(fio_argv("/usr/bin/fio", job).is_ok());
  job.rw = "trim";
  const Result<std::vector<std::string>> trim = fio_argv("/usr/bin/fio", job);
  REQUIRE_FALSE(trim.is_ok());
  CHECK(trim.status().message().find("rw 'trim'") != std::string::npos);
  job.rw = "read";  // one direction: no rwmixread, whatever the field holds
  const Result<std::vector<std::string>> read = fio_argv("/usr/bin/fio", job);
  REQUIRE(read.is_ok());
  for (const std::string& a : *read) CHECK(a.rfind("--rwmixread", 0) != 0);
}

TEST_CASE("fio mixed report: both directions, and every byte over the longer runtime") {
  const std::string report = R"(fio: a warning line
{"fio version": "fio-3.33", "jobs": [{"jobname": "mix", "error": 0,
  "read":  {"io_bytes": 600000000, "bw_bytes": 500000000, "runtime": 1200, "total_ios": 572,
            "clat_ns": {"mean": 1.0, "max": 2.0}},
  "write": {"io_bytes": 400000000, "bw_bytes": 400000000, "runtime": 1000, "total_ios": 381,
            "clat_ns": {"mean": 1.0, "max": 2.0}}}]})";
  const Result<FioMixedMeasurement> m = parse_fio_mixed_json(report);
  INFO(m.status().message());
  REQUIRE(m.is_ok());
  CHECK(m->read.io_bytes == 600000000);
  CHECK(m->write.io_bytes == 400000000);
  CHECK(m->bytes_per_second == Approx(1.0e9 / 1.2));
  const Result<FioMixedMeasurement> one_sided =
      parse_fio_mixed_json(R"({"jobs": [{"read": {"io_bytes": 1, "bw_bytes": 1, "runtime": 1, "clat_ns": {"mean": 1,
      "max": 1}}}]})");
  REQUIRE_FALSE(one_sided.is_ok());
  CHECK(one_sided.status().message().find("jobs[0].write") != std::string::npos);
}

TEST_CASE("fio mixed job: a real run moves the job's bytes, both ways") {
  const char* path = std::getenv("PATH");
  const Result<std::string> fio = find_program("fio", path == nullptr ? "" : path);
  if (!fio.is_ok()) {
    WARN("skipped: fio is not on PATH");
    return;
  }
  testing::TempDir dir;
  const std::string file = dir.write("fio-mix", std::string(4 * kMiB, 'x'));
  FioJob job;
  job.name = "probes-mix";
  job.filenames = {file};
  job.rw = "rw";
  job.rwmixread = 50;
  job.ioengine = "psync";
  job.direct = false;
  job.block_bytes = 64 * kKiB;
  job.iodepth = 1;
  job.size_bytes = 4 * kMiB;
  const Result<std::vector<std::string>> argv = fio_argv(*fio, job);
  REQUIRE(argv.is_ok());
  const Result<FioMixedMeasurement> m = run_fio_mixed(*argv);
  INFO(m.status().message());
  REQUIRE(m.is_ok());
  CHECK(m->read.io_bytes + m->write.io_bytes == 4 * kMiB);
  CHECK(m->read.total_ios + m->write.total_ios == 64);  // 4 MiB in 64 KiB blocks
  CHECK(m->bytes_per_second > 0);
}

}  // namespace
}  // namespace zinf::probes
