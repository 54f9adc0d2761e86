// The I/O-bound step target (probes/mixed_step_bound.h) against its closed form, and fio's mixed
// job (probes/fio_runner.h): the argv it builds, the report it parses, and a real run on a file
// when fio is on PATH. No timing is asserted.
#include <cstdint>
#include <cstdlib>
#include <optional>
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

TEST_CASE("drive mixed capacity: the higher of fio's and the swap store's figure, named") {
  const std::optional<MixedCapacity> store_wins = drive_mixed_capacity(0.65e9, 1.9e9);
  REQUIRE(store_wins.has_value());
  CHECK(store_wins->bytes_per_second == 1.9e9);
  CHECK(store_wins->source == "swap store");
  const std::optional<MixedCapacity> fio_wins = drive_mixed_capacity(2.0e9, 1.9e9);
  REQUIRE(fio_wins.has_value());
  CHECK(fio_wins->bytes_per_second == 2.0e9);
  CHECK(fio_wins->source == "fio");
  CHECK(drive_mixed_capacity(1.0e9, 1.0e9)->source == "fio");  // a tie: the reproducible figure
  CHECK(drive_mixed_capacity(std::nullopt, 1.5e9)->source == "swap store");
  CHECK(drive_mixed_capacity(1.5e9, std::nullopt)->source == "fio");
  CHECK_FALSE(drive_mixed_capacity(std::nullopt, std::nullopt).has_value());
  CHECK_FALSE(drive_mixed_capacity(0.0, 0.0).has_value());
}

FioSplitMix split_mix(unsigned read_percent, std::uint64_t size, std::uint64_t file, std::size_t files = 1) {
  FioSplitMix mix;
  mix.name = "mix";
  for (std::size_t f = 0; f < files; ++f) mix.filenames.push_back("/tmp/f" + std::to_string(f));
  mix.read_percent = read_percent;
  mix.block_bytes = kMiB;
  mix.iodepth = 64;
  mix.size_bytes = size;
  mix.file_bytes = file;
  return mix;
}

TEST_CASE("fio split mix: whole blocks at the step's byte share, half the queue depth each") {
  // 1 GiB of 1 MiB blocks on one file at 46% read: round(1024 x 0.46) = round(471.04) = 471 blocks read.
  const Result<FioSplitLayout> one = fio_split_layout(split_mix(46, 1024 * kMiB, 1024 * kMiB));
  REQUIRE(one.is_ok());
  CHECK(one->read_bytes_per_file == 471 * kMiB);
  CHECK(one->write_bytes_per_file == 553 * kMiB);
  CHECK(one->read_bytes() + one->write_bytes() == 1024 * kMiB);
  CHECK(one->read_iodepth == 32);
  CHECK(one->write_iodepth == 32);
  // Two files: 512 blocks each, round(512 x 0.46) = round(235.52) = 236 read per file.
  const Result<FioSplitLayout> two = fio_split_layout(split_mix(46, 1024 * kMiB, 1024 * kMiB, 2));
  REQUIRE(two.is_ok());
  CHECK(two->read_bytes_per_file == 236 * kMiB);
  CHECK(two->write_bytes_per_file == 276 * kMiB);
  CHECK(two->read_bytes() == 472 * kMiB);
  // The file caps the size: 4 GiB asked of a 256 MiB file is 256 blocks; 99% still writes one.
  const Result<FioSplitLayout> capped = fio_split_layout(split_mix(99, 4096 * kMiB, 256 * kMiB));
  REQUIRE(capped.is_ok());
  CHECK(capped->read_bytes_per_file == 253 * kMiB);  // round(253.44)
  CHECK(capped->write_bytes_per_file == 3 * kMiB);
  FioSplitMix tiny = split_mix(1, 2 * kMiB, 2 * kMiB);
  tiny.iodepth = 5;
  const Result<FioSplitLayout> edge = fio_split_layout(tiny);
  REQUIRE(edge.is_ok());
  CHECK(edge->read_bytes_per_file == kMiB);  // round(0.02) = 0, at least one block
  CHECK(edge->write_bytes_per_file == kMiB);
  CHECK(edge->read_iodepth == 2);
  CHECK(edge->write_iodepth == 3);
  tiny.iodepth = 1;
  CHECK(fio_split_layout(tiny)->read_iodepth == 1);
  CHECK(fio_split_layout(tiny)->write_iodepth == 1);
}

