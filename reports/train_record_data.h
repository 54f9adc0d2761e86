// The `zinf train` run record ("zinf.train/1") as typed structs, one per section of the document,
// each with ONE writer (to_json, found by nlohmann's ADL) and ONE reader (read_*, returning the
// first missing or mistyped field by its full path). `zinf train` fills a TrainRecord and writes it;
// readers of train records parse it back with read_train_record. Field reference:
// docs/records/train-record.md.
//
// Compatibility: the JSON a TrainRecord writes is the one the hand-written writer produced (same
// keys, same number kinds: a figure written as an integer stays an integer). Records written before
// a field existed still load: fields added after the first records (the ones each struct marks
// "since later records") take their default when absent; every other field is required and its
// absence fails with "<path>: missing (required in a zinf.train/1 record)".
//
// Sub-documents that have their own writers and readers stay JSON here: the resolved scenario
// (spec::to_json), the model's shape, the engine's record (apps/zinf/engine_record.h), each step's
// engine figures, the NVMe tier's usage (a copy of the engine record's), the plan-vs-measured
// section and the per-rank figures.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/core/status.h"

namespace zinf::reports {

inline constexpr std::string_view kTrainRecordSchema = "zinf.train/1";

struct TrainDevice {
  std::string description;
  int threads = 0;

  bool operator==(const TrainDevice&) const = default;
};

struct TrainModel {
  nlohmann::json shape;  // the resolved shape
  std::uint64_t params = 0;
  double flops_per_step = 0;  // model FLOPs of one forward+backward

  bool operator==(const TrainModel&) const = default;
};

struct TrainData {
  std::string description;
  std::optional<double> entropy_rate_nats;     // Markov data only
  std::optional<double> unigram_entropy_nats;  // since later records

  bool operator==(const TrainData&) const = default;
};

struct TrainComputePeak {
  std::string kind;     // "fp32 matmul", "bf16 matmul"
  int matrix_size = 0;  // since later records
  double flops_per_s = 0;
  double probe_seconds = 0;                // since later records
  std::vector<double> probes_flops_per_s;  // since later records

  bool operator==(const TrainComputePeak&) const = default;
};

// One step. Non-finite losses and gradient norms are written as null.
struct TrainStep {
  std::int64_t step = 0;
  std::optional<double> loss;
  double lr = 0;                    // since later records
  std::optional<double> grad_norm;  // since later records
  double clip_coef = 1;             // since later records
  double loss_scale = 1;            // since later records
  bool skipped = false;             // since later records
  std::int64_t tokens = 0;          // since later records
  double step_ms = 0;
  double data_ms = 0;
  double forward_backward_ms = 0;  // since later records
  double forward_ms = 0;           // since later records
  double backward_ms = 0;          // since later records
  double optimizer_ms = 0;
  double tokens_per_s = 0;  // since later records
  bool warmup = false;
  nlohmann::json engine;  // engine_step_json

  bool operator==(const TrainStep&) const = default;
};

struct TrainEval {
  std::int64_t step = 0;
  double loss = 0;
  std::int64_t batches = 0;  // since later records
  double seconds = 0;        // since later records

  bool operator==(const TrainEval&) const = default;
};

// Percentiles of the measured steps' times, milliseconds.
struct StepTimeSummary {
  double median = 0;
  double p10 = 0;
  double p90 = 0;
  double min = 0;   // since later records
  double max = 0;   // since later records
  double mean = 0;  // since later records

  bool operator==(const StepTimeSummary&) const = default;
};

struct TrainSummary {
  std::uint64_t steps_run = 0;       // since later records
  std::int64_t first_step = 0;       // since later records
  std::int64_t warmup_steps = 0;     // since later records
  std::uint64_t measured_steps = 0;  // since later records
  StepTimeSummary step_ms;
  double data_ms_median = 0;              // since later records
  double forward_backward_ms_median = 0;  // since later records
  double forward_ms_median = 0;           // since later records
  double backward_ms_median = 0;          // since later records
  double optimizer_ms_median = 0;         // since later records
  std::optional<double> tokens_per_s;     // null when no step was measured
  std::optional<double> flops_per_s;
  std::optional<double> mfu;
  // Why the MFU is not reported, when it exceeds 1 (since later records).
  std::optional<std::string> mfu_inconsistent;
  std::optional<double> final_loss;
  std::uint64_t final_loss_steps = 10;  // since later records (older records averaged 10 steps)
  std::optional<double> final_eval_loss;
  std::int64_t skipped_steps = 0;  // since later records
  std::optional<double> loss_vs_entropy_rate;
  double setup_seconds = 0;  // since later records
  double train_seconds = 0;  // since later records

