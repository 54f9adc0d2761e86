// `zinf train scenario.json`: trains the scenario's GPT-like model on the CPU backend with the
// device budget it names — ZeRO-0 states, AdamW with clipping and a schedule, optional fp16 loss
// scaling, activation checkpointing, tiling — showing progress on stderr and ending with a run record
// (per-step loss/time/tokens-per-second, TFLOP/s and MFU against a same-run matmul peak, peak memory
// per tier). Setup is all here; the loop is train::Trainer.
#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "apps/zinf/cli.h"
#include "apps/zinf/delayed_notice.h"
#include "apps/zinf/exit_codes.h"
#include "apps/zinf/hf_train_scenario.h"
#include "apps/zinf/output.h"
#include "apps/zinf/plan_flags.h"
#include "apps/zinf/rank_spawner.h"
#include "apps/zinf/schedule_fit.h"
#include "apps/zinf/stop_signals.h"
#include "apps/zinf/subcommand.h"
#include "apps/zinf/train_launch.h"
#include "apps/zinf/train_plan.h"
#include "apps/zinf/train_progress.h"
#include "apps/zinf/train_record.h"
#include "kernels/threads.h"
#include "libengine/comm/communicator_factory.h"
#include "libengine/comm/launch_info.h"
#include "libengine/core/units.h"
#include "libengine/spec/scenario.h"
#include "libengine/train/train_session.h"
#include "planner/engine_model.h"
#include "planner/shape_rule.h"
#include "probes/compute_peak.h"

namespace zinf::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Peak resident set of this process (VmHWM), 0 where /proc is unavailable.
std::uint64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

// Resets the peak resident set (VmHWM) to the current one (Linux: "5" to /proc/self/clear_refs), so
// that the peak the record reports is the run's, not the plan's probes' (3 x 128 MiB arrays before
// step 1). False where the kernel refuses.
bool reset_peak_rss() {
  std::ofstream clear_refs("/proc/self/clear_refs");
  clear_refs << "5";
  clear_refs.flush();
  return static_cast<bool>(clear_refs);
}

// Every rank's own figures (step times, memory peaks) from its record, gathered on every rank.
Result<nlohmann::json> gather_rank_figures(comm::Communicator& comm, const reports::TrainRecord& record) {
  const reports::TrainSummary& summary = record.summary;
  const reports::TrainMemory& memory = record.memory;
  const auto number = [](const nlohmann::json& value) { return value.is_number() ? value.get<double>() : 0.0; };
  const nlohmann::json& comm_figures = record.engine.at("comm");
  const std::array<double, 8> mine = {summary.step_ms.median,
                                      summary.forward_backward_ms_median,
                                      summary.optimizer_ms_median,
                                      static_cast<double>(memory.device.peak_bytes),
                                      static_cast<double>(memory.host.peak_bytes),
                                      static_cast<double>(memory.host.peak_rss_bytes),
                                      number(comm_figures.at("busy_ms_median")),
                                      number(comm_figures.at("wait_ms_median"))};
  // Each rank fills its own block; the sum over ranks is everyone's figures.
  std::vector<double> all(mine.size() * static_cast<std::size_t>(comm.world_size()), 0.0);
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(mine.size()) * comm.rank());
  ZINF_RETURN_IF_ERROR(comm.all_reduce_host(all));
  nlohmann::json per_rank = nlohmann::json::array();
  for (int rank = 0; rank < comm.world_size(); ++rank) {
    const double* f = all.data() + mine.size() * static_cast<std::size_t>(rank);
    per_rank.push_back({{"rank", rank},
                        {"step_ms_median", f[0]},
                        {"forward_backward_ms_median", f[1]},
                        {"optimizer_ms_median", f[2]},
                        {"device_peak_bytes", f[3]},
                        {"host_peak_bytes", f[4]},
                        {"peak_rss_bytes", f[5]},
                        {"comm_busy_ms_median", f[6]},
                        {"comm_wait_ms_median", f[7]}});
  }
  return nlohmann::json{{"world_size", comm.world_size()}, {"backend", comm.backend()}, {"per_rank", per_rank}};
}

