// `zinf bench ab` (bench_ab.h): the options, the interleaved runs, and the verdict through
// reports/compare's statistics. The samples the test sees are one per run (the run's median step
// time, its tokens/s, its final loss), not every step pooled: the steps of one run share its
// process, its memory layout and its moment, so they are not independent samples of the binary.
#include "apps/zinf/bench_ab.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/zinf/exit_codes.h"
#include "apps/zinf/output.h"
#include "apps/zinf/scratch_dir.h"
#include "apps/zinf/stop_signals.h"
#include "libengine/core/units.h"
#include "libengine/spec/json_input.h"
#include "libengine/spec/scenario.h"
#include "probes/latency_stats.h"
#include "probes/process.h"
#include "probes/ratio_spread.h"
#include "reports/chart.h"
#include "reports/compare.h"
#include "reports/record_envelope.h"

namespace zinf::cli {

// The measuring harness (probes/) this file calls.
using probes::ProcessOutput;
using probes::relative_spread;
using probes::run_process;
using probes::spread_of;

namespace {

using nlohmann::json;
using reports::Align;
using reports::Cell;

constexpr std::int64_t kMinPairs = 4;  // 4 against 4 is the fewest the U test can separate at alpha 0.05
constexpr std::int64_t kMaxPairs = 50;

struct Binary {
  std::string role;  // "base" or "new"
  std::string path;
  std::string version;  // the first line of `path --version`
};

std::string last_line(const std::string& text) {
  std::size_t end = text.find_last_not_of("\r\n \t");
  if (end == std::string::npos) return "";
  const std::size_t begin = text.rfind('\n', end);
  return text.substr(begin == std::string::npos ? 0 : begin + 1,
                     end + 1 - (begin == std::string::npos ? 0 : begin + 1));
}

// A regular, executable file that answers --version as zinf does.
Result<Binary> check_binary(const std::string& role, const std::string& path) {
  const std::string flag = "--" + role;
  struct stat info {};
  if (path.empty() || ::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode) || ::access(path.c_str(), X_OK) != 0) {
    return Status::invalid_argument(
        fmt::format("{}: '{}' is not an executable file; give the path of a zinf binary", flag, path));
  }
  const std::vector<std::string> argv = {path, "--version"};
  ZINF_ASSIGN_OR_RETURN(const ProcessOutput out, run_process(argv));
  const std::string first = out.out.substr(0, out.out.find('\n'));
  if (out.exit_status != 0 || first.rfind("zinf ", 0) != 0) {
    return Status::invalid_argument(fmt::format(
        "{}: '{}' is not a zinf binary (`{} --version` exited {} and printed '{}'); give the path of a zinf binary",
        flag, path, path, out.exit_status, first));
  }
  return Binary{role, path, first};
}

// One run's samples: median step time of the measured steps, tokens/s, final loss (when recorded).
Result<json> figures_of(const json& record, const Binary& binary) {
  if (!record.is_object()) {
    return Status::internal(fmt::format("bench ab: the {} binary's record is not a JSON object", binary.role));
  }
  std::vector<double> step_ms;
  const auto steps = record.find("steps");
  if (steps != record.end() && steps->is_array()) {
    for (const json& step : *steps) {
      if (step.is_object() && !step.value("warmup", false) && step.contains("step_ms") &&
          step.at("step_ms").is_number()) {
        step_ms.push_back(step.at("step_ms").get<double>());
      }
    }
  }
  if (step_ms.empty()) {
    return Status::invalid_argument(fmt::format(
        "bench ab: the {} binary's record has no measured step (every step a warm-up?); raise --steps", binary.role));
  }
  json figures = {{"step_ms", spread_of(step_ms).median}, {"measured_steps", step_ms.size()}};
  const json summary = record.value("summary", json::object());
  for (const char* key : {"tokens_per_s", "final_loss"}) {
    if (summary.is_object() && summary.contains(key) && summary.at(key).is_number()) figures[key] = summary.at(key);
  }
  return figures;
}

// `binary train scenario --format json --out record`: its figures, wall time and run conditions.
Result<json> run_once(const Binary& binary, const std::filesystem::path& scenario, std::optional<std::int64_t> steps,
                      const std::filesystem::path& record_path) {
  std::vector<std::string> argv = {binary.path, "train", scenario.string(), "--quiet",           "--no-resume",
                                   "--format",  "json",  "--out",           record_path.string()};
  if (steps) {
    argv.push_back("--steps");
    argv.push_back(std::to_string(*steps));
  }
  const auto start = std::chrono::steady_clock::now();
  ZINF_ASSIGN_OR_RETURN(const ProcessOutput out, run_process(argv));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (out.exit_status != 0) {
    std::string why = last_line(out.err);
    if (why.rfind("error: ", 0) == 0) why.erase(0, 7);  // the child's own prefix; ours comes from cli.cpp
    const std::string text = fmt::format("bench ab: the {} binary ({}) failed on the scenario (exit {}): {}",
                                         binary.role, binary.path, out.exit_status, why.empty() ? "no message" : why);
    // The child's own verdict: bad input stays bad input, anything else is a runtime failure.
    return out.exit_status == kExitBadInput ? Status::invalid_argument(text) : Status::internal(text);
  }
  ZINF_ASSIGN_OR_RETURN(const json record, spec::read_json_file(record_path.string()));
  ZINF_ASSIGN_OR_RETURN(json figures, figures_of(record, binary));
  figures["wall_seconds"] = wall;
  figures["conditions"] = record.value("conditions", json(nullptr));
  std::error_code ignored;
  std::filesystem::remove(record_path, ignored);
  return figures;
}

// The side record compare_records judges: one object per run, so "runs[].step_ms" is a sample set.
json side_record(const json& pairs, const char* side, const json& conditions) {
  json runs = json::array();
  for (const json& pair : pairs) {
    json run;
    for (const char* key : {"step_ms", "tokens_per_s", "final_loss"}) {
      if (pair.at(side).contains(key)) run[key] = pair.at(side).at(key);
    }
    runs.push_back(std::move(run));
  }
  return {{"schema", "zinf.bench-ab-side/1"}, {"conditions", conditions}, {"runs", std::move(runs)}};
}

Result<double> parse_threshold(const std::string& text) {
  std::string digits = text;
  const bool percent = !digits.empty() && digits.back() == '%';
  if (percent) digits.pop_back();
  char* end = nullptr;
  const double value = digits.empty() ? std::nan("") : std::strtod(digits.c_str(), &end);
  const double fraction = percent ? value / 100.0 : value;
  if (end == nullptr || *end != '\0' || !std::isfinite(fraction) || !(fraction > 0) || fraction > 10.0) {
    return Status::invalid_argument(
        fmt::format("--threshold: '{}' is not a change above 0 and up to 1000%, e.g. 5% or 0.05", text));
  }
  return fraction;
}

std::string figure_or_dash(const json& side, const char* key) {
  return side.contains(key) ? reports::format_figure(side.at(key).get<double>()) : std::string("-");
}

class BenchAbCommand final : public Subcommand {
 public:
  BenchAbCommand(CLI::App& bench, CLI::App** app) {
    cmd_ = bench.add_subcommand("ab",
                                "Run two zinf binaries in turns (A B B A ...) on one scenario in one run and judge "
                                "the new against the base as zinf compare does; exit 3 on regression");
    *app = cmd_;
    cmd_->add_option("--base", base_path_, "The baseline zinf binary")->required()->type_name("BIN_A");
    cmd_->add_option("--new", new_path_, "The zinf binary to judge")->required()->type_name("BIN_B");
    cmd_->add_option("scenario", scenario_path_, "Scenario JSON file both binaries train")
        ->required()
        ->type_name("SCENARIO");
    cmd_->add_option("--pairs", pairs_text_,
                     fmt::format("Runs of each binary, {}..{} (default 6); each is one sample", kMinPairs, kMaxPairs))
        ->type_name("N");
    cmd_->add_option("--steps", steps_text_, "Override the scenario's steps in every run")->type_name("S");
    cmd_->add_option("--threshold", threshold_text_, "Smallest change of a median that counts (default 5%)")
        ->type_name("PCT");
    add_output_options(*cmd_, output_);
    cmd_->footer(
        "Exit codes: 0 no regression, 3 a metric regressed (beyond --threshold, p < 0.05), 2 bad input (a binary, "
        "the scenario), 1 a run that failed.\nExample:\n"
        "  zinf bench ab --base base/zinf --new build/zinf scenarios/quickstart.json --pairs 6 --steps 30");
  }

