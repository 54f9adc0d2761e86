#include "apps/zinf/bench_suite.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <ostream>

#include <fmt/format.h>

#include "kernels/threads.h"
#include "libengine/core/build_info.h"
#include "libengine/core/units.h"
#include "libengine/device/device_factory.h"
#include "libengine/io/swap_store.h"
#include "libengine/memory/staging_pool.h"
#include "probes/compute_peak.h"
#include "probes/fio_runner.h"
#include "probes/io_bench_runner.h"
#include "probes/latency_stats.h"
#include "probes/machine_probes.h"
#include "probes/process.h"
#include "probes/ratio_spread.h"
#include "reports/record_envelope.h"
#include "reports/record_report.h"

namespace zinf::cli {

// The measuring harness (probes/) this file calls.
using probes::find_program;
using probes::fio_argv;
using probes::fio_direction;
using probes::FioJob;
using probes::FioMeasurement;
using probes::io_test_name;
using probes::IoBenchConfig;
using probes::IoBenchResult;
using probes::IoSample;
using probes::IoTest;
using probes::IoTestResult;
using probes::kBenchIoStagingBytes;
using probes::kSpreadRule;
using probes::MachineProbes;
using probes::ProbeSample;
using probes::ratio_with_spread;
using probes::run_fio;
using probes::run_io_bench;
using probes::SampleSpread;
using probes::spread_of;

namespace {

using nlohmann::json;

json side_json(const std::string& name, const std::vector<double>& samples) {
  const SampleSpread s = spread_of(samples);
  json out = {{"samples", samples}, {"median", s.median}, {"min", s.min}, {"max", s.max}};
  if (!name.empty()) out["name"] = name;
  return out;
}

json figure_json(const std::string& name, const std::string& unit, const std::string& what,
                 const std::vector<double>& zinf, const std::string& baseline_name, const std::vector<double>& baseline,
                 const std::string& baseline_note = "") {
  json f = {{"name", name}, {"unit", unit}, {"what", what}, {"zinf", side_json("", zinf)}};
  if (baseline.empty()) {
    f["baseline"] = nullptr;
    f["ratio"] = nullptr;
    f["ratio_spread"] = nullptr;
    f["baseline_note"] = baseline_note;
  } else {
    f["baseline"] = side_json(baseline_name, baseline);
    const json spread = ratio_with_spread(zinf, baseline);
    f["ratio"] = spread.at("value");
    f["ratio_spread"] = spread;
  }
  return f;
}

using Probe = Result<ProbeSample> (MachineProbes::*)();

Status run_probe(MachineProbes& probes, Probe probe, unsigned repeat, const std::string& label, const std::string& unit,
                 const std::function<void(const std::string&)>& progress, std::vector<double>& zinf,
                 std::vector<double>& baseline) {
  (void)(probes.*probe)();  // warm-up: first touch of the buffers, thread pools, library setup
  for (unsigned i = 0; i < repeat; ++i) {
    ZINF_ASSIGN_OR_RETURN(const ProbeSample s, (probes.*probe)());
    zinf.push_back(s.zinf);
    baseline.push_back(s.baseline);
    if (progress)
      progress(fmt::format("{} {}/{}: zinf {:.2f} {}, baseline {:.2f} {}", label, i + 1, repeat, s.zinf, unit,
                           s.baseline, unit));
  }
  return Status::ok();
}

// Sequential write and read of the swap store over `paths`, with fio on the same files after each
// zinf run when fio is available. Appends two figures.
Status nvme_figures(const std::vector<std::string>& paths, const std::string& label, const SuiteOptions& options,
                    const std::string& fio_program, const std::function<void(const std::string&)>& progress,
                    json& figures) {
  io::SwapStoreOptions store_options;
  store_options.paths = paths;
  store_options.planned_bytes = options.nvme_bytes;
  store_options.largest_transfer_bytes = 64ull << 20;
  store_options.queue_depth = 32;
  store_options.allow_buffered_fallback = true;
  store_options.staging_budget_bytes = kBenchIoStagingBytes;
  std::vector<std::string> warnings;
  store_options.on_warning = [&](const std::string& w) { warnings.push_back(w); };
  ZINF_ASSIGN_OR_RETURN(std::unique_ptr<io::SwapStore> store, io::SwapStore::open(store_options));
  IoBenchConfig config;
  config.size_bytes = options.nvme_bytes;
  config.tensor_bytes = 64ull << 20;
  config.tests = {IoTest::kSeqWrite, IoTest::kSeqRead};
  config.repeat = options.repeat;
  config.staging_bytes = memory::StagingPool::recommended_bytes(config.tensor_bytes, store->block_bytes(),
                                                                store->queue_depth(), kBenchIoStagingBytes);
  std::vector<double> fio_gbps[2];
  bool direct = true;
  std::vector<std::string> files;
  for (const io::SwapPathInfo& p : store->paths()) {
    files.push_back(p.reopen_path);
    direct = direct && p.direct;
  }
  const std::uint64_t stripe = store->block_bytes() * files.size();
  if (!fio_program.empty()) config.after_sample_overwrites = true;
  config.after_sample = [&](IoTest test, unsigned index, unsigned count, const IoSample& sample) -> Status {
    std::string line =
        fmt::format("nvme {} {} {}/{}: zinf {:.2f} GB/s", label, io_test_name(test), index + 1, count, sample.gbps);
    if (!fio_program.empty()) {
      FioJob job;
      job.name = fmt::format("zinf-suite-{}", io_test_name(test));
      job.filenames = files;
      job.rw = test == IoTest::kSeqWrite ? "write" : "read";
      job.direct = direct;
      job.block_bytes = store->block_bytes();
      job.iodepth = store->queue_depth();
      job.size_bytes = options.nvme_bytes / stripe * stripe;
      ZINF_ASSIGN_OR_RETURN(const std::vector<std::string> argv, fio_argv(fio_program, job));
      ZINF_ASSIGN_OR_RETURN(const FioMeasurement m, run_fio(argv, fio_direction(job.rw)));
      fio_gbps[test == IoTest::kSeqWrite ? 0 : 1].push_back(m.bytes_per_second / 1e9);
      line += fmt::format(", fio {:.2f} GB/s", m.bytes_per_second / 1e9);
    }
    if (progress) progress(line);
    return Status::ok();
  };
  ZINF_ASSIGN_OR_RETURN(const IoBenchResult result, run_io_bench(*store, config));
  for (const IoTestResult& test : result.tests) {
    std::vector<double> gbps;
    for (const IoSample& s : test.samples) gbps.push_back(s.gbps);
    const bool write = test.test == IoTest::kSeqWrite;
    json f =
        figure_json(fmt::format("nvme {} ({})", write ? "write" : "read", label), "GB/s",
                    fmt::format("sequential {} of 64 MiB tensors through the swap store, {}, {}",
                                write ? "writes" : "reads", direct ? "O_DIRECT" : "buffered",
                                paths.size() == 1 ? paths.front() : fmt::format("striped over {} paths", paths.size())),
                    gbps, "fio (same files, io_uring)", fio_gbps[write ? 0 : 1], "fio not found on PATH: no baseline");
    f["paths"] = paths;
    f["warnings"] = warnings;
    figures.push_back(std::move(f));
  }
  return Status::ok();
}

// Device figures through zinf's Device interface: pinned host->device and device->host copies on
// the copy streams, a device-to-device copy (memory bandwidth: read + write), and the GEMM peak in
// bf16 (fp32 on the CPU backend, whose device is host memory).
Status device_figures(const std::string& kind_name, unsigned repeat,
                      const std::function<void(const std::string&)>& progress, json& figures) {
  device::DeviceOptions device_options;
  device_options.kind = kind_name == "cuda" ? device::DeviceKind::kCuda : device::DeviceKind::kCpu;
  ZINF_ASSIGN_OR_RETURN(std::unique_ptr<device::Device> device, device::make_device(device_options));
  constexpr std::size_t kBytes = std::size_t{256} << 20;
  ZINF_ASSIGN_OR_RETURN(device::DeviceBuffer host, device->allocate_host(kBytes, "suite pinned host buffer"));
  ZINF_ASSIGN_OR_RETURN(device::DeviceBuffer a, device->allocate(kBytes, "suite device buffer a"));
  ZINF_ASSIGN_OR_RETURN(device::DeviceBuffer b, device->allocate(kBytes, "suite device buffer b"));
  std::memset(host.data(), 1, kBytes);
  struct CopyFigure {
    const char* name;
    device::CopyKind kind;
    device::StreamRole role;
    void* dst;
    const void* src;
    double bytes_factor;  // a device-to-device copy reads and writes each byte
  };
  const CopyFigure copies[] = {
      {"host to device (pinned)", device::CopyKind::kHostToDevice, device::StreamRole::kHostToDevice, a.data(),
       host.data(), 1.0},
      {"device to host (pinned)", device::CopyKind::kDeviceToHost, device::StreamRole::kDeviceToHost, host.data(),
       a.data(), 1.0},
      {"device memory bandwidth (copy)", device::CopyKind::kDeviceToDevice, device::StreamRole::kCompute, b.data(),
       a.data(), 2.0},
  };
  for (const CopyFigure& c : copies) {
    std::vector<double> gbps;
    for (unsigned i = 0; i <= repeat; ++i) {
      ZINF_RETURN_IF_ERROR(device->synchronize());
      const auto start = std::chrono::steady_clock::now();
      device->copy(c.dst, c.src, kBytes, c.kind, device->stream(c.role));
      ZINF_RETURN_IF_ERROR(device->synchronize());
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (i == 0) continue;  // warm-up
      gbps.push_back(c.bytes_factor * static_cast<double>(kBytes) / seconds / 1e9);
      if (progress) progress(fmt::format("{} {}/{}: {:.2f} GB/s", c.name, i, repeat, gbps.back()));
    }
    figures.push_back(figure_json(c.name, "GB/s", fmt::format("256 MiB copies on {}", device->describe()), gbps, "", {},
                                  "no independent baseline in this build (the copy is the device's own)"));
  }
  const DType dtype = device->kind() == device::DeviceKind::kCuda ? DType::kBF16 : DType::kF32;
  std::vector<double> gflops;
  for (unsigned i = 0; i < std::max(1u, repeat / 2); ++i) {
    ZINF_ASSIGN_OR_RETURN(const probes::ComputePeak peak, probes::measure_matmul_peak(*device, dtype));
    gflops.push_back(peak.flops_per_s / 1e9);
    if (progress)
      progress(fmt::format("{} GEMM peak {}/{}: {:.1f} GFLOP/s", dtype_name(dtype), i + 1, std::max(1u, repeat / 2),
                           gflops.back()));
  }
  figures.push_back(figure_json(fmt::format("device {} matmul peak", dtype_name(dtype)), "GFLOP/s",
                                "best of three square GEMMs per sample (train's compute peak probe)", gflops, "", {},
                                "no independent baseline in this build"));
  return Status::ok();
}

}  // namespace

Result<json> run_bench_suite(const SuiteOptions& options, const reports::ConditionsSnapshot& started,
                             const std::function<void(const std::string&)>& progress) {
  std::string fio_program;
  if (options.fio && !options.paths.empty()) {
    const char* search_path = std::getenv("PATH");
    if (Result<std::string> found = find_program("fio", search_path == nullptr ? "/usr/bin:/bin" : search_path);
        found.is_ok()) {
      fio_program = *found;
    }
  }
  json record = reports::make_record_envelope("bench-suite", 1, started);
  record["input"] = {{"paths", options.paths},
                     {"nvme_bytes", options.nvme_bytes},
                     {"repeat", options.repeat},
                     {"device", options.device},
                     {"fio", !fio_program.empty()}};
  record["threads"] = kernels::cpu::compute_threads();
  record["spread_rule"] = kSpreadRule;
  json figures = json::array();
  MachineProbes probes;
  std::vector<double> z, b;
  ZINF_RETURN_IF_ERROR(
      run_probe(probes, &MachineProbes::memory_bandwidth, options.repeat, "memory bandwidth", "GB/s", progress, z, b));
  figures.push_back(figure_json("memory bandwidth", "GB/s",
                                "threaded triad a = b + 3c over three 128 MiB fp32 arrays (2 reads + 1 write)", z,
                                "libc memcpy, same threads and bytes", b));
  z.clear();
  b.clear();
  ZINF_RETURN_IF_ERROR(
      run_probe(probes, &MachineProbes::matmul_fp32, options.repeat, "fp32 matmul", "GFLOP/s", progress, z, b));
  figures.push_back(figure_json("fp32 matmul peak", "GFLOP/s", "2048^3 GEMM through zinf's CPU device ops", z,
                                "OpenBLAS sgemm called directly", b));
  z.clear();
  b.clear();
  ZINF_RETURN_IF_ERROR(run_probe(probes, &MachineProbes::cpu_adam, options.repeat, "cpu adam", "GB/s", progress, z, b));
  figures.push_back(figure_json("cpu adam", "GB/s", "AdamW over 16 Mi fp32 elements, 28 bytes moved per element", z,
                                "memory bandwidth (triad) in the same sample", b));
  if (!options.paths.empty()) {
    for (const std::string& path : options.paths) {
      ZINF_RETURN_IF_ERROR(nvme_figures({path}, path, options, fio_program, progress, figures));
    }
    if (options.paths.size() > 1) {
      ZINF_RETURN_IF_ERROR(nvme_figures(options.paths, "striped", options, fio_program, progress, figures));
    }
  }
  std::string device = options.device;
  if (device == "auto") {
    bool cuda = false;
    for (const BuildFeature& f : build_info().features) cuda = cuda || (f.name == "cuda" && f.enabled);
    device = cuda ? "cuda" : "none";
  }
  if (device != "none") {
    const Status status = device_figures(device, options.repeat, progress, figures);
    if (!status.is_ok()) {
      if (options.device != "auto") return status.with_context("--device " + device);
      record["device_note"] = "no usable CUDA device: " + status.message();
    }
  }
  record["figures"] = std::move(figures);
  // The envelope was made before the figures: its conditions end now, after the last one.
  record["conditions"] = reports::record_conditions(started);
  return record;
}

Rendered render_bench_suite(const json& record) {
  Rendered out;
  out.record = record;
  out.document.title = "zinf bench suite";
  for (reports::Section& s : reports::record_sections(record, "")) {
    if (s.title == "Other fields") continue;
    // The terminal gets no chart; Markdown and HTML (zinf report) do.
    out.document.sections.push_back(std::move(s));
  }
  out.csv.columns = {{"figure"},          {"unit"},  {"zinf_median"}, {"zinf_min"},   {"zinf_max"},       {"baseline"},
                     {"baseline_median"}, {"ratio"}, {"ratio_low"},   {"ratio_high"}, {"spread_too_wide"}};
  const auto number = [](const json& v) { return v.is_number() ? fmt::format("{}", v.get<double>()) : std::string(); };
  for (const json& f : record.at("figures")) {
    const json& base = f.at("baseline");
    const json& spread = f.at("ratio_spread");
    out.csv.rows.push_back({f.at("name").get<std::string>(), f.at("unit").get<std::string>(),
                            number(f.at("zinf").at("median")), number(f.at("zinf").at("min")),
                            number(f.at("zinf").at("max")), base.is_null() ? "" : base.value("name", std::string()),
                            base.is_null() ? "" : number(base.at("median")), number(f.at("ratio")),
                            spread.is_null() ? "" : number(spread.at("low")),
                            spread.is_null() ? "" : number(spread.at("high")),
                            spread.is_null() || !spread.at("too_wide").is_boolean()
                                ? ""
                                : (spread.at("too_wide").get<bool>() ? "true" : "false")});
  }
  return out;
}

void add_suite_flags(CLI::App& c, SuiteFlags& flags) {
  c.add_option("--path", flags.paths, "NVMe directory to measure (repeat for several; all together are also striped)")
      ->type_name("DIR");
  c.add_option("--size", flags.size, "Bytes per NVMe pass (default 1GiB), reserved on disk")->type_name("SIZE");
  c.add_option("--repeat", flags.repeat, "Samples of each figure, 2..100 (default 5)")->type_name("N");
  c.add_option("--device", flags.device, "Device figures: auto (CUDA when usable), none, cpu, cuda (default auto)")
      ->type_name("KIND");
  c.add_flag("--no-fio", flags.no_fio, "Skip fio, the NVMe baseline");
}

Result<SuiteOptions> parse_suite_options(const SuiteFlags& flags) {
  SuiteOptions options;
  for (const std::string& path : flags.paths) {
    if (path.empty()) return Status::invalid_argument("--path: '' is empty; expected a directory");
  }
  options.paths = flags.paths;
  ZINF_ASSIGN_OR_RETURN(options.nvme_bytes, parse_bytes(flags.size, "--size"));
  if (options.nvme_bytes < (64ull << 20)) {
    return Status::invalid_argument(
        fmt::format("--size: '{}' is less than 64MiB, one tensor of the NVMe figures; give e.g. 1GiB", flags.size));
  }
  ZINF_ASSIGN_OR_RETURN(const std::int64_t repeat, parse_positive_int(flags.repeat, "--repeat", 100));
  if (repeat < 2) {
    return Status::invalid_argument(fmt::format(
        "--repeat: '{}' gives no spread; expected 2..100 (each ratio needs its min and max)", flags.repeat));
  }
  options.repeat = static_cast<unsigned>(repeat);
  if (flags.device != "auto" && flags.device != "none" && flags.device != "cpu" && flags.device != "cuda") {
    return Status::invalid_argument(fmt::format("--device: '{}' is not one of auto, none, cpu, cuda", flags.device));
  }
  options.device = flags.device;
  options.fio = !flags.no_fio;
  return options;
}

std::function<void(const std::string&)> suite_progress(const Io& io) {
  return [&io](const std::string& line) {
    if (io.err_is_terminal) {
      io.err << "\r\033[K" << line << std::flush;
    } else {
      io.err << line << '\n';
    }
  };
}

namespace {

class BenchSuiteCommand final : public Subcommand {
 public:
  BenchSuiteCommand(CLI::App& bench, CLI::App** registered) {
    CLI::App* c = bench.add_subcommand(
        "suite",
        "The machine's figures next to their baselines: memory bandwidth, fp32 matmul, CPU Adam, NVMe, device");
    add_suite_flags(*c, flags_);
    add_output_options(*c, output_);
    c->footer(
        "Examples:\n"
        "  zinf bench suite --out suite/          (suite/suite.json and suite/suite.txt)\n"
        "  zinf bench suite --path /mnt/nvme0 --path /mnt/nvme1 --format md");
    *registered = c;
  }

