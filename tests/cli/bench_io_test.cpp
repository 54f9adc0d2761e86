// `zinf bench io` end to end: the runner against a real SwapStore in a TempDir (reads that come
// back wrong are counted, a baseline that overwrites the files, errors), the one-line errors for
// bad flags and paths, and small runs writing the record, its table/CSV/Markdown forms, and with
// fio too when it is installed. The pieces that need no drive: bench_io_plan_test.cpp and
// bench_io_fio_test.cpp. Expected figures are hand-computed, never copied from the output.
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "apps/zinf/cli.h"
#include "libengine/io/swap_store.h"
#include "probes/fio_runner.h"
#include "probes/io_bench_runner.h"
#include "tests/catch.h"
#include "tests/cli/cli_test_support.h"
#include "tests/ramfs_child.h"
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

using test_support::check_usage_error;
using test_support::fixture;
using test_support::Outcome;
using test_support::read_text;
using testing::TempDir;

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = 1024 * kKiB;
constexpr std::uint64_t kGiB = 1024 * kMiB;

Outcome zinf(const std::vector<std::string>& args) { return test_support::run_zinf(args); }

// Bad input: exit 2 and exactly one line on stderr, "error: ..." containing `needle`.
void expect_bad_input(const std::vector<std::string>& args, const std::string& needle) {
  std::vector<std::string> full{"bench", "io"};
  full.insert(full.end(), args.begin(), args.end());
  check_usage_error(zinf(full), needle);
}

bool fio_installed() {
  const char* path = std::getenv("PATH");
  return find_program("fio", path == nullptr ? "" : path).is_ok();
}

