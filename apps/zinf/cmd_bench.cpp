// `zinf bench`: benchmarks of the engine's parts, each next to a baseline measured in the same run
// on the same machine (docs/architecture.md §9). `bench io` measures the NVMe tier: a SwapStore over the given
// directories writes and reads tensors sequentially and in random order, and with --fio, fio runs
// the same patterns against the store's own swap files (through /proc/<pid>/fd/<n>), so the
// zinf/fio ratio compares the two on the same blocks of the same drives.
//
// Options struct + setup (flags into a validated IoBenchConfig and SwapStoreOptions, every error
// naming its flag) + run. The measuring is in io_bench_runner.cpp, fio in fio_runner.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "apps/zinf/bench_ab.h"
#include "apps/zinf/bench_comm.h"
#include "apps/zinf/bench_io_record.h"
#include "apps/zinf/bench_peers.h"
#include "apps/zinf/bench_scaling.h"
#include "apps/zinf/bench_suite.h"
#include "apps/zinf/bench_train.h"
#include "apps/zinf/output.h"
#include "apps/zinf/subcommand.h"
#include "libengine/core/units.h"
#include "libengine/io/checksum.h"
#include "libengine/io/io_engine.h"
#include "libengine/io/swap_store.h"
#include "libengine/memory/staging_pool.h"
#include "probes/fio_runner.h"
#include "probes/io_bench_runner.h"
#include "probes/latency_stats.h"
#include "probes/ratio_spread.h"
#include "reports/record_envelope.h"