  // --out names a DIRECTORY (created when missing): the record goes to DIR/suite.json and the
  // --format view (table by default) next to it as suite.txt, suite.md or suite.csv.
  Status run(const Io& io) override {
    // --out is a directory here, so only --format chooses the summary's format.
    ZINF_ASSIGN_OR_RETURN(const Format format, parse_format(output_.format.empty() ? "table" : output_.format));
    ZINF_ASSIGN_OR_RETURN(const SuiteOptions options, parse_suite_options(flags_));
    OutputOptions view = output_;
    std::string record_path;
    if (!output_.out_path.empty()) {
      std::error_code ec;
      if (std::filesystem::exists(output_.out_path, ec) && !std::filesystem::is_directory(output_.out_path, ec)) {
        return Status::invalid_argument(
            fmt::format("--out: '{}' is not a directory; the suite writes suite.json and its summary into a directory "
                        "(created when missing)",
                        output_.out_path));
      }
      ZINF_RETURN_IF_ERROR(check_writable_directory(output_.out_path, "--out"));
      const std::filesystem::path dir(output_.out_path);
      record_path = (dir / "suite.json").string();
      const char* extension = format == Format::kMarkdown ? "md" : format == Format::kCsv ? "csv" : "txt";
      view.out_path = format == Format::kJson ? std::string() : (dir / fmt::format("suite.{}", extension)).string();
    }
    const auto progress = suite_progress(io);
    ZINF_ASSIGN_OR_RETURN(const json record, run_bench_suite(options, io.started, progress));
    if (io.err_is_terminal) io.err << '\n';
    const Rendered rendered = render_bench_suite(record);
    if (record_path.empty()) return emit(output_, rendered, io);
    ZINF_RETURN_IF_ERROR(write_output_file(record_path, record.dump(2) + "\n", "--out", io));
    announce_written(record_path, io);
    if (view.out_path.empty()) return Status::ok();
    return emit(view, rendered, io);
  }

 private:
  SuiteFlags flags_;
  OutputOptions output_;
};

}  // namespace

std::unique_ptr<Subcommand> add_bench_suite_command(CLI::App& bench, CLI::App** registered) {
  return std::make_unique<BenchSuiteCommand>(bench, registered);
}

}  // namespace zinf::cli