// The small run the end-to-end tests share: 8 tensors of 1 MiB in 256 KiB blocks, queue depth 4.
std::vector<std::string> small_run(const std::string& directory, std::initializer_list<std::string> extra) {
  std::vector<std::string> args{"bench",   "io",     "--path", directory, "--size",   "8MiB", "--tensor",     "1MiB",
                                "--block", "256KiB", "--qd",   "4",       "--repeat", "1",    "--buffered-ok"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// ---- the runner against a real store ---------------------------------------------------------

std::unique_ptr<io::SwapStore> open_small_store(const std::string& directory) {
  io::SwapStoreOptions options;
  options.paths = {directory};
  options.planned_bytes = 4 * kMiB;
  options.block_bytes = 256 * kKiB;
  options.queue_depth = 4;
  options.largest_transfer_bytes = kMiB;
  auto store = io::SwapStore::open(options);
  REQUIRE(store.is_ok());
  return std::move(store).value();
}

// Zeroes the first 64 KiB of the store's first swap file from outside, as another process would.
void clobber_swap_file(const io::SwapStore& store) {
  const int fd = ::open(store.paths().front().reopen_path.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const std::string zeros(64 * kKiB, '\0');
  CHECK(::pwrite(fd, zeros.data(), zeros.size(), 0) == static_cast<ssize_t>(zeros.size()));
  CHECK(::fsync(fd) == 0);
  ::close(fd);
}

TEST_CASE("bench io: reads that come back wrong are counted, not trusted") {
  TempDir dir;
  auto store = open_small_store(dir.path());
  IoBenchConfig config;
  config.size_bytes = 4 * kMiB;
  config.tensor_bytes = kMiB;
  config.tests = {IoTest::kSeqWrite, IoTest::kSeqRead};
  config.after_sample = [&](IoTest test, unsigned, unsigned, const IoSample&) {
    if (is_write_test(test)) clobber_swap_file(*store);
    return Status::ok();
  };
  const auto result = run_io_bench(*store, config);
  REQUIRE(result.is_ok());
  REQUIRE(result->tests.size() == 2);
  CHECK(result->verified == false);
  CHECK(result->tests[1].verified == false);
  const IoSample& read = result->tests[1].samples.at(0);
  CHECK(read.tensors_wrong == 1);  // the 64 KiB hit one tensor
  CHECK(read.first_mismatch.find("no stamp there") != std::string::npos);
  CHECK(result->untimed_rewrites == 0);
  CHECK(store->stats().extents_live == 0);  // released at the end
}

TEST_CASE("bench io: a baseline that overwrites the files gets the extents rewritten before reads") {
  TempDir dir;
  auto store = open_small_store(dir.path());
  IoBenchConfig config;
  config.size_bytes = 4 * kMiB;
  config.tensor_bytes = kMiB;
  config.repeat = 2;
  config.tests = {IoTest::kRandWrite, IoTest::kRandRead};
  config.after_sample_overwrites = true;
  config.after_sample = [&](IoTest test, unsigned, unsigned, const IoSample&) {
    if (is_write_test(test)) clobber_swap_file(*store);
    return Status::ok();
  };
  const auto result = run_io_bench(*store, config);
  REQUIRE(result.is_ok());
  CHECK(result->verified == true);
  CHECK(result->untimed_rewrites == 1);
  // Write runs: 2 timed (the first allocates) + 1 untimed rewrite, each stamping its own pass.
  CHECK(result->tests[0].samples[0].allocates_extents);
  CHECK_FALSE(result->tests[0].samples[1].allocates_extents);
  CHECK(result->tests[1].samples[0].write_pass == 3);
  CHECK(result->stats.bytes_written == 3 * 4 * kMiB);
  CHECK(result->stats.bytes_read == 2 * 4 * kMiB);
}

TEST_CASE("bench io: an error from the baseline ends the run with that error") {
  TempDir dir;
  auto store = open_small_store(dir.path());
  IoBenchConfig config;
  config.size_bytes = 4 * kMiB;
  config.tensor_bytes = kMiB;
  config.tests = {IoTest::kSeqWrite, IoTest::kSeqRead};
  int calls = 0;
  config.after_sample = [&](IoTest, unsigned, unsigned, const IoSample&) {
    ++calls;
    return Status::io_error("fio exited with status 1: boom");
  };
  const auto result = run_io_bench(*store, config);
  REQUIRE_FALSE(result.is_ok());
  CHECK(result.status().message() == "fio exited with status 1: boom");
  CHECK(calls == 1);
  CHECK(store->stats().extents_live == 0);
}

// ---- flags -----------------------------------------------------------------------------------

TEST_CASE("bench io: bad flags are one-line errors naming the flag (exit 2)") {
  TempDir dir;
  const std::string p = dir.path();
  expect_bad_input({}, "--path: missing");
  expect_bad_input({"--path", p, "--qd", "0"}, "--qd: '0' is zero");
  expect_bad_input({"--path", p, "--qd", "5000"}, "--qd: '5000' is too large");
  expect_bad_input({"--path", p, "--block", "1000"}, "--block: '1000' is not a multiple of 4KiB");
  expect_bad_input({"--path", p, "--block", "512MiB"}, "--block: '512MiB' is larger than 256MiB");
  expect_bad_input({"--path", p, "--size", "-1"}, "--size: '-1' is negative");
  expect_bad_input({"--path", p, "--size", "8MiB", "--tensor", "16MiB"},
                   "--tensor: 16.0 MiB is larger than --size 8.00 MiB");
  // Issue 24: a tensor shorter than the 32-byte stamp was "verified yes" on a byte of the magic.
  expect_bad_input(
      {"--path", p, "--size", "1", "--tensor", "1"},
      "--tensor: 1.00 B is smaller than the 32-byte stamp that verifies each tensor read back; use --tensor "
      "32 or more");
  expect_bad_input({"--path", p, "--size", "65", "--tensor", "32"},
                   "--size: 65.0 B leaves a last tensor of 1.00 B (after 2 of --tensor 32.0 B)");
  expect_bad_input({"--path", p, "--tests", "seq-read,seq-read"}, "--tests: 'seq-read' is listed twice");
  expect_bad_input({"--path", p, "--engine", "aio"}, "--engine: 'aio'");
  expect_bad_input({"--path", p, "--checksum", "md5"}, "--checksum: 'md5'");
  expect_bad_input({"--path", p, "--repeat", "0"}, "--repeat: '0' is zero");
  expect_bad_input({"--path", p, "--format", "xml"}, "--format: 'xml'");
  expect_bad_input({"--path", p, "--fio", "--fio-iomem", "hugetlb"},
                   "--fio-iomem: 'hugetlb' is not one of malloc, shmhuge");
  expect_bad_input({"--path", "/nonexistent"}, "/nonexistent");
  expect_bad_input({"--path", p, "--path", p, "--size", "8MiB", "--tensor", "1MiB"}, "is given twice");
  expect_bad_input({"--path", dir.write("file", "x"), "--size", "8MiB", "--tensor", "1MiB"}, "is not a directory");
}

TEST_CASE("bench io: --fio without fio on PATH says how to get it") {
  TempDir dir;
  const char* old_path = std::getenv("PATH");
  const std::string saved = old_path == nullptr ? "" : old_path;
  ::setenv("PATH", dir.path().c_str(), 1);
  const Outcome o = zinf(small_run(dir.path(), {"--fio"}));
  ::setenv("PATH", saved.c_str(), 1);
  CHECK(o.code == 2);
  CHECK(o.err == "error: --fio: fio not found on PATH; install it (apt-get install fio) or drop --fio\n");
}

// Issue 24: --path /proc exited 1 with ENOENT where other bad paths exit 2, and a file system
// without O_DIRECT said "allow buffered I/O" without naming the flag that does.
TEST_CASE("bench io: a path that cannot hold a swap file is bad input naming it, and --buffered-ok is named") {
  expect_bad_input({"--path", "/proc", "--size", "8MiB", "--tensor", "1MiB"},
                   "swap path '/proc': proc cannot hold a swap file (");
  // ramfs refuses O_DIRECT on every kernel; mounting it needs CAP_SYS_ADMIN, in a child with a
  // private mount namespace (skipped, with a warning, where that is not allowed).
  TempDir dir;
  const std::string mount_point = dir.path() + "/ramfs";
  const testing::RamfsChildResult child = testing::run_in_ramfs_child(mount_point, [&](int report) {
    const Outcome o = zinf({"bench", "io", "--path", mount_point, "--size", "8MiB", "--tensor", "1MiB"});
    const std::string got = std::to_string(o.code) + " " + o.err;
    [[maybe_unused]] const ssize_t n = ::write(report, got.data(), got.size());
    return 0;
  });
  if (!child.mounted) {
    WARN("cannot mount ramfs here (needs CAP_SYS_ADMIN); --buffered-ok in the O_DIRECT error not checked");
    return;
  }
  const std::string& got = child.report;
  INFO(got);
  CHECK(got.rfind("2 error: ", 0) == 0);
  CHECK(got.find("swap path '" + mount_point + "': O_DIRECT not supported (ramfs: ") != std::string::npos);
  CHECK(got.find("or pass --buffered-ok to measure buffered I/O (through the page cache)\n") != std::string::npos);
  CHECK(std::count(got.begin(), got.end(), '\n') == 1);
}

// Issue 24: "/x/swap" and "/x/swap/" passed the duplicate check as two drives.
TEST_CASE("bench io: one directory spelt two ways is given twice") {
  TempDir dir;
  const std::string p = dir.path();
  std::filesystem::create_directory(p + "/swap");
  for (const std::string& other : {p + "/swap/", p + "/./swap", p + "/swap/../swap//"}) {
    INFO(other);
    expect_bad_input({"--path", p + "/swap", "--path", other, "--size", "8MiB", "--tensor", "1MiB"},
                     "swap: path '" + other + "' is given twice: it is the same directory as '" + p + "/swap'");
  }
}

// ---- end to end ------------------------------------------------------------------------------

TEST_CASE("bench io: a small run writes a record with every test verified") {
  TempDir dir;
  // Issue 15: the seed went through a double (9007199254740993 was recorded as ...992).
  const Outcome o = zinf(small_run(dir.path(), {"--format", "json", "--seed", "9007199254740993"}));
  INFO("stderr: " << o.err);
  REQUIRE(o.code == 0);
  const auto record = nlohmann::json::parse(o.out);
  CHECK(record["schema"] == "zinf.bench-io/1");
  CHECK(record["input"]["seed"].get<std::uint64_t>() == 9007199254740993ULL);
  CHECK(record["input"]["size_bytes"] == 8 * kMiB);
  CHECK(record["input"]["tensor_bytes"] == kMiB);
  CHECK(record["input"]["block_bytes"] == 256 * kKiB);
  CHECK(record["input"]["queue_depth"] == 4);
  CHECK(record["input"]["paths"] == nlohmann::json::array({dir.path()}));
  CHECK(record["store"]["paths"].size() == 1);
  CHECK(record["store"]["paths"][0]["directory"] == dir.path());
  CHECK(record["store"]["description"].get<std::string>().rfind("swap: 1 path", 0) == 0);
  CHECK(record["layout"]["tensor_count"] == 8);  // 8 MiB / 1 MiB
  CHECK(record["layout"]["window_tensors"] == 2);
  CHECK(record["layout"]["memory_bytes"] == record["layout"]["ring_bytes"].get<std::uint64_t>() +
                                                record["store"]["stats"]["staging_bytes"].get<std::uint64_t>());
  CHECK(record["layout"]["prefilled"] == false);
  CHECK(record["verified"] == true);
  CHECK(record["fio"].is_null());

  const std::vector<std::string> names{"seq-write", "seq-read", "rand-write", "rand-read"};
  REQUIRE(record["tests"].size() == 4);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto& test = record["tests"][i];
    INFO(names[i]);
    CHECK(test["name"] == names[i]);
    REQUIRE(test["samples"].size() == 1);
    const auto& sample = test["samples"][0];
    CHECK(sample["first"] == true);
    CHECK(sample["bytes"] == 8 * kMiB);
    const double seconds = sample["seconds"].get<double>();
    CHECK(seconds > 0.0);
    CHECK(sample["gbps"].get<double>() == Approx(8.0 * kMiB / seconds / 1e9));
    CHECK(test["gbps"]["median"] == sample["gbps"]);
    CHECK(sample["latencies_seconds"].size() == 8);  // one per tensor
    CHECK(test["latency_seconds"]["count"] == 8);
    CHECK(test["latency_seconds"]["p50"].get<double>() <= test["latency_seconds"]["max"].get<double>());
    // Only the first write run allocates the extents; rand-write rewrites them.
    CHECK(sample["allocates_extents"] == (i == 0));
    if (i % 2 == 1) {
      CHECK(test["verified"] == true);
      CHECK(sample["tensors_wrong"] == 0);
    } else {
      CHECK(test["verified"].is_null());
    }
    CHECK(test["fio"].is_null());
    CHECK(test["zinf_over_fio"].is_null());
  }
  // Two write runs and two read runs of 8 MiB each.
  CHECK(record["store"]["stats"]["bytes_written"] == 16 * kMiB);
  CHECK(record["store"]["stats"]["bytes_read"] == 16 * kMiB);
  CHECK(record["store"]["stats"]["failed_tickets"] == 0);
  // The swap file is gone once the command returns.
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()) == 0);
}