// Writes the run record to `path` (creating its directory), then says where on io.err unless quiet.
Status write_record(const std::string& path, const nlohmann::json& record, std::string_view field, bool quiet,
                    const Io& io) {
  const std::filesystem::path record_path(path);
  std::error_code ec;
  if (record_path.has_parent_path()) std::filesystem::create_directories(record_path.parent_path(), ec);
  ZINF_RETURN_IF_ERROR(write_output_file(path, record.dump(2) + "\n", field, io));
  if (!quiet) io.err << "run record: " << path << '\n';
  return Status::ok();
}

// Forwards the loop's measurements to the progress display and keeps them for the record — also
// what a run that fails midway records: the step it started at, its steps, its last checkpoint.
class RunObserver final : public train::StepObserver {
 public:
  // `stop`: the signals that ask the run to stop after its step (a single process); may be null.
  RunObserver(TrainProgress& progress, TrainRun& run, const StopSignals* stop)
      : progress_(progress), run_(run), stop_(stop) {}
  void on_start(std::int64_t first_step, std::int64_t total_steps) override {
    run_.outcome.first_step = first_step;
    progress_.start(first_step, total_steps);
  }
  void on_step(const train::StepMetrics& metrics) override {
    run_.steps.push_back(metrics);
    progress_.step(metrics);
  }
  void on_eval(const train::EvalMetrics& metrics) override {
    run_.evals.push_back(metrics);
    progress_.eval(metrics);
  }
  void on_checkpoint(std::int64_t step, const std::filesystem::path& path, double seconds) override {
    run_.outcome.last_checkpoint = path;
    progress_.checkpoint(step, path, seconds);
  }
  bool stop_requested() const override { return stop_ != nullptr && stop_->stop_signal() != 0; }

 private:
  TrainProgress& progress_;
  TrainRun& run_;
  const StopSignals* stop_;
};

class TrainCommand final : public Subcommand {
 public:
  explicit TrainCommand(CLI::App& app) {
    CLI::App* cmd = cmd_ =
        app.add_subcommand("train", "Train a GPT-like model from a scenario file (schema: scenarios/README.md)");
    cmd->add_option("scenario", scenario_path_, "Scenario JSON file, e.g. scenarios/quickstart.json")
        ->type_name("FILE");
    cmd->add_option("--hf-config", hf_config_,
                    "Instead of a scenario: train the model of this Hugging Face config.json (llama, mistral, qwen2, "
                    "gpt2) with defaults that fit this machine, printed in one line")
        ->type_name("FILE");
    // Integers are taken as text and parsed by zinf (plain decimal, the scenario's own ranges), not
    // by CLI11, which reads "0x10" as 16 and clamps 2^64 to 2^63 - 1.
    steps_option_ =
        cmd->add_option("--steps", steps_, "Override the scenario's steps (a resumed run continues to this step)")
            ->type_name("N");
    threads_option_ =
        cmd->add_option("--threads", threads_, "Override the scenario's compute threads (0 = one per available core)")
            ->type_name("N");
    cmd->add_option("--record", record_path_, "Write the JSON run record here (overrides output.record; - is stdout)")
        ->type_name("FILE");
    stop_after_option_ =
        cmd->add_option("--stop-after", stop_after_,
                        "End after this step, writing a checkpoint there (the scenario needs a checkpoint section); "
                        "the run's length "
                        "and LR schedule stay the scenario's, so a later `zinf train` resumes the same curve")
            ->type_name("STEP");
    cmd->add_flag("--no-resume", no_resume_, "Start from scratch even when checkpoint.dir holds a checkpoint");
    cmd->add_flag("--quiet", quiet_, "No progress output on stderr");
    cmd->add_option("--ranks", ranks_text_,
                    "Start mpirun with N data-parallel ranks on this machine and train there (as `mpirun -np N zinf "
                    "train ...`)")
        ->type_name("N");
    comm_timeout_option_ = cmd->add_option("--comm-timeout", comm_timeout_,
                                           "Seconds a rank waits for its peers in a collective before failing "
                                           "(default 300; under mpirun/srun)")
                               ->type_name("SECONDS");
    cmd->add_option("--hw", hw_,
                    "Plan the run with this hardware profile (name or zinf.hardware/1 file) instead of measuring the "
                    "memory and NVMe bandwidth in this run")
        ->type_name("NAME|FILE");
    add_output_options(*cmd, output_);
    cmd->footer(
        "Examples:\n"
        "  zinf train scenarios/quickstart.json\n"
        "  zinf train scenarios/bench-4l-1024.json --steps 10 --format json --out run.json\n"
        "Progress goes to stderr (a bar on a terminal, step lines otherwise); the summary to stdout.");
  }

