#include "reports/train_record_data.h"

#include <type_traits>
#include <utility>

#include <fmt/format.h>

namespace zinf::reports {
namespace {

using nlohmann::json;

template <typename T>
json or_null(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

// Reads the fields of one JSON object into typed members, keeping the first error, which names
// the field by its full path. Required fields must be present (null only where the member is an
// optional); "later" fields keep the member's default when absent.
class FieldReader {
 public:
  FieldReader(const json& in, std::string path) : in_(in), path_(std::move(path)) {
    if (!in_.is_object()) fail(path_, fmt::format("expected an object, got {}", in_.type_name()));
  }

  template <typename T>
  FieldReader& required(const char* key, T& out) {
    return field(key, out, true);
  }
  template <typename T>
  FieldReader& later(const char* key, T& out) {
    return field(key, out, false);
  }
  // A section with its own reader: read(value, path, out).
  template <typename T, typename Read>
  FieldReader& section(const char* key, T& out, Read read, bool is_required = true) {
    if (!status_.is_ok() || !present(key, is_required)) return *this;
    if (Status s = read(in_.at(key), child(key), out); !s.is_ok()) status_ = std::move(s);
    return *this;
  }

  std::string child(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
  const Status& status() const { return status_; }

 private:
  bool present(const char* key, bool is_required) {
    if (in_.is_object() && in_.contains(key)) return true;
    if (is_required) fail(child(key), "missing (required in a zinf.train/1 record)");
    return false;
  }

  template <typename T>
  FieldReader& field(const char* key, T& out, bool is_required) {
    if (!status_.is_ok() || !present(key, is_required)) return *this;
    convert(in_.at(key), child(key), out);
    return *this;
  }

  template <typename T>
  void convert(const json& value, const std::string& path, std::optional<T>& out) {
    if (value.is_null()) {
      out.reset();
      return;
    }
    T inner{};
    convert(value, path, inner);
    out = std::move(inner);
  }
  template <typename T>
  void convert(const json& value, const std::string& path, T& out) {
    if constexpr (std::is_same_v<T, json>) {
      out = value;
    } else {
      const bool kind_ok = std::is_same_v<T, bool>          ? value.is_boolean()
                           : std::is_arithmetic_v<T>        ? value.is_number()
                           : std::is_same_v<T, std::string> ? value.is_string()
                                                            : true;
      if (!kind_ok) {
        const char* expected = std::is_same_v<T, bool>   ? "true or false"
                               : std::is_arithmetic_v<T> ? "a number"
                                                         : "a string";
        fail(path, fmt::format("expected {}, got {}", expected, value.type_name()));
        return;
      }
      try {
        out = value.get<T>();
      } catch (const json::exception&) {
        fail(path, fmt::format("has the wrong type ({})", value.type_name()));
      }
    }
  }

  void fail(const std::string& path, const std::string& what) {
    if (status_.is_ok()) status_ = Status::invalid_argument(fmt::format("{}: {}", path, what));
  }

  const json& in_;
  std::string path_;
  Status status_ = Status::ok();
};

template <typename T, typename Read>
Status read_array(const json& in, const std::string& path, std::vector<T>& out, Read read) {
  if (!in.is_array())
    return Status::invalid_argument(fmt::format("{}: expected an array, got {}", path, in.type_name()));
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    T item;
    ZINF_RETURN_IF_ERROR(read(in[i], fmt::format("{}[{}]", path, i), item));
    out.push_back(std::move(item));
  }
  return Status::ok();
}

Status read_device(const json& in, const std::string& path, TrainDevice& out) {
  return FieldReader(in, path).required("description", out.description).required("threads", out.threads).status();
}

Status read_model(const json& in, const std::string& path, TrainModel& out) {
  return FieldReader(in, path)
      .later("shape", out.shape)
      .required("params", out.params)
      .required("flops_per_step", out.flops_per_step)
      .status();
}

Status read_data(const json& in, const std::string& path, TrainData& out) {
  return FieldReader(in, path)
      .required("description", out.description)
      .required("entropy_rate_nats", out.entropy_rate_nats)
      .later("unigram_entropy_nats", out.unigram_entropy_nats)
      .status();
}

Status read_compute_peak(const json& in, const std::string& path, TrainComputePeak& out) {
  return FieldReader(in, path)
      .required("kind", out.kind)
      .later("matrix_size", out.matrix_size)
      .required("flops_per_s", out.flops_per_s)
      .later("probe_seconds", out.probe_seconds)
      .later("probes_flops_per_s", out.probes_flops_per_s)
      .status();
}

Status read_eval(const json& in, const std::string& path, TrainEval& out) {
  return FieldReader(in, path)
      .required("step", out.step)
      .required("loss", out.loss)
      .later("batches", out.batches)
      .later("seconds", out.seconds)
      .status();
}

Status read_step_times(const json& in, const std::string& path, StepTimeSummary& out) {
  return FieldReader(in, path)
      .required("median", out.median)
      .required("p10", out.p10)
      .required("p90", out.p90)
      .later("min", out.min)
      .later("max", out.max)
      .later("mean", out.mean)
      .status();
}

Status read_consistency(const json& in, const std::string& path, TrainConsistency& out) {
  return FieldReader(in, path).required("consistent", out.consistent).required("issues", out.issues).status();
}

Status read_tier(const json& in, const std::string& path, TierMemory& out) {
  return FieldReader(in, path)
      .required("current_bytes", out.current_bytes)
      .required("peak_bytes", out.peak_bytes)
      .required("capacity_bytes", out.capacity_bytes)
      .status();
}

Status read_host(const json& in, const std::string& path, HostMemory& out) {
  ZINF_RETURN_IF_ERROR(read_tier(in, path, out));
  return FieldReader(in, path).required("peak_rss_bytes", out.peak_rss_bytes).status();
}

Status read_checkpoint(const json& in, const std::string& path, TrainCheckpoint& out) {
  return FieldReader(in, path)
      .required("resumed_from", out.resumed_from)
      .required("last_written", out.last_written)
      .later("resume_warnings", out.resume_warnings)
      .status();
}

}  // namespace

void to_json(json& out, const TrainDevice& value) {
  out = {{"description", value.description}, {"threads", value.threads}};
}

void to_json(json& out, const TrainModel& value) {
  out = {{"shape", value.shape}, {"params", value.params}, {"flops_per_step", value.flops_per_step}};
}

void to_json(json& out, const TrainData& value) {
  out = {{"description", value.description},
         {"entropy_rate_nats", or_null(value.entropy_rate_nats)},
         {"unigram_entropy_nats", or_null(value.unigram_entropy_nats)}};
}

void to_json(json& out, const TrainComputePeak& value) {
  out = {{"kind", value.kind},
         {"matrix_size", value.matrix_size},
         {"flops_per_s", value.flops_per_s},
         {"probe_seconds", value.probe_seconds},
         {"probes_flops_per_s", value.probes_flops_per_s}};
}

void to_json(json& out, const TrainStep& value) {
  out = {{"step", value.step},
         {"loss", or_null(value.loss)},
         {"lr", value.lr},
         {"grad_norm", or_null(value.grad_norm)},
         {"clip_coef", value.clip_coef},
         {"loss_scale", value.loss_scale},
         {"skipped", value.skipped},
         {"tokens", value.tokens},
         {"step_ms", value.step_ms},
         {"data_ms", value.data_ms},
         {"forward_backward_ms", value.forward_backward_ms},
         {"forward_ms", value.forward_ms},
         {"backward_ms", value.backward_ms},
         {"optimizer_ms", value.optimizer_ms},
         {"tokens_per_s", value.tokens_per_s},
         {"warmup", value.warmup},
         {"engine", value.engine}};
}

void to_json(json& out, const TrainEval& value) {
  out = {{"step", value.step}, {"loss", value.loss}, {"batches", value.batches}, {"seconds", value.seconds}};
}

void to_json(json& out, const StepTimeSummary& value) {
  out = {{"median", value.median}, {"p10", value.p10}, {"p90", value.p90},
         {"min", value.min},       {"max", value.max}, {"mean", value.mean}};
}

void to_json(json& out, const TrainSummary& value) {
  out = {{"steps_run", value.steps_run},
         {"first_step", value.first_step},
         {"warmup_steps", value.warmup_steps},
         {"measured_steps", value.measured_steps},
         {"step_ms", value.step_ms},
         {"data_ms_median", value.data_ms_median},
         {"forward_backward_ms_median", value.forward_backward_ms_median},
         {"forward_ms_median", value.forward_ms_median},
         {"backward_ms_median", value.backward_ms_median},
         {"optimizer_ms_median", value.optimizer_ms_median},
         {"tokens_per_s", or_null(value.tokens_per_s)},
         {"flops_per_s", or_null(value.flops_per_s)},
         {"mfu", or_null(value.mfu)},
         {"mfu_inconsistent", or_null(value.mfu_inconsistent)},
         {"final_loss", or_null(value.final_loss)},
         {"final_loss_steps", value.final_loss_steps},
         {"final_eval_loss", or_null(value.final_eval_loss)},
         {"skipped_steps", value.skipped_steps},
         {"loss_vs_entropy_rate", or_null(value.loss_vs_entropy_rate)},
         {"setup_seconds", value.setup_seconds},
         {"train_seconds", value.train_seconds}};
}

void to_json(json& out, const TrainConsistency& value) {
  out = {{"consistent", value.consistent}, {"issues", value.issues}};
}

void to_json(json& out, const TierMemory& value) {
  out = {{"current_bytes", value.current_bytes},
         {"peak_bytes", value.peak_bytes},
         {"capacity_bytes", or_null(value.capacity_bytes)}};
}

void to_json(json& out, const HostMemory& value) {
  to_json(out, static_cast<const TierMemory&>(value));
  out["peak_rss_bytes"] = value.peak_rss_bytes;
}

void to_json(json& out, const TrainMemory& value) {
  out = {{"device", value.device},
         {"host", value.host},
         {"nvme", value.nvme},
         {"model_states_bytes", value.model_states_bytes},
         {"model_states_tier", value.model_states_tier},
         {"model_states_total_bytes", value.model_states_total_bytes},
         {"activations_bytes", value.activations_bytes}};
  // An empty map is written as an object, as the hand-written writer did ({}), not as an array.
  if (value.model_states_bytes.empty()) out["model_states_bytes"] = json::object();
  if (value.model_states_tier.empty()) out["model_states_tier"] = json::object();
}

void to_json(json& out, const TrainCheckpoint& value) {
  out = {{"resumed_from", or_null(value.resumed_from)},
         {"last_written", or_null(value.last_written)},
         {"resume_warnings", value.resume_warnings}};
}

void to_json(json& out, const TrainRecord& value) {
  out = value.envelope.is_object() ? value.envelope : json::object();
  out["status"] = value.status;
  out["error"] = or_null(value.error);
  out["scenario_path"] = value.scenario_path;
  out["scenario"] = value.scenario;
  out["device"] = value.device;
  out["model"] = value.model;
  out["data"] = value.data;
  out["compute_peak"] = value.compute_peak;
  out["steps"] = value.steps;
  out["evals"] = value.evals;
  if (value.steps.empty()) out["steps"] = json::array();
  if (value.evals.empty()) out["evals"] = json::array();
  out["summary"] = value.summary;
  out["consistency"] = value.consistency;
  out["engine"] = value.engine;
  out["memory"] = value.memory;
  if (value.ranks) out["ranks"] = *value.ranks;
  if (value.checkpoint) out["checkpoint"] = *value.checkpoint;
  if (value.plan) out["plan"] = *value.plan;
}

Status read_train_step(const json& in, const std::string& path, TrainStep& out) {
  return FieldReader(in, path)
      .required("step", out.step)
      .required("loss", out.loss)
      .later("lr", out.lr)
      .later("grad_norm", out.grad_norm)
      .later("clip_coef", out.clip_coef)
      .later("loss_scale", out.loss_scale)
      .later("skipped", out.skipped)
      .later("tokens", out.tokens)
      .required("step_ms", out.step_ms)
      .required("data_ms", out.data_ms)
      .later("forward_backward_ms", out.forward_backward_ms)
      .later("forward_ms", out.forward_ms)
      .later("backward_ms", out.backward_ms)
      .required("optimizer_ms", out.optimizer_ms)
      .later("tokens_per_s", out.tokens_per_s)
      .required("warmup", out.warmup)
      .required("engine", out.engine)
      .status();
}

Status read_train_summary(const json& in, const std::string& path, TrainSummary& out) {
  return FieldReader(in, path)
      .later("steps_run", out.steps_run)
      .later("first_step", out.first_step)
      .later("warmup_steps", out.warmup_steps)
      .later("measured_steps", out.measured_steps)
      .section("step_ms", out.step_ms, read_step_times)
      .later("data_ms_median", out.data_ms_median)
      .later("forward_backward_ms_median", out.forward_backward_ms_median)
      .later("forward_ms_median", out.forward_ms_median)
      .later("backward_ms_median", out.backward_ms_median)
      .later("optimizer_ms_median", out.optimizer_ms_median)
      .required("tokens_per_s", out.tokens_per_s)
      .required("flops_per_s", out.flops_per_s)
      .required("mfu", out.mfu)
      .later("mfu_inconsistent", out.mfu_inconsistent)
      .required("final_loss", out.final_loss)
      .later("final_loss_steps", out.final_loss_steps)
      .required("final_eval_loss", out.final_eval_loss)
      .later("skipped_steps", out.skipped_steps)
      .required("loss_vs_entropy_rate", out.loss_vs_entropy_rate)
      .later("setup_seconds", out.setup_seconds)
      .later("train_seconds", out.train_seconds)
      .status();
}

Status read_train_memory(const json& in, const std::string& path, TrainMemory& out) {
  return FieldReader(in, path)
      .section("device", out.device, read_tier)
      .section("host", out.host, read_host)
      .later("nvme", out.nvme)
      .required("model_states_bytes", out.model_states_bytes)
      .required("model_states_tier", out.model_states_tier)
      .later("model_states_total_bytes", out.model_states_total_bytes)
      .later("activations_bytes", out.activations_bytes)
      .status();
}

Result<TrainRecord> read_train_record(const json& record) {
  if (!record.is_object() || record.value("schema", json()) != json(kTrainRecordSchema)) {
    return Status::invalid_argument(fmt::format("schema: {} is not a {} record",
                                                record.is_object() ? record.value("schema", json()).dump() : "-",
                                                kTrainRecordSchema));
  }
  TrainRecord out;
  out.envelope = json::object();
  for (const char* key : {"schema", "generator", "created_at", "host", "conditions"}) {
    if (record.contains(key)) out.envelope[key] = record.at(key);
  }
  const auto steps = [](const json& in, const std::string& path, std::vector<TrainStep>& v) {
    return read_array(in, path, v, read_train_step);
  };
  const auto evals = [](const json& in, const std::string& path, std::vector<TrainEval>& v) {
    return read_array(in, path, v, read_eval);
  };
  const auto checkpoint = [](const json& in, const std::string& path, std::optional<TrainCheckpoint>& v) {
    v.emplace();
    return read_checkpoint(in, path, *v);
  };
  FieldReader reader(record, "");
  reader.later("status", out.status)
      .later("error", out.error)
      .required("scenario_path", out.scenario_path)
      .required("scenario", out.scenario)
      .section("device", out.device, read_device)
      .section("model", out.model, read_model)
      .section("data", out.data, read_data)
      .section("compute_peak", out.compute_peak, read_compute_peak)
      .section("steps", out.steps, steps)
      .section("evals", out.evals, evals)
      .section("summary", out.summary, read_train_summary)
      .section("consistency", out.consistency, read_consistency, false)
      .required("engine", out.engine)
      .section("memory", out.memory, read_train_memory)
      .later("ranks", out.ranks)
      .section("checkpoint", out.checkpoint, checkpoint, false)
      .later("plan", out.plan);
  ZINF_RETURN_IF_ERROR(reader.status());
  return out;
}

}  // namespace zinf::reports