namespace zinf::cli {

// The measuring harness (probes/) this file calls.
using probes::find_program;
using probes::fio_argv;
using probes::fio_direction;
using probes::FioJob;
using probes::FioMeasurement;
using probes::io_test_name;
using probes::IoBenchConfig;
using probes::IoBenchLayout;
using probes::IoBenchResult;
using probes::IoSample;
using probes::IoTest;
using probes::IoTestResult;
using probes::is_write_test;
using probes::kBenchIoStagingBytes;
using probes::kSpreadRule;
using probes::LatencySummary;
using probes::parse_io_tests;
using probes::plan_io_bench;
using probes::ratio_with_spread;
using probes::run_fio;
using probes::run_io_bench;
using probes::SampleSpread;
using probes::shell_command_line;
using probes::spread_of;
using probes::summarize_latencies;

namespace {

using reports::Align;
using reports::Cell;
using reports::Emphasis;

constexpr std::uint64_t kMaxBlockBytes = 256ull << 20;  // what SwapStore accepts
constexpr std::uint64_t kBlockGranuleBytes = 4096;
constexpr unsigned kMaxQueueDepth = 4096;
constexpr unsigned kMaxRepeat = 1000;
constexpr double kFioTargetRatio = 0.9;  // acceptance target for sequential read and write
// Per-tensor latencies are kept raw in the record up to this many tensors per pass; beyond it only
// their summary, so a run with a million tiny tensors does not write a gigabyte of JSON.
constexpr std::uint64_t kMaxRawLatencies = 4096;

std::string_view fio_rw(IoTest test) {
  switch (test) {
    case IoTest::kSeqWrite:
      return "write";
    case IoTest::kSeqRead:
      return "read";
    case IoTest::kRandWrite:
      return "randwrite";
    case IoTest::kRandRead:
      return "randread";
  }
  return "read";
}

std::string gbps_text(double gbps) { return fmt::format("{:.2f}", gbps); }
std::string bytes_text(std::uint64_t bytes) { return format_bytes(static_cast<double>(bytes)); }

// Everything the command decided and measured, ready to render.
struct FioTestRun {
  std::vector<std::string> argv;
  std::vector<FioMeasurement> samples;
  SampleSpread gbps;
};

struct FioSetup {
  std::string program;
  std::string version;
  std::string ioengine;
  bool direct = true;
  std::string iomem;
  std::vector<std::string> filenames;
  std::uint64_t size_bytes = 0;
  std::vector<std::string> notes;
};

struct BenchIoRun {
  std::vector<std::string> warnings;
  std::string store_description;
  std::string engine_name;
  std::vector<io::SwapPathInfo> paths;
  IoBenchResult result;
  std::optional<FioSetup> fio;
  std::vector<std::optional<FioTestRun>> fio_runs;  // one per test, parallel to result.tests
  reports::ConditionsSnapshot started;              // cli::Io::started, for the record's "conditions"
};

nlohmann::json latency_json(const LatencySummary& s) {
  return {{"count", s.count}, {"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}, {"max", s.max}};
}

nlohmann::json spread_json(const SampleSpread& s) { return {{"median", s.median}, {"min", s.min}, {"max", s.max}}; }

nlohmann::json stats_json(const io::SwapStoreStats& s) {
  return {{"bytes_written", s.bytes_written},         {"bytes_read", s.bytes_read},
          {"ops_completed", s.ops_completed},         {"short_resubmits", s.short_resubmits},
          {"eagain_retries", s.eagain_retries},       {"staged_ops", s.staged_ops},
          {"checksum_failures", s.checksum_failures}, {"failed_tickets", s.failed_tickets},
          {"extents_live", s.extents_live},           {"used_bytes", s.used_bytes},
          {"capacity_bytes", s.capacity_bytes},       {"staging_bytes", s.staging_bytes},
          {"staging_buffers", s.staging_buffers},     {"staging_peak_in_use", s.staging_peak_in_use}};
}

nlohmann::json path_json(const io::SwapPathInfo& p) {
  return {{"directory", p.directory},
          {"reopen_path", p.reopen_path},
          {"direct", p.direct},
          {"why_buffered", p.why_buffered},
          {"memory_alignment_bytes", p.memory_alignment_bytes},
          {"offset_alignment_bytes", p.offset_alignment_bytes},
          {"file_bytes", p.file_bytes},
          {"used_bytes", p.used_bytes}};
}

std::optional<double> ratio_of(const IoTestResult& test, const std::optional<FioTestRun>& fio) {
  if (!fio || fio->gbps.median <= 0.0) return std::nullopt;
  return test.gbps.median / fio->gbps.median;
}

class BenchCommand final : public Subcommand {
 public:
  explicit BenchCommand(CLI::App& app) {
    CLI::App* bench =
        app.add_subcommand("bench", "Benchmarks of zinf's parts, each against a baseline run on the same machine");
    bench->require_subcommand(1);
    io_ = bench->add_subcommand("io",
                                "NVMe tier: write and read tensors through the swap store, sequential and random, next "
                                "to fio on the same files");
    CLI::App& c = *io_;
    const std::string where = "Where and how much";
    c.add_option("--path", paths_, "Directory to put a swap file in; repeat to stripe over several drives")
        ->type_name("DIR")
        ->group(where);
    add(c, "--size", size_, "Bytes per pass over all paths (default 4GiB); reserved on disk, not in RAM", where,
        "SIZE");
    add(c, "--tensor", tensor_, "Bytes per tensor, one swap extent each (default 64MiB)", where, "SIZE");
    const std::string how = "I/O";
    add(c, "--block", block_, "Request size and stripe unit, a multiple of 4KiB up to 256MiB (default 1MiB)", how,
        "SIZE");
    add(c, "--qd", qd_, "Requests in flight over all paths, 1..4096 (default 32)", how, "N");
    add(c, "--engine", engine_,
        "uring or posix (default uring; posix is used with a warning where io_uring is unavailable)", how, "NAME");
    add(c, "--checksum", checksum_, "none or crc32c: checksum every extent on write, verify on read (default none)",
        how, "NAME");
    c.add_flag("--buffered-ok", buffered_ok_, "Run buffered (with a warning) where O_DIRECT is refused, e.g. on tmpfs")
        ->group(how);
    const std::string what = "What to run";
    add(c, "--tests", tests_, "Comma list of seq-write, seq-read, rand-write, rand-read (default all, in that order)",
        what, "LIST");
    add(c, "--repeat", repeat_, "Runs of each test; the median is reported (default 3)", what, "N");
    add(c, "--seed", seed_, "Seed of the data pattern and the random orders (default 1)", what, "N");
    c.add_flag("--fio", fio_, "Also run fio (io_uring) on the same swap files and print zinf/fio per test")
        ->group(what);
    add(c, "--fio-iomem", fio_iomem_,
        "fio's buffers: malloc (fio's default, 4 KiB pages) or shmhuge (huge pages, like zinf's; needs "
        "vm.nr_hugepages >= qd x block / 2MiB)",
        what, "KIND");
    add_output_options(c, output_);
    train_ = add_bench_train_command(*bench);
    suite_ = add_bench_suite_command(*bench, &suite_app_);
    comm_ = add_bench_comm_command(*bench);
    comm_app_ = bench->get_subcommand("comm");
    scaling_ = add_bench_scaling_command(*bench);
    scaling_app_ = bench->get_subcommand("scaling");
    ab_ = add_bench_ab_command(*bench, &ab_app_);
    peers_ = add_bench_peers_command(*bench, &peers_app_);
  }

  Status run(const Io& io) override {
    if (io_->parsed()) return run_io(io);
    if (suite_app_->parsed()) return suite_->run(io);
    if (scaling_app_->parsed()) return scaling_->run(io);
    if (ab_app_->parsed()) return ab_->run(io);
    if (peers_app_->parsed()) return peers_->run(io);
    return comm_parsed() ? comm_->run(io) : train_->run(io);
  }
  std::optional<int> delegated_exit_code() const override {
    return comm_parsed() ? comm_->delegated_exit_code() : std::nullopt;
  }
  int exit_code_on_success() const override { return ab_app_->parsed() ? ab_->exit_code_on_success() : 0; }

 private:
  void add(CLI::App& c, const std::string& name, std::string& target, const std::string& help, const std::string& group,
           const std::string& type) {
    c.add_option(name, target, help)->type_name(type)->group(group);
  }

  Status run_io(const Io& io);
  Status configure(io::SwapStoreOptions& store_options, IoBenchConfig& config) const;
  Result<FioSetup> fio_setup(const io::SwapStore& store, const IoBenchConfig& config, const std::string& program) const;
  Rendered render(const BenchIoRun& run, const io::SwapStoreOptions& store_options, const IoBenchConfig& config) const;

  CLI::App* io_ = nullptr;
  CLI::App* comm_app_ = nullptr;
  bool comm_parsed() const { return comm_app_ != nullptr && comm_app_->parsed(); }

  std::unique_ptr<Subcommand> train_;
  std::unique_ptr<Subcommand> suite_;
  CLI::App* suite_app_ = nullptr;
  std::unique_ptr<Subcommand> comm_;
  std::unique_ptr<Subcommand> scaling_;
  CLI::App* scaling_app_ = nullptr;
  std::unique_ptr<Subcommand> ab_;
  CLI::App* ab_app_ = nullptr;
  std::unique_ptr<Subcommand> peers_;
  CLI::App* peers_app_ = nullptr;
  std::vector<std::string> paths_;
  std::string size_ = "4GiB";
  std::string tensor_ = "64MiB";
  std::string block_ = "1MiB";
  std::string qd_ = "32";
  std::string engine_ = "uring";
  std::string checksum_ = "none";
  std::string tests_ = "seq-write,seq-read,rand-write,rand-read";
  std::string repeat_ = "3";
  std::string seed_ = "1";
  bool fio_ = false;
  std::string fio_iomem_ = "malloc";
  bool buffered_ok_ = false;
  OutputOptions output_;
};

Status BenchCommand::configure(io::SwapStoreOptions& store_options, IoBenchConfig& config) const {
  if (paths_.empty()) {
    return Status::invalid_argument(
        "--path: missing; give the directory to test, e.g. --path /mnt/nvme0 (repeat --path to stripe over drives)");
  }
  for (const std::string& path : paths_) {
    if (path.empty()) return Status::invalid_argument("--path: '' is empty; expected a directory");
  }
  if (fio_iomem_ != "malloc" && fio_iomem_ != "shmhuge") {
    return Status::invalid_argument(fmt::format("--fio-iomem: '{}' is not one of malloc, shmhuge", fio_iomem_));
  }
  ZINF_ASSIGN_OR_RETURN(config.size_bytes, parse_bytes(size_, "--size"));
  ZINF_ASSIGN_OR_RETURN(config.tensor_bytes, parse_bytes(tensor_, "--tensor"));
  ZINF_ASSIGN_OR_RETURN(const std::uint64_t block_bytes, parse_bytes(block_, "--block"));
  if (block_bytes % kBlockGranuleBytes != 0 || block_bytes > kMaxBlockBytes) {
    return Status::invalid_argument(
        fmt::format("--block: '{}' is {}; expected a multiple of 4KiB from 4KiB to 256MiB (e.g. 1MiB)", block_,
                    block_bytes > kMaxBlockBytes ? "larger than 256MiB" : "not a multiple of 4KiB"));
  }
  ZINF_ASSIGN_OR_RETURN(const std::int64_t qd, parse_positive_int(qd_, "--qd", kMaxQueueDepth));
  ZINF_ASSIGN_OR_RETURN(const io::EngineKind engine, io::engine_kind_from_name(engine_, "--engine"));
  ZINF_ASSIGN_OR_RETURN(const io::ChecksumKind checksum, io::checksum_kind_from_name(checksum_, "--checksum"));
  ZINF_ASSIGN_OR_RETURN(config.tests, parse_io_tests(tests_, "--tests"));
  ZINF_ASSIGN_OR_RETURN(const std::int64_t repeat, parse_positive_int(repeat_, "--repeat", kMaxRepeat));
  ZINF_ASSIGN_OR_RETURN(config.seed, parse_count(seed_, "--seed", ZeroIs::kAllowed));
  config.repeat = static_cast<unsigned>(repeat);
  // The staging pool the store will make, counted in the benchmark's memory bound.
  config.staging_bytes = memory::StagingPool::recommended_bytes(config.tensor_bytes, block_bytes,
                                                                static_cast<unsigned>(qd), kBenchIoStagingBytes);
  // The layout check (tensor larger than size, too many tensors, memory) before anything touches a disk.
  ZINF_RETURN_IF_ERROR(plan_io_bench(config, block_bytes, static_cast<unsigned>(qd), kBlockGranuleBytes).status());

  store_options.paths = paths_;
  store_options.planned_bytes = config.size_bytes;
  store_options.block_bytes = block_bytes;
  store_options.queue_depth = static_cast<unsigned>(qd);
  store_options.engine = engine;
  store_options.checksum = checksum;
  store_options.largest_transfer_bytes = config.tensor_bytes;
  store_options.allow_buffered_fallback = buffered_ok_;
  store_options.how_to_allow_buffered = "pass --buffered-ok to measure buffered I/O (through the page cache)";
  store_options.staging_budget_bytes = kBenchIoStagingBytes;
  return Status::ok();
}

Result<FioSetup> BenchCommand::fio_setup(const io::SwapStore& store, const IoBenchConfig& config,
                                         const std::string& program) const {
  FioSetup setup;
  setup.program = program;
  const std::vector<io::SwapPathInfo> paths = store.paths();
  bool all_direct = true;
  for (const io::SwapPathInfo& path : paths) {
    setup.filenames.push_back(path.reopen_path);
    all_direct = all_direct && path.direct;
  }
  setup.direct = all_direct;
  setup.iomem = fio_iomem_;
  if (fio_iomem_ == "malloc") {
    setup.notes.push_back(
        "fio's buffers are ordinary 4 KiB pages (--iomem=malloc), zinf's are huge pages where the kernel allows; "
        "--fio-iomem shmhuge gives fio huge pages too");
  }
  if (!all_direct) {
    setup.notes.push_back("fio runs buffered (--direct=0) because the store's files are buffered");
  }
  // zinf's posix engine is a fallback or a choice; fio's baseline is what the drive can do, so it
  // stays on io_uring unless io_uring is what is missing here, then libaio (also asynchronous).
  setup.ioengine = "io_uring";
  if (store.engine_name() == "posix") {
    if (engine_ == "posix") {
      setup.notes.push_back("zinf ran with --engine posix; fio runs io_uring, the best this kernel offers");
    } else {
      setup.ioengine = "libaio";
      setup.notes.push_back("io_uring is unavailable here (zinf fell back to posix); fio runs libaio");
    }
  }
  // fio splits --size equally over the files and rounds each share down to whole blocks; give it a
  // size it can honour exactly so both sides move the same bytes.
  const std::uint64_t stripe = store.block_bytes() * paths.size();
  setup.size_bytes = config.size_bytes / stripe * stripe;
  if (setup.size_bytes == 0) {
    return Status::invalid_argument(
        fmt::format("--fio: --size {} is less than one block per path ({}); raise --size or drop --fio", size_,
                    bytes_text(stripe)));
  }
  if (setup.size_bytes != config.size_bytes) {
    setup.notes.push_back(fmt::format("fio moves {} per run (--size rounded down to whole {} stripes)",
                                      bytes_text(setup.size_bytes), bytes_text(stripe)));
  }
  setup.notes.push_back(
      "fio runs alternate with zinf's, on the same swap files (via /proc/<pid>/fd), with --bs = --block and --iodepth "
      "= --qd; "
      "its latencies are per block, zinf's per tensor");
  return setup;
}

Status BenchCommand::run_io(const Io& io) {
  ZINF_RETURN_IF_ERROR(output_format(output_).status());
  io::SwapStoreOptions store_options;
  IoBenchConfig config;
  ZINF_RETURN_IF_ERROR(configure(store_options, config));
  if (!output_.out_path.empty()) ZINF_RETURN_IF_ERROR(check_output_path(output_.out_path, "--out"));

  std::string fio_program;
  if (fio_) {
    const char* search_path = std::getenv("PATH");
    Result<std::string> found = find_program("fio", search_path == nullptr ? "/usr/bin:/bin" : search_path);
    if (!found.is_ok()) {
      return Status::not_found("--fio: fio not found on PATH; install it (apt-get install fio) or drop --fio");
    }
    fio_program = *found;
  }

  BenchIoRun run;
  run.started = io.started;
  store_options.on_warning = [&io, &run](const std::string& warning) {
    io.err << "warning: " << warning << '\n';
    run.warnings.push_back(warning);
  };
  ZINF_ASSIGN_OR_RETURN(std::unique_ptr<io::SwapStore> store, io::SwapStore::open(store_options));
  run.store_description = store->describe();
  run.engine_name = std::string(store->engine_name());
  run.paths = store->paths();
  io.err << run.store_description << '\n';

  run.fio_runs.resize(config.tests.size());
  std::vector<std::vector<double>> fio_gbps(config.tests.size());
  if (fio_) {
    ZINF_ASSIGN_OR_RETURN(FioSetup setup, fio_setup(*store, config, fio_program));
    for (std::size_t t = 0; t < config.tests.size(); ++t) {
      FioJob job;
      job.name = fmt::format("zinf-{}", io_test_name(config.tests[t]));
      job.filenames = setup.filenames;
      job.rw = std::string(fio_rw(config.tests[t]));
      job.ioengine = setup.ioengine;
      job.direct = setup.direct;
      job.iomem = setup.iomem;
      job.block_bytes = store->block_bytes();
      job.iodepth = store->queue_depth();
      job.size_bytes = setup.size_bytes;
      FioTestRun fio_run;
      ZINF_ASSIGN_OR_RETURN(fio_run.argv, fio_argv(setup.program, job));
      run.fio_runs[t] = std::move(fio_run);
    }
    run.fio = std::move(setup);
    // fio's writes land on the extents zinf wrote; the runner restores them before zinf reads.
    config.after_sample_overwrites = true;
  }

  // After each zinf run: a progress line, then (with --fio) one fio run of the same test, so the
  // two alternate.
  config.after_sample = [&](IoTest test, unsigned index, unsigned count, const IoSample& sample) -> Status {
    io.err << fmt::format("{} {}/{}: zinf {} GB/s in {}{}", io_test_name(test), index + 1, count,
                          gbps_text(sample.gbps), format_duration(sample.seconds),
                          sample.tensors_wrong > 0 ? fmt::format(", {} tensors WRONG", sample.tensors_wrong) : "");
    const std::size_t t =
        static_cast<std::size_t>(std::find(config.tests.begin(), config.tests.end(), test) - config.tests.begin());
    if (!run.fio_runs[t]) {
      io.err << '\n';
      return Status::ok();
    }
    FioTestRun& fio_run = *run.fio_runs[t];
    Result<FioMeasurement> measured = run_fio(fio_run.argv, fio_direction(fio_rw(test)));
    if (!measured.is_ok()) {
      io.err << '\n';
      return measured.status().with_context(
          fmt::format("--fio: {} ({})", io_test_name(test), shell_command_line(fio_run.argv)));
    }
    run.fio->version = measured->fio_version;
    fio_gbps[t].push_back(measured->bytes_per_second / 1e9);
    io.err << fmt::format(", fio {} GB/s\n", gbps_text(fio_gbps[t].back()));
    fio_run.samples.push_back(std::move(measured).value());
    return Status::ok();
  };
  ZINF_ASSIGN_OR_RETURN(run.result, run_io_bench(*store, config));
  run.paths = run.result.paths;
  for (std::size_t t = 0; t < config.tests.size(); ++t) {
    if (run.fio_runs[t]) run.fio_runs[t]->gbps = spread_of(fio_gbps[t]);
  }
  store.reset();  // closes (and so frees) the swap files before the output is written

  const Rendered rendered = render(run, store_options, config);
  ZINF_RETURN_IF_ERROR(emit(output_, rendered, io));
  if (run.result.verified == false) {
    std::uint64_t wrong = 0;
    std::string first;
    for (const IoTestResult& test : run.result.tests) {
      for (const IoSample& sample : test.samples) {
        wrong += sample.tensors_wrong;
        if (first.empty()) first = sample.first_mismatch;
      }
    }
    return Status::io_error(fmt::format("bench io: {} tensor reads came back wrong; first: {}", wrong, first));
  }
  return Status::ok();
}

Rendered BenchCommand::render(const BenchIoRun& run, const io::SwapStoreOptions& store_options,
                              const IoBenchConfig& config) const {
  const IoBenchResult& result = run.result;
  const IoBenchLayout& layout = result.layout;
  Rendered out;

  // The record: the source of truth the table, Markdown and CSV are rendered from.
  nlohmann::json& record = out.record;
  record = reports::make_record_envelope("bench-io", 1, run.started);
  nlohmann::json tests_input = nlohmann::json::array();
  for (const IoTest test : config.tests) tests_input.push_back(io_test_name(test));
  record["input"] = {{"paths", paths_},
                     {"size_bytes", config.size_bytes},
                     {"tensor_bytes", config.tensor_bytes},
                     {"block_bytes", store_options.block_bytes},
                     {"queue_depth", store_options.queue_depth},
                     {"engine", io::engine_kind_name(store_options.engine)},
                     {"checksum", io::checksum_kind_name(store_options.checksum)},
                     {"tests", tests_input},
                     {"repeat", config.repeat},
                     {"seed", config.seed},
                     {"fio", fio_},
                     {"buffered_ok", buffered_ok_}};
  nlohmann::json paths = nlohmann::json::array();
  for (const io::SwapPathInfo& p : run.paths) paths.push_back(path_json(p));
  record["store"] = {{"description", run.store_description},
                     {"engine", run.engine_name},
                     {"block_bytes", store_options.block_bytes},
                     {"queue_depth", store_options.queue_depth},
                     {"paths", paths},
                     {"stats", stats_json(result.stats)},
                     {"warnings", run.warnings}};
  record["layout"] = {{"tensor_count", layout.tensor_count},
                      {"tensor_bytes", config.tensor_bytes},
                      {"last_tensor_bytes", layout.last_tensor_bytes},
                      {"window_tensors", layout.window_tensors},
                      {"ring_bytes", layout.ring_bytes},
                      {"memory_bytes", layout.memory_bytes},
                      {"buffer_alignment_bytes", layout.buffer_alignment_bytes},
                      {"stamp_stride_bytes", layout.stamp_stride_bytes},
                      {"prefilled", result.prefilled},
                      {"untimed_rewrites", result.untimed_rewrites}};
  record["units"] = {{"gbps", "1e9 bytes per second"},
                     {"seconds", "seconds"},
                     {"latency", "seconds, per tensor: issue to wait() returning"},
                     {"fio_clat_ns", "nanoseconds, per block"}};
  record["tests"] = nlohmann::json::array();
  for (std::size_t t = 0; t < result.tests.size(); ++t) {
    const IoTestResult& test = result.tests[t];
    nlohmann::json samples = nlohmann::json::array();
    for (std::size_t i = 0; i < test.samples.size(); ++i) {
      const IoSample& s = test.samples[i];
      nlohmann::json sample = {{"index", i},
                               {"first", i == 0},
                               {"allocates_extents", s.allocates_extents},
                               {"seconds", s.seconds},
                               {"bytes", s.bytes},
                               {"gbps", s.gbps},
                               {"write_pass", s.write_pass},
                               {"verify_seconds", s.verify_seconds},
                               {"latency_seconds", latency_json(summarize_latencies(s.latencies_seconds))}};
      if (s.latencies_seconds.size() <= kMaxRawLatencies) sample["latencies_seconds"] = s.latencies_seconds;
      if (!is_write_test(test.test)) {
        sample["tensors_wrong"] = s.tensors_wrong;
        sample["first_mismatch"] = s.first_mismatch;
      }
      samples.push_back(std::move(sample));
    }
    nlohmann::json entry = {{"name", io_test_name(test.test)},
                            {"samples", samples},
                            {"gbps", spread_json(test.gbps)},
                            {"latency_seconds", latency_json(test.latency)},
                            {"verified", test.verified ? nlohmann::json(*test.verified) : nlohmann::json(nullptr)},
                            {"fio", nullptr},
                            {"zinf_over_fio", nullptr}};
    if (const std::optional<FioTestRun>& fio = run.fio_runs[t]) {
      nlohmann::json fio_samples = nlohmann::json::array();
      for (const FioMeasurement& m : fio->samples) {
        fio_samples.push_back({{"bytes", m.io_bytes},
                               {"seconds", m.runtime_seconds},
                               {"bytes_per_second", m.bytes_per_second},
                               {"gbps", m.bytes_per_second / 1e9},
                               {"total_ios", m.total_ios},
                               {"clat_ns",
                                {{"mean", m.clat_mean_ns},
                                 {"p50", m.clat_p50_ns},
                                 {"p90", m.clat_p90_ns},
                                 {"p99", m.clat_p99_ns},
                                 {"max", m.clat_max_ns}}}});
      }
      entry["fio"] = {{"rw", fio_rw(test.test)},
                      {"command", shell_command_line(fio->argv)},
                      {"argv", fio->argv},
                      {"samples", fio_samples},
                      {"gbps", spread_json(fio->gbps)}};
      if (const std::optional<double> ratio = ratio_of(test, fio)) entry["zinf_over_fio"] = *ratio;
      std::vector<double> zinf_gbps, fio_gbps;
      for (const IoSample& s : test.samples) zinf_gbps.push_back(s.gbps);
      for (const FioMeasurement& m : fio->samples) fio_gbps.push_back(m.bytes_per_second / 1e9);
      entry["zinf_over_fio_spread"] = ratio_with_spread(zinf_gbps, fio_gbps);
    }
    record["tests"].push_back(std::move(entry));
  }
  record["verified"] = result.verified ? nlohmann::json(*result.verified) : nlohmann::json(nullptr);
  record["spread_rule"] = kSpreadRule;
  if (run.fio) {
    record["fio"] = {
        {"program", run.fio->program},       {"version", run.fio->version},     {"ioengine", run.fio->ioengine},
        {"direct", run.fio->direct},         {"iomem", run.fio->iomem},         {"filenames", run.fio->filenames},
        {"size_bytes", run.fio->size_bytes}, {"target_ratio", kFioTargetRatio}, {"notes", run.fio->notes}};
  } else {
    record["fio"] = nullptr;
  }

  // Everything people see is rendered from the record (bench_io_record.h), as train_record.cpp does.
  Rendered rendered = render_bench_io_record(record);
  rendered.record = std::move(out.record);
  return rendered;
}

}  // namespace

std::unique_ptr<Subcommand> add_bench_command(CLI::App& app) { return std::make_unique<BenchCommand>(app); }

}  // namespace zinf::cli