  Status run(const Io& io) override;
  std::optional<int> delegated_exit_code() const override { return delegated_; }

 private:
  Status check_outputs(const spec::Scenario& scenario, std::string_view record_field) const;

  std::string scenario_path_;
  std::string hf_config_;
  std::string steps_;
  std::string threads_;
  std::string stop_after_;
  CLI::Option* steps_option_ = nullptr;
  CLI::Option* threads_option_ = nullptr;
  CLI::Option* stop_after_option_ = nullptr;
  std::string record_path_;
  std::string comm_timeout_;
  std::string ranks_text_;
  std::string hw_;
  std::optional<int> delegated_;
  CLI::App* cmd_ = nullptr;
  CLI::Option* comm_timeout_option_ = nullptr;
  bool no_resume_ = false;
  bool quiet_ = false;
  OutputOptions output_;
};

// Every path the run will write, checked before step 1: a run must not train for hours and then
// fail to write its record, and an unwritable checkpoint.dir must not wait for the first save.
Status TrainCommand::check_outputs(const spec::Scenario& scenario, std::string_view record_field) const {
  if (!scenario.output.record.empty()) {
    ZINF_RETURN_IF_ERROR(check_output_path(scenario.output.record, record_field, /*create_parents=*/true));
  }
  if (!output_.out_path.empty()) ZINF_RETURN_IF_ERROR(check_output_path(output_.out_path, "--out"));
  if (!scenario.checkpoint.dir.empty()) {
    ZINF_RETURN_IF_ERROR(check_writable_directory(scenario.checkpoint.dir, "scenario.checkpoint.dir"));
  }
  return Status::ok();
}

