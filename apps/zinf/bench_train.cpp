#include "apps/zinf/bench_train.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "apps/zinf/bench_train_offload.h"
#include "apps/zinf/output.h"
#include "apps/zinf/plan_flags.h"
#include "apps/zinf/schedule_fit.h"
#include "kernels/threads.h"
#include "libengine/core/units.h"
#include "libengine/model/hf_names.h"
#include "libengine/spec/scenario.h"
#include "libengine/train/train_session.h"
#include "planner/shape_rule.h"
#include "probes/compute_peak.h"
#include "probes/latency_stats.h"
#include "probes/offload_bench.h"
#include "probes/process.h"
#include "probes/ratio_spread.h"
#include "reports/record_envelope.h"

namespace zinf::cli {

// The measuring harness (probes/) this file calls.
using probes::find_program;
using probes::kSpreadRule;
using probes::OffloadBenchResult;
using probes::ProcessOutput;
using probes::ratio_with_spread;
using probes::run_offload_bench;
using probes::run_process;
using probes::spread_of;

namespace {

using nlohmann::json;

// Collects the step times of the timed (post-warm-up) steps of one repetition.
class StepTimes final : public train::StepObserver {
 public:
  explicit StepTimes(std::int64_t warmup) : warmup_(warmup) {}
  void on_step(const train::StepMetrics& m) override {
    if (m.step >= warmup_) seconds.push_back(m.step_seconds);
  }
  std::vector<double> seconds;