  bool operator==(const TrainSummary&) const = default;
};

struct TrainConsistency {
  bool consistent = true;
  std::vector<std::string> issues;

  bool operator==(const TrainConsistency&) const = default;
};

// One memory tier's accounting. capacity_bytes is null for a tier without a budget.
struct TierMemory {
  std::uint64_t current_bytes = 0;
  std::uint64_t peak_bytes = 0;
  std::optional<std::uint64_t> capacity_bytes;

  bool operator==(const TierMemory&) const = default;
};

struct HostMemory : TierMemory {
  std::uint64_t peak_rss_bytes = 0;

  bool operator==(const HostMemory&) const = default;
};

struct TrainMemory {
  TierMemory device;
  HostMemory host;
  nlohmann::json nvme;  // the engine record's "nvme" (since later records; null when absent)
  std::map<std::string, std::uint64_t> model_states_bytes;
  std::map<std::string, std::string> model_states_tier;  // state -> "gpu", "cpu", "nvme"
  std::uint64_t model_states_total_bytes = 0;            // since later records
  std::uint64_t activations_bytes = 0;                   // since later records

  bool operator==(const TrainMemory&) const = default;
};

struct TrainCheckpoint {
  std::optional<std::string> resumed_from;
  std::optional<std::string> last_written;
  std::vector<std::string> resume_warnings;  // why newer checkpoints were passed over at the resume

  bool operator==(const TrainCheckpoint&) const = default;
};

struct TrainRecord {
  // schema, generator, created_at, host, conditions (make_record_envelope); written first, every
  // other field replaces a key of the same name.
  nlohmann::json envelope = nlohmann::json::object();
  std::string status = "completed";  // or "failed", "stopped" (since later records)
  std::optional<std::string> error;  // since later records
  std::string scenario_path;
  nlohmann::json scenario;
  TrainDevice device;
  TrainModel model;
  TrainData data;
  TrainComputePeak compute_peak;
  std::vector<TrainStep> steps;
  std::vector<TrainEval> evals;
  TrainSummary summary;
  TrainConsistency consistency;  // since later records
  nlohmann::json engine;         // make_engine_record
  TrainMemory memory;
  std::optional<nlohmann::json> ranks;        // data parallelism: absent for one rank
  std::optional<TrainCheckpoint> checkpoint;  // since later records
  std::optional<nlohmann::json> plan;         // the plan next to what the run measured, when made

  bool operator==(const TrainRecord&) const = default;
};

// Writers (ADL): every field of the struct, in the record's key names.
void to_json(nlohmann::json& out, const TrainDevice& value);
void to_json(nlohmann::json& out, const TrainModel& value);
void to_json(nlohmann::json& out, const TrainData& value);
void to_json(nlohmann::json& out, const TrainComputePeak& value);
void to_json(nlohmann::json& out, const TrainStep& value);
void to_json(nlohmann::json& out, const TrainEval& value);
void to_json(nlohmann::json& out, const StepTimeSummary& value);
void to_json(nlohmann::json& out, const TrainSummary& value);
void to_json(nlohmann::json& out, const TrainConsistency& value);
void to_json(nlohmann::json& out, const TierMemory& value);
void to_json(nlohmann::json& out, const HostMemory& value);
void to_json(nlohmann::json& out, const TrainMemory& value);
void to_json(nlohmann::json& out, const TrainCheckpoint& value);
void to_json(nlohmann::json& out, const TrainRecord& value);

// Readers: `path` names `in` in errors ("summary", "steps[3]"). InvalidArgument
// "<path>.<field>: missing (required in a zinf.train/1 record)" or "<path>.<field>: expected a
// number, got string"; `out` is unspecified on failure.
Status read_train_step(const nlohmann::json& in, const std::string& path, TrainStep& out);
Status read_train_summary(const nlohmann::json& in, const std::string& path, TrainSummary& out);
Status read_train_memory(const nlohmann::json& in, const std::string& path, TrainMemory& out);

// The whole record. Also InvalidArgument when "schema" is not "zinf.train/1".
Result<TrainRecord> read_train_record(const nlohmann::json& record);

}  // namespace zinf::reports