TEST_CASE("bench io: table, CSV and Markdown come from the same run") {
  TempDir dir;
  const Outcome table = zinf(small_run(dir.path(), {"--tests", "seq-write,seq-read"}));
  INFO("stderr: " << table.err);
  REQUIRE(table.code == 0);
  for (const char* text : {"Results", "1e9 B/s", "zinf/fio", "verified", "seq-read", "yes", "Store counters"}) {
    CHECK(table.out.find(text) != std::string::npos);
  }
  CHECK(table.err.find("swap: 1 path") != std::string::npos);
  CHECK(table.err.find("seq-write 1/1: zinf ") != std::string::npos);

  const Outcome csv = zinf(small_run(dir.path(), {"--tests", "seq-write,seq-read", "--format", "csv"}));
  REQUIRE(csv.code == 0);
  CHECK(std::count(csv.out.begin(), csv.out.end(), '\n') == 3);  // header + one row per test
  CHECK(csv.out.rfind("test,gbps_median,", 0) == 0);
  CHECK(csv.out.find("\nseq-read,") != std::string::npos);

  const std::string out_file = dir.path() + "/bench.md";
  const Outcome md = zinf(small_run(dir.path(), {"--tests", "seq-read", "--format", "md", "--out", out_file}));
  REQUIRE(md.code == 0);
  CHECK(md.out.empty());
  const std::string text = read_text(out_file);
  CHECK(text.find("| test ") != std::string::npos);
  CHECK(text.find("| **seq-read** |") != std::string::npos);
  CHECK(text.find("untimed write pass") != std::string::npos);  // seq-read alone: prefilled
}

