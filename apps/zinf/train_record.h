// The `zinf train` run record ("zinf.train/1"): everything one training run measured, as one
// versioned JSON document — the resolved scenario echoed back, the data and its entropy rate, every
// step's loss/time/tokens-per-second (warm-up steps flagged), eval losses, medians and spread,
// achieved TFLOP/s and MFU against the same-run matmul peak, peak memory per tier and the bytes of
// each kind of model state — and the human summary rendered from that record (never computed
// separately). Field reference: docs/records/train-record.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/zinf/engine_record.h"
#include "apps/zinf/output.h"
#include "libengine/memory/memory_tier.h"
#include "libengine/train/step_metrics.h"
#include "libengine/train/trainer.h"
#include "libengine/zero/model_states.h"
#include "probes/compute_peak.h"
#include "reports/run_conditions.h"
#include "reports/train_record_data.h"

namespace zinf::cli {

inline constexpr int kTrainRecordVersion = 1;

struct TrainRun {
  nlohmann::json scenario;  // spec::to_json of the resolved scenario
  std::string scenario_path;
  std::string data_description;
  std::optional<double> entropy_rate_nats;  // Markov data only
  std::optional<double> unigram_entropy_nats;
  std::string device_description;
  int threads = 0;
  nlohmann::json model_shape;  // the resolved shape (a scenario may give only "params")
  std::uint64_t params = 0;
  double flops_per_step = 0;                    // model FLOPs of one forward+backward
  probes::ComputePeak peak;                     // the best of the probes
  std::vector<double> peak_probes_flops_per_s;  // every probe: before and after the timed steps
  std::vector<train::StepMetrics> steps;
  std::vector<train::EvalMetrics> evals;
  train::TrainOutcome outcome;
  memory::TierUsage device_memory;
  memory::TierUsage host_memory;  // the host tier's accounting (pinned/staging/offloaded states)
  std::uint64_t host_peak_rss_bytes = 0;
  EngineRun engine;
  std::vector<zero::StateBytes> state_bytes;
  std::uint64_t activation_bytes = 0;
  double setup_seconds = 0;
  double train_seconds = 0;
  // "completed", or "failed" for a run that stopped at an error midway (`error` says which; `steps`
  // are the steps it completed, `outcome` has first_step, steps_run and last_checkpoint only).
  std::string status = "completed";
  std::string error;
  // Data parallelism: {"world_size", "backend", "per_rank": [{"rank", "step_ms_median", ...}]}
  // gathered from every rank at the end of the run; null for a run of one rank.
  nlohmann::json ranks;
  reports::ConditionsSnapshot started;  // cli::Io::started: the record's "conditions" measure from it
};

// Steps of this run counted as warm-up (excluded from medians): the first min(3, max(1, n/10)).
std::int64_t warmup_steps(std::size_t steps_run);

// summary.mfu is the measured figure; when it exceeds 1 (a step faster than the best matmul probe:
// the machine's load changed between them) summary.mfu_inconsistent says so, record.consistency
// lists it, and the summary prints that instead of the number.
reports::TrainRecord train_record_of(const TrainRun& run);
// train_record_of as the JSON document that is written.
nlohmann::json make_train_record(const TrainRun& run);
// The table/markdown/csv views of a train record (read with reports::read_train_record: a record
// missing a required field is refused, InvalidArgument naming it).
Result<Rendered> render_train_record(const nlohmann::json& record);

}  // namespace zinf::cli