Status TrainCommand::run(const Io& io) {
  const Clock::time_point setup_start = Clock::now();
  ZINF_RETURN_IF_ERROR(output_format(output_).status());
  std::optional<std::int64_t> steps;
  std::optional<std::int64_t> threads;
  std::optional<std::int64_t> stop_after;
  if (steps_option_->count() > 0) {
    ZINF_ASSIGN_OR_RETURN(steps, parse_int_in_range(steps_, "--steps", spec::kStepsRange.min, spec::kStepsRange.max));
  }
  if (threads_option_->count() > 0) {
    ZINF_ASSIGN_OR_RETURN(threads,
                          parse_int_in_range(threads_, "--threads", spec::kThreadsRange.min, spec::kThreadsRange.max));
  }
  if (stop_after_option_->count() > 0) {
    ZINF_ASSIGN_OR_RETURN(
        stop_after, parse_int_in_range(stop_after_, "--stop-after", spec::kStepsRange.min, spec::kStepsRange.max));
  }
  std::optional<int> ranks;
  if (!ranks_text_.empty()) {
    ZINF_ASSIGN_OR_RETURN(ranks, parse_ranks(ranks_text_));
  }
  const spec::ShapeResolver resolver = scenario_shape_resolver();
  if (scenario_path_.empty() == hf_config_.empty()) {
    return Status::invalid_argument(
        scenario_path_.empty()
            ? "scenario: required; give a scenario file, or --hf-config FILE"
            : fmt::format("--hf-config: not allowed together with the scenario {} (give one)", scenario_path_));
  }
  spec::Scenario scenario;
  if (!hf_config_.empty()) {
    ZINF_ASSIGN_OR_RETURN(const HfTrainScenario built, hf_train_scenario(hf_config_, physical_memory_bytes()));
    ZINF_ASSIGN_OR_RETURN(scenario, spec::parse_scenario(built.scenario, "hf-config.json", resolver));
    scenario_path_ = "--hf-config " + hf_config_;
    if (!quiet_ && ranks_text_.empty()) io.err << built.summary << '\n';
  } else {
    ZINF_ASSIGN_OR_RETURN(scenario, spec::load_scenario(scenario_path_, resolver));
  }
  // Under --ranks the ranks print the scenario's warnings themselves.
  if (!ranks) {
    for (const std::string& warning : scenario.warnings) io.err << "warning: " << warning << "\n";
  }
  // --stop-after exists to resume later; without a checkpoint directory the run would end early
  // and save nothing to resume from, silently.
  if (stop_after && scenario.checkpoint.dir.empty()) {
    return Status::invalid_argument(fmt::format(
        "--stop-after: {} ends the run early to resume it later, but {} has no checkpoint section "
        "(checkpoint.dir), so nothing would be saved; add \"checkpoint\": {{\"dir\": \"...\"}} to the scenario, or "
        "use --steps {} for a shorter run",
        *stop_after, scenario_path_, *stop_after));
  }
  if (steps) {
    const std::int64_t written_steps = scenario.steps;
    scenario.steps = *steps;
    const std::optional<std::string> note = fit_schedule_warmup(scenario, written_steps, "--steps");
    if (note && !quiet_ && !ranks) io.err << *note << '\n';
  }
  if (threads) scenario.threads = *threads;
  if (!record_path_.empty()) scenario.output.record = record_path_;
  const std::string_view record_field = record_path_.empty() ? "scenario.output.record" : "--record";
  ZINF_RETURN_IF_ERROR(check_outputs(scenario, record_field));
  // A bad profile fails now, not after the steps.
  if (!hw_.empty()) {
    const Result<planner::HardwareProfile> profile = planner::load_hardware_profile(hw_);
    if (!profile.is_ok()) return profile.status().with_context("--hw");
  }
  if (ranks) {
    // Everything above and the scenario against the world size are checked here, once, before any
    // rank starts; each rank then re-reads and checks everything itself. mpirun's exit status is
    // this command's, or 128 + the signal that stopped it.
    ZINF_ASSIGN_OR_RETURN(delegated_, launch_train_ranks(scenario, *ranks, args_without_ranks(*cmd_), !no_resume_, io));
    return Status::ok();
  }
  const int cores = kernels::cpu::available_cores();
  if (!quiet_ && scenario.threads > cores) {
    io.err << fmt::format("warning: {} compute threads on {} available core{}: asked for, but slower than {}\n",
                          scenario.threads, cores, cores == 1 ? "" : "s", cores);
  }

  // Under mpirun/srun every rank runs this; rank 0 alone prints and writes the record.
  ZINF_ASSIGN_OR_RETURN(const comm::LaunchInfo launch, comm::launch_info_from_environment());
  const bool lead = launch.rank == 0;
  const bool quiet = quiet_ || !lead;
  std::ostream& err = io.err;
  comm::CommOptions comm_options;
  if (comm_timeout_option_->count() > 0) {
    ZINF_ASSIGN_OR_RETURN(const std::int64_t timeout_s, parse_int_in_range(comm_timeout_, "--comm-timeout", 1, 86400));
    comm_options.timeout = std::chrono::seconds(timeout_s);
  }
  train::TrainSessionOptions session_options;
  session_options.resume = !no_resume_;
  session_options.stop_after = stop_after.value_or(0);
  // Shared with the notice below, whose thread may write while preparation warns.
  std::mutex err_mutex;
  session_options.on_warning = [quiet, &err, &err_mutex](const std::string& line) {
    const std::lock_guard<std::mutex> writing(err_mutex);
    if (!quiet) err << "warning: " << line << '\n';
  };
  session_options.local_size = launch.local_size;
  // One process alone trains without a communicator factory and with its copies on the training
  // thread, as `zinf bench train` does: a lone rank can afford that, and it saves ~300 thread
  // hand-offs a step on scenarios/offload-nvme.json (device/cpu_device.h).
  if (launch.world_size > 1) {
    session_options.make_comm = [&](device::Device& device) { return comm::create_communicator(device, comm_options); };
    session_options.copy_threads = true;
  }
  // Allocating and initialising a large model's states (page-locked host memory, swap files,
  // billions of weights) can take minutes with nothing else to show: past 3 s, say so; the
  // training line says how long it took. A quick preparation (or a refusal) prints nothing more.
  const Clock::time_point preparing = Clock::now();
  Result<std::unique_ptr<train::TrainSession>> created = [&] {
    std::optional<DelayedNotice> notice;
    if (!quiet) {
      notice.emplace(err, err_mutex,
                     fmt::format("preparing {}: allocating and initialising the model states...", scenario.name),
                     std::chrono::seconds(3));
    }
    return train::TrainSession::create(scenario, std::move(session_options));
  }();
  ZINF_ASSIGN_OR_RETURN(std::unique_ptr<train::TrainSession> session, std::move(created));
  device::Device& device = session->device();
  const train::BatchSource& data = session->data();
  model::Gpt& model = session->model();

  TrainRun run;
  run.started = io.started;
  run.scenario_path = scenario_path_;
  run.scenario = spec::to_json(scenario);
  run.data_description = data.describe();
  run.entropy_rate_nats = data.entropy_rate_nats();
  run.unigram_entropy_nats = data.unigram_entropy_nats();
  run.device_description = device.describe();
  run.engine.description = session->states().describe();
  // The states describe overlap_optimizer as set; the step also needs no global gradient norm to
  // step sub-groups during the backward pass. With clipping or fp16 loss scaling it steps after the
  // backward pass, and the description must not say "overlapped" beside "0% stepped during".
  if (scenario.optimizer.grad_clip > 0 || scenario.precision == DType::kF16) {
    constexpr std::string_view kOverlapped = "; optimizer overlapped with the backward pass";
    if (const std::size_t at = run.engine.description.find(kOverlapped); at != std::string::npos) {
      run.engine.description.replace(
          at, kOverlapped.size(),
          "; optimizer stepped after the backward pass (overlap_optimizer is on, but the step needs the global "
          "gradient norm first: clipping or fp16 loss scaling)");
    }
  }
  run.engine.zero = spec::to_json(session->zero());
  run.engine.checkpoints = model.checkpoints().count();
  run.engine.host_checkpoints = model.checkpoints().host_checkpoints();
  run.engine.checkpoint_device_slots = model.checkpoints().device_slots();
  run.engine.checkpoint_bytes = model.checkpoints().checkpoint_bytes();
  run.engine.tiling = {
      {"auto", scenario.tiling_auto},
      {"per_operator", spec::to_json(scenario.operator_tiling)},
      {"choice", spec::describe_choice(scenario.operator_tiling, scenario.tiling_auto, scenario.zero)}};
  run.threads = kernels::cpu::compute_threads();
  const spec::ModelShape& shape = scenario.shape;
  run.model_shape = {{"layers", shape.layers},
                     {"hidden", shape.hidden},
                     {"heads", shape.heads},
                     {"ffn_hidden", shape.ffn_hidden},
                     {"vocab", shape.vocab},
                     {"max_positions", shape.max_positions},
                     {"tied_embeddings", shape.tied_embeddings}};
  run.params = static_cast<std::uint64_t>(model.params().total_numel());
  run.flops_per_step = model.flops_per_step();
  run.activation_bytes = model.activation_bytes();
  ZINF_ASSIGN_OR_RETURN(run.peak, probes::measure_matmul_peak(device, model.config().compute_dtype));
  // The plan's hardware figures are measured now, before step 1 (the probes cannot disturb steps
  // that have not started, and a probe that cannot run — no room for its 128 MiB next to the run's
  // swap files — is recorded as unmeasured here rather than costing a finished run its record).
  ZINF_ASSIGN_OR_RETURN(RunHardware hardware,
                        run_hardware(scenario, hw_, run.peak.flops_per_s, scenario.device == device::DeviceKind::kCpu));
  if (!quiet) {
    for (const std::string& what : hardware.unmeasured) {
      io.err << "warning: " << what << "; the plan's times are not predicted\n";
    }
  }
  if (!reset_peak_rss() && !quiet) {
    io.err << "warning: the peak RSS in the record includes the plan's probes (3 x 128 MiB) before step 1: this "
              "kernel does not reset it (/proc/self/clear_refs)\n";
  }

  const ProgressMode mode = quiet                ? ProgressMode::kQuiet
                            : io.err_is_terminal ? ProgressMode::kBar
                                                 : ProgressMode::kLines;
  TrainProgress progress(io.err, mode, scenario.output.log_every, io.terminal_width);
  // Every rank on this node runs its own compute threads on the same cores.
  progress.set_machine(run.threads * std::max(1, static_cast<int>(launch.local_size)), kernels::cpu::available_cores());
  comm::Communicator& comm = session->comm();
  if (!quiet) {
    if (comm.world_size() > 1) {
      io.err << fmt::format("data parallel over {} ranks ({}), {} per node; {} rows of each batch per rank\n",
                            comm.world_size(), comm.backend(), comm.local_size(), scenario.batch / comm.world_size());
    }
    io.err << fmt::format("training {} ({} parameters) on {}, {} threads; {} (ready in {:.1f} s)\n", scenario.name,
                          format_count(static_cast<double>(run.params)), run.device_description, run.threads,
                          run.data_description, std::chrono::duration<double>(Clock::now() - preparing).count())
           << std::flush;
    io.err << fmt::format("engine: {}\n", run.engine.description);
    if (scenario.tiling_auto || scenario.tiling > 1) {
      io.err << fmt::format("tiling: {}\n", run.engine.tiling.at("choice").get<std::string>());
    }
    if (run.engine.host_checkpoints > 0) {
      io.err << fmt::format("activation checkpoints: {} of {} in host memory ({} each), {} device slots\n",
                            run.engine.host_checkpoints, run.engine.checkpoints,
                            format_bytes(static_cast<double>(run.engine.checkpoint_bytes)),
                            run.engine.checkpoint_device_slots);
    }
  }
  if (!quiet &&
      data.eval_overlaps_training(static_cast<std::uint64_t>(scenario.steps),
                                  scenario.eval.every > 0 ? static_cast<std::uint64_t>(scenario.eval.batches) : 0)) {
    io.err << "warning: the held-out batches (the last of the token file) are also trained on by this many steps; "
              "the eval loss is not a held-out loss\n";
  }
  // A process training alone stops after the step in progress on SIGINT/SIGTERM (a second one ends
  // it at once), keeping its record and saying where a rerun resumes; ranks are stopped by their
  // launcher (rank_spawner.cpp) or mpirun.
  std::unique_ptr<StopSignals> stop_signals;
  if (launch.world_size == 1) {
    ZINF_ASSIGN_OR_RETURN(stop_signals, StopSignals::install(StopSignals::SecondStop::kEndsProcess));
  }
  RunObserver observer(progress, run, stop_signals.get());
  run.setup_seconds = std::chrono::duration<double>(Clock::now() - setup_start).count();
  const Clock::time_point train_start = Clock::now();
  Result<train::TrainOutcome> outcome = session->trainer().run(observer);
  progress.finish();
  run.train_seconds = std::chrono::duration<double>(Clock::now() - train_start).count();
  // A run that fails midway or is stopped keeps what it did: the record says "failed" or
  // "stopped", why, and every step it completed (no plan and no rank figures: those would run
  // collectives a broken job cannot, and compare a partial run with a plan of a whole one).
  const auto write_partial_record = [&](const char* status, const std::string& why) {
    run.status = status;
    run.error = why;
    run.outcome.steps_run = static_cast<std::int64_t>(run.steps.size());
    run.device_memory = device.memory().usage();
    run.host_memory = device.host_memory().usage();
    run.host_peak_rss_bytes = peak_rss_bytes();
    run.state_bytes = session->states().state_bytes();
    if (lead && !scenario.output.record.empty()) {
      const Status written = write_record(scenario.output.record, make_train_record(run), record_field, quiet, io);
      if (!written.is_ok() && !quiet) {
        io.err << fmt::format("warning: the {} run's record: {}\n", status, written.message());
      }
    }
  };
  if (outcome.is_ok() && outcome.value().stopped) {
    const int signal_number = stop_signals->stop_signal();
    const train::TrainOutcome& stopped = outcome.value();
    run.outcome.last_checkpoint = stopped.last_checkpoint;
    const std::string why =
        fmt::format("stopped by {} after step {} of {}", signal_number == SIGINT ? "SIGINT" : "SIGTERM",
                    stopped.first_step + stopped.steps_run, scenario.steps);
    write_partial_record("stopped", why);
    io.err << fmt::format("{}; {}\n", why, rerun_note(scenario, !no_resume_));
    delegated_ = 128 + signal_number;  // as a process ended by the signal reports it
    return Status::ok();
  }
  if (!outcome.is_ok()) {
    write_partial_record("failed", outcome.status().message());
    if (comm.world_size() > 1 && session->trainer().failure_agreed()) {
      // Every rank stopped on the same error (a resume the ranks agreed cannot go on): rank 0 prints
      // it once, then the ranks leave together, so that no rank's exit ends the job (mpirun stops
      // the others on a non-zero exit) before rank 0 has printed.
      if (lead) {
        print_error(io, outcome.status().message());
        io.err.flush();
      }
      if (comm.barrier().is_ok()) {
        delegated_ = exit_code_for(outcome.status());
        return Status::ok();
      }
    }
    return outcome.status();
  }
  // A second peak probe after the timed steps: a machine whose load changed during the run (other
  // jobs starting or stopping) gave the first probe a different share of it than the steps got.
  // The best probe is the peak; an MFU above 1 even then is flagged in the record, not printed.
  run.peak_probes_flops_per_s.push_back(run.peak.flops_per_s);
  {
    ZINF_ASSIGN_OR_RETURN(const probes::ComputePeak after,
                          probes::measure_matmul_peak(device, model.config().compute_dtype));
    run.peak_probes_flops_per_s.push_back(after.flops_per_s);
    if (after.flops_per_s > run.peak.flops_per_s) run.peak = after;
  }
  use_compute_peak(hardware, run.peak.flops_per_s);
  run.outcome = outcome.value();
  run.device_memory = device.memory().usage();
  run.host_memory = device.host_memory().usage();
  run.host_peak_rss_bytes = peak_rss_bytes();
  run.state_bytes = session->states().state_bytes();

  const reports::TrainRecord typed = train_record_of(run);
  nlohmann::json record = typed;
  {
    // The run's own plan (its hardware measured before step 1) next to what it measured.
    record["plan"] = plan_vs_measured(planner::predict_engine(scenario, hardware.figures), hardware, record);
    // The engine model partitions nothing over ranks and models no collectives: say so rather
    // than let a data-parallel run's errors look like the model's verdict on one rank.
    record["plan"]["ranks_modelled"] = 1;
    record["plan"]["machine_load"] = machine_load();
    std::string note = shared_machine_note(record["plan"]["machine_load"], hardware, record["plan"]);
    if (comm.world_size() > 1) {
      note = fmt::format(
          "the plan models one rank; this run has {} ranks (partitioned states, collectives), so its errors are "
          "not the model's accuracy{}",
          comm.world_size(), note.empty() ? "" : "; " + note);
    }
    if (!note.empty()) record["plan"]["note"] = note;
  }
  if (comm.world_size() > 1) {
    ZINF_ASSIGN_OR_RETURN(run.ranks, gather_rank_figures(comm, typed));
    record["ranks"] = run.ranks;
  }
  if (!lead) return Status::ok();
  // A record that cannot be written after all (the disk filled up during the run) must not cost the
  // summary: print it first, then report the failure naming the setting the path came from.
  Status record_written;
  if (!scenario.output.record.empty()) {
    record_written = write_record(scenario.output.record, record, record_field, quiet, io);
  }
  Result<Rendered> rendered = render_train_record(record);
  const Status emitted = rendered.is_ok() ? emit(output_, *rendered, io) : rendered.status();
  return record_written.is_ok() ? emitted : record_written;
}

}  // namespace

std::unique_ptr<Subcommand> add_train_command(CLI::App& app) { return std::make_unique<TrainCommand>(app); }

}  // namespace zinf::cli