TEST_CASE("fio split mix: a share outside 1..99 or files without a block for each job are refused") {
  const Result<FioSplitLayout> all_read = fio_split_layout(split_mix(100, 1024 * kMiB, 1024 * kMiB));
  REQUIRE_FALSE(all_read.is_ok());
  CHECK(all_read.status().message().find("read_percent 100") != std::string::npos);
  CHECK_FALSE(fio_split_layout(split_mix(0, 1024 * kMiB, 1024 * kMiB)).is_ok());
  const Result<FioSplitLayout> small = fio_split_layout(split_mix(50, 1024 * kMiB, kMiB));
  REQUIRE_FALSE(small.is_ok());
  CHECK(small.status().message().find("1 blocks") != std::string::npos);
  FioSplitMix no_files = split_mix(50, kMiB, kMiB);
  no_files.filenames.clear();
  CHECK_FALSE(fio_split_layout(no_files).is_ok());
  FioSplitMix colon = split_mix(50, 4 * kMiB, 4 * kMiB);
  colon.filenames = {"/tmp/a:b"};
  CHECK_FALSE(fio_split_mix_argv("/usr/bin/fio", colon).is_ok());
}

TEST_CASE("fio split mix: global options once, then a read job and a write job on separate regions") {
  const Result<std::vector<std::string>> argv =
      fio_split_mix_argv("/usr/bin/fio", split_mix(46, 1024 * kMiB, 1024 * kMiB));
  REQUIRE(argv.is_ok());
  const std::vector<std::string> expected = {"/usr/bin/fio",
                                             "--filename=/tmp/f0",
                                             "--ioengine=io_uring",
                                             "--direct=1",
                                             "--bs=1048576",
                                             "--iomem=malloc",
                                             "--allow_file_create=0",
                                             "--group_reporting",
                                             "--output-format=json",
                                             "--name=mix-read",
                                             "--rw=read",
                                             "--offset=0",
                                             "--size=493879296",  // 471 MiB
                                             "--iodepth=32",
                                             "--name=mix-write",
                                             "--rw=write",
                                             "--offset=493879296",
                                             "--size=579862528",  // 553 MiB
                                             "--iodepth=32"};
  CHECK(*argv == expected);
  CHECK_FALSE(has_arg(*argv, "--rw=rw"));
}

TEST_CASE("fio buffers: huge pages when enough are free for every job, else malloc") {
  const std::string meminfo =
      "MemTotal:       24683656 kB\nHugePages_Total:      64\nHugePages_Free:       40\nHugepagesize:       2048 "
      "kB\n";
  CHECK(huge_page_bytes_free(meminfo) == 40 * 2 * kMiB);
  CHECK(huge_page_bytes_free("HugePages_Free: 3\n") == 0);  // no page size
  CHECK(huge_page_bytes_free("") == 0);
  // 64 x 1 MiB in flight over two jobs needs 64 MiB + 2 x 2 MiB = 68 MiB; 40 pages are 80 MiB.
  CHECK(fio_iomem_for(64 * kMiB, 2, meminfo) == "shmhuge");
  CHECK(fio_iomem_for(77 * kMiB, 2, meminfo) == "malloc");   // 81 MiB needed
  CHECK(fio_iomem_for(76 * kMiB, 2, meminfo) == "shmhuge");  // exactly 80
  CHECK(fio_iomem_for(kMiB, 1, "HugePages_Free:        0\nHugepagesize:       2048 kB\n") == "malloc");
}

TEST_CASE("fio split mix: a real run moves each job's bytes in its own direction") {
  const char* path = std::getenv("PATH");
  const Result<std::string> fio = find_program("fio", path == nullptr ? "" : path);
  if (!fio.is_ok()) {
    WARN("skipped: fio is not on PATH");
    return;
  }
  testing::TempDir dir;
  const std::string file = dir.write("fio-split", std::string(4 * kMiB, 'x'));
  FioSplitMix mix;
  mix.name = "probes-split";
  mix.filenames = {file};
  mix.read_percent = 25;
  mix.ioengine = "psync";
  mix.direct = false;
  mix.block_bytes = 64 * kKiB;
  mix.iodepth = 2;
  mix.size_bytes = 4 * kMiB;
  mix.file_bytes = 4 * kMiB;
  const Result<std::vector<std::string>> argv = fio_split_mix_argv(*fio, mix);
  REQUIRE(argv.is_ok());
  const Result<FioMixedMeasurement> m = run_fio_mixed(*argv);
  INFO(m.status().message());
  REQUIRE(m.is_ok());
  CHECK(m->read.io_bytes == kMiB);  // 16 of 64 blocks
  CHECK(m->write.io_bytes == 3 * kMiB);
  CHECK(m->read.total_ios == 16);
  CHECK(m->write.total_ios == 48);
  CHECK(m->bytes_per_second > 0);
}

}  // namespace
}  // namespace zinf::probes