 private:
  std::int64_t warmup_;
};

// A config.json for the PyTorch side, removed when the command ends (the file lives in the
// system's temporary directory, named after the process so concurrent runs do not collide).
class TempConfigFile {
 public:
  TempConfigFile() = default;
  TempConfigFile(const TempConfigFile&) = delete;
  TempConfigFile& operator=(const TempConfigFile&) = delete;
  ~TempConfigFile() {
    if (path_.empty()) return;
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  // Writes `config`; the path is then path().
  Status write(const json& config) {
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
    if (ec) return Status::io_error(fmt::format("bench train: no temporary directory: {}", ec.message()));
    path_ = (dir / fmt::format("zinf-bench-train-{}-config.json", static_cast<long>(::getpid()))).string();
    std::ofstream file(path_);
    file << config.dump(2) << '\n';
    if (!file.flush()) return Status::io_error(fmt::format("bench train: cannot write {}", path_));
    return Status::ok();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct SideResult {
  std::vector<double> tokens_per_s;  // median of each repetition
  std::vector<double> step_ms;       // every timed step of every repetition
};

// The first python3 that imports torch: $PYTHON, then python3 on PATH, then /usr/bin/python3.
// scripts/bench/torch_train.py ships in the checkout and zinf runs from <checkout>/build/<preset>/bin,
// so the folders above the executable are searched (a path compiled in would differ per clone and
// keep ccache from sharing objects between clones). Last resort: relative to the working directory.
std::string default_torch_script() {
  constexpr std::string_view kRelative = "scripts/bench/torch_train.py";
  std::error_code error;
  std::filesystem::path dir = std::filesystem::read_symlink("/proc/self/exe", error).parent_path();
  for (int up = 0; !error && up < 6 && !dir.empty(); ++up) {
    const std::filesystem::path candidate = dir / kRelative;
    if (std::filesystem::exists(candidate, error)) return candidate.string();
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  return std::string(kRelative);
}

Result<std::string> find_torch_python(const std::string& requested) {
  std::vector<std::string> candidates;
  if (!requested.empty()) {
    candidates.push_back(requested);
  } else {
    if (const char* env = std::getenv("PYTHON"); env != nullptr && env[0] != '\0') candidates.emplace_back(env);
    const char* path = std::getenv("PATH");
    if (Result<std::string> found = find_program("python3", path == nullptr ? "" : path); found.is_ok()) {
      candidates.push_back(found.value());
    }
    candidates.emplace_back("/usr/bin/python3");
  }
  for (const std::string& candidate : candidates) {
    const std::vector<std::string> argv{candidate, "-c", "import torch"};
    Result<ProcessOutput> probe = run_process(argv);
    if (probe.is_ok() && probe.value().exit_status == 0) return candidate;
  }
  return Status::not_found(
      fmt::format("--python: no python3 that imports torch among {} (Debian: apt-get install python3-torch)",
                  fmt::join(candidates, ", ")));
}

class BenchTrainCommand final : public Subcommand {
 public:
  explicit BenchTrainCommand(CLI::App& bench) {
    cmd_ = bench.add_subcommand("train",
                                "Training-step throughput of a scenario's model: zinf next to PyTorch on the same "
                                "model, threads and machine");
    cmd_->add_option("scenario", scenario_path_, "Scenario JSON (e.g. scenarios/bench-4l-1024.json)")
        ->required()
        ->type_name("FILE");
    cmd_->add_option("--steps", steps_text_, "Timed steps per repetition (default 10)")->type_name("N");
    cmd_->add_option("--warmup", warmup_text_, "Untimed steps before them in each repetition (default 3)")
        ->type_name("N");
    cmd_->add_option("--repeat", repeat_text_, "Repetitions of each side, alternating (default 3)")->type_name("N");
    threads_option_ = cmd_->add_option("--threads", threads_text_,
                                       "Compute threads for both sides (default: the scenario's; 0 = one per core)")
                          ->type_name("N");
    cmd_->add_flag("--torch", torch_, "Also run PyTorch (scripts/bench/torch_train.py) and print zinf/PyTorch");
    cmd_->add_flag("--zero0", zero0_,
                   "For a scenario with a \"zero\" placement: run it next to ZeRO-0 on the same model (alternating), "
                   "measure the swap store's sequential GB/s when a state is on NVMe, and print the offload targets "
                   "(offload tax, NVMe bound, prefetch stall and hit rate, host memory flatness)");
    cmd_->add_option("--python", python_, "python3 with torch (default: $PYTHON, python3, /usr/bin/python3)")
        ->type_name("PATH");
    cmd_->add_option("--torch-script", torch_script_, "Path of torch_train.py (default: the source tree's)")
        ->type_name("PATH");
    add_output_options(*cmd_, output_);
  }

  Status run(const Io& io) override;

 private:
  Status run_against_zero0(const spec::Scenario& scenario, const Io& io) const;
  Status parse_flags();
  Result<double> run_torch_once(const spec::Scenario& scenario, const std::string& python, const std::string& script,
                                SideResult& side, json& info) const;

  CLI::App* cmd_ = nullptr;
  std::string scenario_path_;
  // Integers are parsed by zinf (plain decimal, checked ranges), not by CLI11; see parse_flags().
  std::string steps_text_ = "10";
  std::string warmup_text_ = "3";
  std::string repeat_text_ = "3";
  std::string threads_text_;
  CLI::Option* threads_option_ = nullptr;
  std::int64_t steps_ = 10;
  std::int64_t warmup_ = 3;
  std::int64_t repeat_ = 3;
  std::optional<std::int64_t> threads_;
  bool torch_ = false;
  bool zero0_ = false;
  std::string python_;
  std::string torch_script_;
  OutputOptions output_;
  TempConfigFile hf_config_;  // the scenario's config.json for a non-GPT-2 model (--torch)
};

Result<double> BenchTrainCommand::run_torch_once(const spec::Scenario& s, const std::string& python,
                                                 const std::string& script, SideResult& side, json& info) const {
  std::vector<std::string> argv{python,      script,
                                "--layers",  std::to_string(s.shape.layers),
                                "--hidden",  std::to_string(s.shape.hidden),
                                "--heads",   std::to_string(s.shape.heads),
                                "--vocab",   std::to_string(s.shape.vocab),
                                "--seq",     std::to_string(s.seq),
                                "--batch",   std::to_string(s.batch),
                                "--steps",   std::to_string(steps_),
                                "--warmup",  std::to_string(warmup_),
                                "--threads", std::to_string(kernels::cpu::compute_threads()),
                                "--seed",    std::to_string(s.seed),
                                "--lr",      fmt::format("{}", s.optimizer.lr),
                                "--device",  std::string(device::device_kind_name(s.device)),
                                "--dtype",   std::string(dtype_name(s.precision))};
  const std::vector<std::string> adamw{
      "--beta1", fmt::format("{}", s.optimizer.beta1), "--beta2",        fmt::format("{}", s.optimizer.beta2),
      "--eps",   fmt::format("{}", s.optimizer.eps),   "--weight-decay", fmt::format("{}", s.optimizer.weight_decay)};
  argv.insert(argv.end(), adamw.begin(), adamw.end());
  if (!hf_config_.path().empty()) {
    argv.insert(argv.end(), {"--hf-config", hf_config_.path(), "--attn", "sdpa"});
  }
  ZINF_ASSIGN_OR_RETURN(const ProcessOutput out, run_process(argv));
  if (out.exit_status != 0) {
    std::string last = out.err;
    while (!last.empty() && last.back() == '\n') last.pop_back();
    last = last.substr(last.find_last_of('\n') == std::string::npos ? 0 : last.find_last_of('\n') + 1);
    return Status::io_error(fmt::format("{} failed (exit {}): {}", script, out.exit_status, last));
  }
  json parsed;
  try {
    const std::size_t line_start = out.out.find('{');
    parsed = json::parse(out.out.substr(line_start == std::string::npos ? 0 : line_start));
    for (const json& ms : parsed.at("step_ms")) side.step_ms.push_back(ms.get<double>());
    const json& config = parsed.at("config");
    info = {{"torch_version", parsed.at("torch_version")},
            {"threads", parsed.at("threads")},
            {"model", config.value("model", std::string("TorchGPT"))},
            {"attn_implementation", config.value("attn_implementation", json())},
            {"params", config.at("params")}};
    return parsed.at("tokens_per_s_median").get<double>();
  } catch (const json::exception& e) {
    return Status::io_error(fmt::format("{}: unreadable output ({}): {}", script, e.what(), out.out.substr(0, 200)));
  }
}

// A benchmark repetition is at most a million steps; threads share the scenario's range.
constexpr std::int64_t kMaxBenchSteps = 1'000'000;

Status BenchTrainCommand::parse_flags() {
  ZINF_ASSIGN_OR_RETURN(steps_, parse_int_in_range(steps_text_, "--steps", 1, kMaxBenchSteps));
  ZINF_ASSIGN_OR_RETURN(warmup_, parse_int_in_range(warmup_text_, "--warmup", 0, kMaxBenchSteps));
  ZINF_ASSIGN_OR_RETURN(repeat_, parse_int_in_range(repeat_text_, "--repeat", 1, 1000));
  if (threads_option_->count() > 0) {
    ZINF_ASSIGN_OR_RETURN(
        threads_, parse_int_in_range(threads_text_, "--threads", spec::kThreadsRange.min, spec::kThreadsRange.max));
  }
  return Status::ok();
}

Status BenchTrainCommand::run(const Io& io) {
  ZINF_RETURN_IF_ERROR(output_format(output_).status());
  ZINF_RETURN_IF_ERROR(parse_flags());
  if (!output_.out_path.empty()) ZINF_RETURN_IF_ERROR(check_output_path(output_.out_path, "--out"));
  const spec::ShapeResolver resolver = scenario_shape_resolver();
  ZINF_ASSIGN_OR_RETURN(spec::Scenario scenario, spec::load_scenario(scenario_path_, resolver));
  for (const std::string& warning : scenario.warnings) io.err << "warning: " << warning << "\n";
  const std::int64_t written_steps = scenario.steps;
  scenario.steps = warmup_ + steps_;
  if (const auto note = fit_schedule_warmup(scenario, written_steps, "bench train (--warmup + --steps)")) {
    io.err << *note << '\n';
  }
  if (threads_) scenario.threads = *threads_;
  scenario.checkpoint = {};
  scenario.eval.every = 0;
  scenario.output.record.clear();

  if (zero0_) return run_against_zero0(scenario, io);
  std::string python;
  std::string script = torch_script_;
  if (torch_) {
    const bool supported = scenario.precision == DType::kF32 ||
                           (scenario.precision == DType::kBF16 && scenario.device == device::DeviceKind::kCuda);
    if (!supported) {
      return Status::invalid_argument(
          fmt::format("scenario.precision: {} — the PyTorch comparison runs fp32, or bf16 on \"device\": \"cuda\"; use "
                      "one of those",
                      dtype_name(scenario.precision)));
    }
    ZINF_ASSIGN_OR_RETURN(python, find_torch_python(python_));
    if (script.empty()) script = default_torch_script();
    if (!std::filesystem::exists(script)) {
      return Status::not_found(fmt::format("--torch-script: {} does not exist", script));
    }
    // GPT-2 shapes run the twin (scripts/torch_gpt.py); any other family HF transformers' own class
    // of the scenario's config.json.
    ZINF_ASSIGN_OR_RETURN(const json hf_config, model::hf_config_json(scenario.shape));
    if (hf_config.value("model_type", std::string()) != "gpt2") ZINF_RETURN_IF_ERROR(hf_config_.write(hf_config));
  }

  ZINF_ASSIGN_OR_RETURN(std::unique_ptr<train::TrainSession> session, train::TrainSession::create(scenario));
  const int threads = kernels::cpu::compute_threads();
  ZINF_ASSIGN_OR_RETURN(const probes::ComputePeak peak,
                        probes::measure_matmul_peak(session->device(), session->model().config().compute_dtype));
  const double flops_per_step = session->model().flops_per_step();
  const double tokens_per_step = static_cast<double>(scenario.batch * scenario.seq);

  SideResult zinf_side;
  SideResult torch_side;
  json torch_info;
  for (std::int64_t rep = 0; rep < repeat_; ++rep) {
    io.err << fmt::format("bench train: repetition {}/{}: zinf...", rep + 1, repeat_) << std::flush;
    StepTimes times(warmup_);
    ZINF_RETURN_IF_ERROR(session->trainer().run(times).status());
    for (double s : times.seconds) zinf_side.step_ms.push_back(s * 1e3);
    zinf_side.tokens_per_s.push_back(tokens_per_step / spread_of(times.seconds).median);
    if (torch_) {
      io.err << " PyTorch..." << std::flush;
      ZINF_ASSIGN_OR_RETURN(double tps, run_torch_once(scenario, python, script, torch_side, torch_info));
      torch_side.tokens_per_s.push_back(tps);
    }
    io.err << " done\n";
  }

  const double zinf_tps = spread_of(zinf_side.tokens_per_s).median;
  const double zinf_step_ms = spread_of(zinf_side.step_ms).median;
  const double zinf_flops = flops_per_step / (zinf_step_ms / 1e3);
  Rendered out;
  out.record = reports::make_record_envelope("bench-train", 1, io.started);
  out.record["scenario_path"] = scenario_path_;
  out.record["scenario"] = spec::to_json(scenario);
  out.record["threads"] = threads;
  out.record["steps_per_repetition"] = steps_;
  out.record["warmup_steps"] = warmup_;
  out.record["repetitions"] = repeat_;
  out.record["compute_peak_flops_per_s"] = peak.flops_per_s;
  out.record["flops_per_step"] = flops_per_step;
  out.record["params"] = session->model().params().total_numel();
  out.record["zinf"] = {{"tokens_per_s_median", zinf_tps}, {"tokens_per_s_per_repetition", zinf_side.tokens_per_s},
                        {"step_ms", zinf_side.step_ms},    {"step_ms_median", zinf_step_ms},
                        {"flops_per_s", zinf_flops},       {"mfu", zinf_flops / peak.flops_per_s}};
  std::optional<double> ratio;
  if (torch_) {
    const double torch_tps = spread_of(torch_side.tokens_per_s).median;
    ratio = zinf_tps / torch_tps;
    out.record["torch"] = {{"tokens_per_s_median", torch_tps},
                           {"tokens_per_s_per_repetition", torch_side.tokens_per_s},
                           {"step_ms", torch_side.step_ms},
                           {"step_ms_median", spread_of(torch_side.step_ms).median},
                           {"mfu", flops_per_step * torch_tps / tokens_per_step / peak.flops_per_s},
                           {"python", python},
                           {"info", torch_info}};
    out.record["zinf_over_torch"] = *ratio;
    out.record["zinf_over_torch_spread"] = ratio_with_spread(zinf_side.tokens_per_s, torch_side.tokens_per_s);
    out.record["spread_rule"] = kSpreadRule;
  }
  // One peak probe per run here; a step faster than it means the load changed between them (issue 15).
  if (zinf_flops > peak.flops_per_s) {
    out.record["zinf"]["mfu_inconsistent"] =
        fmt::format("MFU {:.2f} exceeds 1: the steps ran faster than the matmul probe; the machine's load changed",
                    zinf_flops / peak.flops_per_s);
  }

  out.document.title = "zinf bench train";
  reports::Section setup;
  setup.title = "Setup";
  setup.fields.emplace_back("scenario", scenario_path_);
  setup.fields.emplace_back(
      "model", fmt::format("{} layers, hidden {}, {} heads, vocab {}, seq {}, batch {}, {}, {} parameters",
                           scenario.shape.layers, scenario.shape.hidden, scenario.shape.heads, scenario.shape.vocab,
                           scenario.seq, scenario.batch, dtype_name(scenario.precision),
                           format_count(static_cast<double>(session->model().params().total_numel()))));
  setup.fields.emplace_back(
      "runs", fmt::format("{} repetitions x ({} warm-up + {} timed steps), {} threads, alternating", repeat_, warmup_,
                          steps_, threads));
  setup.fields.emplace_back("matmul peak", fmt::format("{} ({} {}^3, same run)", format_flops(peak.flops_per_s),
                                                       peak.kind, peak.matrix_size));
  out.document.sections.push_back(std::move(setup));
  reports::Section results;
  results.title = "Training step";
  results.table.columns = {{"engine"},
                           {"tokens/s", reports::Align::kRight},
                           {"step ms", reports::Align::kRight},
                           {"TFLOP/s", reports::Align::kRight},
                           {"MFU", reports::Align::kRight}};
  results.table.rows.push_back({"zinf", reports::Cell(fmt::format("{:.0f}", zinf_tps), reports::Emphasis::kStrong),
                                fmt::format("{:.1f}", zinf_step_ms), fmt::format("{:.3f}", zinf_flops / 1e12),
                                zinf_flops > peak.flops_per_s
                                    ? reports::Cell("inconsistent", reports::Emphasis::kBad)
                                    : reports::Cell(fmt::format("{:.1f}%", 100.0 * zinf_flops / peak.flops_per_s))});
  if (zinf_flops > peak.flops_per_s) {
    results.notes.push_back(out.record["zinf"]["mfu_inconsistent"].get<std::string>());
  }
  if (torch_) {
    const json& t = out.record["torch"];
    results.table.rows.push_back(
        {"PyTorch " + torch_info.value("torch_version", std::string()),
         fmt::format("{:.0f}", t["tokens_per_s_median"].get<double>()),
         fmt::format("{:.1f}", t["step_ms_median"].get<double>()),
         fmt::format("{:.3f}", flops_per_step * t["tokens_per_s_median"].get<double>() / tokens_per_step / 1e12),
         fmt::format("{:.1f}%", 100.0 * t["mfu"].get<double>())});
    const json& spread = out.record["zinf_over_torch_spread"];
    const bool wide = spread["too_wide"].is_boolean() && spread["too_wide"].get<bool>();
    results.fields.emplace_back(
        "zinf / PyTorch",
        reports::Cell(
            fmt::format("{:.2f}x tokens/s (range {}..{}){}", *ratio,
                        spread["low"].is_number() ? fmt::format("{:.2f}", spread["low"].get<double>()) : "-",
                        spread["high"].is_number() ? fmt::format("{:.2f}", spread["high"].get<double>()) : "-",
                        wide ? ", spread too wide to judge" : ""),
            wide            ? reports::Emphasis::kWarn
            : *ratio >= 1.0 ? reports::Emphasis::kGood
                            : reports::Emphasis::kBad));
    results.notes.push_back(std::string("Spread rule: ") + std::string(kSpreadRule));
    if (torch_info.value("model", std::string()) != "TorchGPT") {
      results.notes.push_back(fmt::format(
          "PyTorch ran transformers' {} of the scenario's config.json (attn_implementation {}, fp32), {} parameters",
          torch_info.value("model", std::string()), torch_info.value("attn_implementation", std::string()),
          torch_info.at("params").dump()));
    }
  }
  out.document.sections.push_back(std::move(results));
  out.csv.columns = {{"engine"}, {"tokens_per_s"}, {"step_ms"}, {"flops_per_s"}, {"mfu"}};
  out.csv.rows.push_back({"zinf", fmt::format("{:.1f}", zinf_tps), fmt::format("{:.3f}", zinf_step_ms),
                          fmt::format("{:.4g}", zinf_flops), fmt::format("{:.4f}", zinf_flops / peak.flops_per_s)});
  if (torch_) {
    const json& t = out.record["torch"];
    out.csv.rows.push_back(
        {"torch", fmt::format("{:.1f}", t["tokens_per_s_median"].get<double>()),
         fmt::format("{:.3f}", t["step_ms_median"].get<double>()),
         fmt::format("{:.4g}", flops_per_step * t["tokens_per_s_median"].get<double>() / tokens_per_step),
         fmt::format("{:.4f}", t["mfu"].get<double>())});
  }
  return emit(output_, out, io);
}

Status BenchTrainCommand::run_against_zero0(const spec::Scenario& scenario, const Io& io) const {
  if (!scenario.zero.partitioned()) {
    return Status::invalid_argument(
        "--zero0: the scenario has no \"zero\" placement to compare with ZeRO-0 (e.g. scenarios/offload-cpu.json)");
  }
  if (torch_) return Status::invalid_argument("--zero0: not together with --torch; run them separately");
  ZINF_ASSIGN_OR_RETURN(OffloadBenchResult result,
                        run_offload_bench(scenario, warmup_, repeat_, [&io](const std::string& line) {
                          io.err << "bench train: " << line << '\n';
                        }));
  const OffloadBenchRun run{scenario_path_, steps_, warmup_, repeat_};
  return emit(output_, render_offload_bench(scenario, run, result, io.started), io);
}

}  // namespace

std::unique_ptr<Subcommand> add_bench_train_command(CLI::App& bench) {
  return std::make_unique<BenchTrainCommand>(bench);
}

}  // namespace zinf::cli