TEST_CASE("bench io: with --fio, fio runs on the same swap files and the ratio is reported") {
  if (!fio_installed()) {
    WARN("skipped: fio is not on PATH");
    return;
  }
  TempDir dir;
  const Outcome o = zinf(small_run(dir.path(), {"--tests", "seq-write,seq-read", "--fio", "--format", "json"}));
  INFO("stderr: " << o.err);
  REQUIRE(o.code == 0);
  const auto record = nlohmann::json::parse(o.out);
  CHECK(record["verified"] == true);
  CHECK(record["fio"]["ioengine"] == "io_uring");
  CHECK(record["fio"]["size_bytes"] == 8 * kMiB);
  CHECK(record["fio"]["version"].get<std::string>().rfind("fio-", 0) == 0);
  // fio's write run overwrote the extents, so they were rewritten before the read run.
  CHECK(record["layout"]["untimed_rewrites"] == 1);
  for (const auto& test : record["tests"]) {
    INFO(test["name"]);
    const auto& fio = test["fio"];
    REQUIRE(fio.is_object());
    CHECK(fio["command"].get<std::string>().find("--filename=/proc/") != std::string::npos);
    CHECK(fio["argv"][0] == record["fio"]["program"]);
    REQUIRE(fio["samples"].size() == 1);
    CHECK(fio["samples"][0]["bytes"] == 8 * kMiB);
    const double fio_gbps = fio["gbps"]["median"].get<double>();
    CHECK(fio_gbps > 0.0);
    CHECK(test["zinf_over_fio"].get<double>() == Approx(test["gbps"]["median"].get<double>() / fio_gbps));
  }
  CHECK(record["tests"][0]["fio"]["rw"] == "write");
  CHECK(record["tests"][1]["fio"]["rw"] == "read");
}

}  // namespace
}  // namespace zinf::cli
