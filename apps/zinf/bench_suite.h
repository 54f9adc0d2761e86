// `zinf bench suite`: the machine's figures in one zinf.bench-suite/1 record — memory bandwidth,
// fp32 matmul peak, CPU Adam, NVMe sequential read and write per path and striped over all paths,
// and on a device (CUDA) pinned host<->device bandwidth each way, device memory bandwidth and the
// GEMM peak in bf16 — each next to its baseline measured in the same run, alternating
// (machine_probes.h; fio for NVMe). `zinf hw probe` (cmd_hw.cpp) turns the record into a hardware
// profile. Field reference: docs/records/bench-suite-record.md.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/zinf/output.h"
#include "apps/zinf/subcommand.h"
#include "libengine/core/status.h"

namespace zinf::cli {

struct SuiteOptions {
  std::vector<std::string> paths;         // NVMe directories; empty: no NVMe figures
  std::uint64_t nvme_bytes = 1ull << 30;  // per pass per path set
  unsigned repeat = 5;
  std::string device = "auto";  // auto (cuda when usable), none, cpu, cuda: where device figures run
  bool fio = true;              // fio baseline when fio is on PATH
};

// Runs the suite; `progress` gets one line per sample (may be empty). The record's "figures" hold
// {name, unit, what, zinf: {samples, median, min, max}, baseline: {name, samples, ...} | null,
// ratio, ratio_spread, baseline_note}.
// `started` is cli::Io::started: the record's "conditions" span from it to the last figure.
Result<nlohmann::json> run_bench_suite(const SuiteOptions& options, const reports::ConditionsSnapshot& started,
                                       const std::function<void(const std::string&)>& progress);

// The table/markdown/csv views of a suite record.
Rendered render_bench_suite(const nlohmann::json& record);

// Registers `zinf bench suite` under `bench`; `*registered` is set to its CLI11 app (to tell whether
// it was the one parsed).
std::unique_ptr<Subcommand> add_bench_suite_command(CLI::App& bench, CLI::App** registered);

// The options `bench suite` and `hw probe` share (--path, --size, --repeat, --device, --no-fio),
// bound to strings that parse_suite_options() validates, naming each flag in errors.
struct SuiteFlags {
  std::vector<std::string> paths;
  std::string size = "1GiB";
  std::string repeat = "5";
  std::string device = "auto";
  bool no_fio = false;
};
void add_suite_flags(CLI::App& command, SuiteFlags& flags);
Result<SuiteOptions> parse_suite_options(const SuiteFlags& flags);

// Prints progress lines to `err` (on a terminal, each line replaces the last).
std::function<void(const std::string&)> suite_progress(const Io& io);

}  // namespace zinf::cli