  Status run(const Io& io) override;
  int exit_code_on_success() const override { return failed_ ? kExitRegression : kExitOk; }

 private:
  CLI::App* cmd_ = nullptr;
  std::string base_path_;
  std::string new_path_;
  std::string scenario_path_;
  std::string pairs_text_ = "6";
  std::string steps_text_;
  std::string threshold_text_ = "5%";
  OutputOptions output_;
  bool failed_ = false;
};

Status BenchAbCommand::run(const Io& io) {
  ZINF_RETURN_IF_ERROR(output_format(output_, /*allow_html=*/true).status());
  if (!output_.out_path.empty()) ZINF_RETURN_IF_ERROR(check_output_path(output_.out_path, "--out"));
  ZINF_ASSIGN_OR_RETURN(const std::int64_t pairs, parse_int_in_range(pairs_text_, "--pairs", kMinPairs, kMaxPairs));
  std::optional<std::int64_t> steps;
  if (!steps_text_.empty()) {
    ZINF_ASSIGN_OR_RETURN(steps,
                          parse_int_in_range(steps_text_, "--steps", spec::kStepsRange.min, spec::kStepsRange.max));
  }
  reports::CompareOptions options;
  ZINF_ASSIGN_OR_RETURN(options.threshold, parse_threshold(threshold_text_));
  ZINF_ASSIGN_OR_RETURN(const Binary base, check_binary("base", base_path_));
  ZINF_ASSIGN_OR_RETURN(const Binary candidate, check_binary("new", new_path_));
  ZINF_ASSIGN_OR_RETURN(json scenario, spec::read_json_file(scenario_path_));
  if (!scenario.is_object()) {
    return Status::invalid_argument(fmt::format("{}: a scenario is a JSON object", scenario_path_));
  }
  // Neither resuming from nor writing into the scenario's own checkpoint and output paths: every run
  // starts from scratch and leaves nothing behind but its record in the work directory.
  scenario.erase("checkpoint");
  scenario.erase("output");
  // SIGINT/SIGTERM are recorded rather than fatal while this object lives, so a stop ends the loop
  // below between runs and the work directory's destructor still runs.
  ZINF_ASSIGN_OR_RETURN(const std::unique_ptr<StopSignals> stop, StopSignals::install());
  ZINF_ASSIGN_OR_RETURN(ScratchDir work, ScratchDir::create("bench ab", "zinf-ab-"));
  const std::filesystem::path scenario_copy = work.path() / "scenario.json";
  ZINF_RETURN_IF_ERROR(write_output_file(scenario_copy.string(), scenario.dump(2) + "\n", "bench ab", io));

  json pair_rows = json::array();
  const std::int64_t total = 2 * pairs;
  std::int64_t done = 0;
  for (std::int64_t i = 0; i < pairs; ++i) {
    // A B, then B A: over every two pairs each binary runs first once and second once.
    const bool base_first = i % 2 == 0;
    json row = {{"pair", i + 1}, {"first", base_first ? "base" : "new"}};
    for (const Binary* b : base_first ? std::array{&base, &candidate} : std::array{&candidate, &base}) {
      const std::filesystem::path record_path = work.path() / fmt::format("run-{}-{}.json", i + 1, b->role);
      if (const int signal = stop->stop_signal(); signal != 0) {
        return Status::internal(fmt::format("bench ab: stopped by {} after {} of {} runs; nothing was judged",
                                            signal == SIGINT ? "SIGINT" : "SIGTERM", done, total));
      }
      ZINF_ASSIGN_OR_RETURN(json figures, run_once(*b, scenario_copy, steps, record_path));
      io.err << fmt::format("bench ab: run {}/{} {:<4} step {} ms (median of {})\n", ++done, total, b->role,
                            reports::format_figure(figures.at("step_ms").get<double>()),
                            figures.at("measured_steps").get<std::size_t>());
      row[b->role] = std::move(figures);
    }
    pair_rows.push_back(std::move(row));
  }

  // Both sides ran under the same interleaved conditions: this run's, from its start to now.
  json record = reports::make_record_envelope("bench-ab", 1, io.started);
  const json& conditions = record.at("conditions");
  ZINF_ASSIGN_OR_RETURN(const reports::Comparison comparison,
                        reports::compare_records(side_record(pair_rows, "base", conditions),
                                                 side_record(pair_rows, "new", conditions), options));
  failed_ = comparison.failed();

  Rendered out;
  out.document = reports::comparison_document(comparison, options, base.path, candidate.path);
  out.document.title = fmt::format("zinf bench ab: {} vs {} on {}", base.path, candidate.path, scenario_path_);
  out.csv = out.document.sections.back().table;
  reports::Section runs;
  runs.title = "Runs";
  runs.fields.emplace_back("base", fmt::format("{} ({})", base.path, base.version));
  runs.fields.emplace_back("new", fmt::format("{} ({})", candidate.path, candidate.version));
  runs.fields.emplace_back("scenario", scenario_path_);
  runs.fields.emplace_back("pairs", fmt::format("{} (order A B, B A, A B, ...: drift lands on both)", pairs));
  runs.fields.emplace_back("steps", steps ? std::to_string(*steps) : std::string("the scenario's"));
  // How far one binary's runs spread on this machine: a change much smaller than this needs many
  // pairs before the U test can see it, whatever the verdict above says.
  json spreads = json::object();
  for (const char* side : {"base", "new"}) {
    std::vector<double> step_ms;
    for (const json& row : pair_rows) step_ms.push_back(row.at(side).at("step_ms").get<double>());
    spreads[side] = relative_spread(step_ms);
  }
  runs.fields.emplace_back(
      "run spread", fmt::format("base {:.1f}%, new {:.1f}% ((max - min) / median of the runs' step times)",
                                spreads.at("base").get<double>() * 100.0, spreads.at("new").get<double>() * 100.0));
  runs.table.columns = {{"pair", Align::kRight},          {"first"},
                        {"base step ms", Align::kRight},  {"new step ms", Align::kRight},
                        {"base tokens/s", Align::kRight}, {"new tokens/s", Align::kRight}};
  for (const json& row : pair_rows) {
    runs.table.rows.push_back({std::to_string(row.at("pair").get<std::int64_t>()), row.at("first").get<std::string>(),
                               figure_or_dash(row.at("base"), "step_ms"), figure_or_dash(row.at("new"), "step_ms"),
                               figure_or_dash(row.at("base"), "tokens_per_s"),
                               figure_or_dash(row.at("new"), "tokens_per_s")});
  }
  runs.notes.push_back(
      "One sample per run: the median step time of its measured steps, its tokens/s and final loss. The test is "
      "compare's unpaired two-sided Mann-Whitney U; the pairing orders the runs, it is not a paired test.");
  out.document.sections.push_back(std::move(runs));

  record["scenario_path"] = scenario_path_;
  record["scenario"] = scenario;
  record["steps"] = steps ? json(*steps) : json(nullptr);
  record["order"] = "ABBA";
  record["step_ms_relative_spread"] = std::move(spreads);
  record["binaries"] = {{"base", {{"path", base.path}, {"version", base.version}}},
                        {"new", {{"path", candidate.path}, {"version", candidate.version}}}};
  record["pairs"] = std::move(pair_rows);
  record["comparison"] = reports::comparison_json(comparison, options);
  out.record = std::move(record);
  return emit(output_, out, io, /*allow_html=*/true);
}

}  // namespace

std::unique_ptr<Subcommand> add_bench_ab_command(CLI::App& bench, CLI::App** app) {
  return std::make_unique<BenchAbCommand>(bench, app);
}

}  // namespace zinf::cli
