#include "libengine/spec/scenario.h"

#include "libengine/spec/scenario_deepspeed.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <limits>
#include <utility>
#include <vector>

#include "libengine/core/units.h"
#include "libengine/spec/json_input.h"
#include "libengine/spec/scenario_model.h"
#include "libengine/spec/training_spec.h"

namespace zinf::spec {
namespace {

using nlohmann::json;

constexpr std::string_view kRoot = "scenario";
constexpr std::int64_t kMaxBatch = std::int64_t{1} << 20;
constexpr std::int64_t kMaxSeq = std::int64_t{1} << 24;
constexpr std::int64_t kMaxSteps = kStepsRange.max;
constexpr std::int64_t kMaxLayers = 100000;  // validate(ModelShape)'s limit
constexpr std::int64_t kMaxDim = std::int64_t{1} << 24;
constexpr std::int64_t kMaxThreads = kThreadsRange.max;
constexpr std::uint32_t kMaxSuccessors = 64;  // train::MarkovTokenSource::kMaxSuccessors
constexpr double kMaxSkew = 16.0;             // train::MarkovTokenSource::kMaxSkew

// The value as the user wrote it, with its JSON type: `"8" (string)` — JsonObject's wording.
std::string shown(const json& value) { return describe_json_value(value); }

Status not_allowed(const JsonObject& object, std::string_view key, std::string_view allowed) {
  return Status::invalid_argument(
      fmt::format("{}: expected {}, found {}", object.field_path(key), allowed, shown(object.raw().at(key))));
}

// A key is given when present and not null (null means "use the default", as in JsonObject).
bool given(const JsonObject& object, std::string_view key) {
  return object.has(key) && !object.raw().at(key).is_null();
}

Result<std::int64_t> positive_int(const JsonObject& object, std::string_view key, std::int64_t fallback,
                                  std::int64_t max) {
  ZINF_ASSIGN_OR_RETURN(const std::optional<std::int64_t> value, object.optional_positive_int(key));
  if (!value) return fallback;
  if (*value > max) {
    return Status::invalid_argument(
        fmt::format("{}: {} is too large (at most {})", object.field_path(key), *value, max));
  }
  return *value;
}

Result<std::int64_t> non_negative_int(const JsonObject& object, std::string_view key, std::int64_t fallback,
                                      std::int64_t max) {
  if (!given(object, key)) return fallback;
  const json& value = object.raw().at(key);
  if (!value.is_number_integer() || (!value.is_number_unsigned() && value.get<std::int64_t>() < 0)) {
    return not_allowed(object, key, "a non-negative integer");
  }
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(max)) {
    return Status::invalid_argument(
        fmt::format("{}: {} is too large (at most {})", object.field_path(key), value.dump(), max));
  }
  return value.get<std::int64_t>();
}

Result<std::uint64_t> unsigned_int(const JsonObject& object, std::string_view key, std::uint64_t fallback) {
  if (!given(object, key)) return fallback;
  const json& value = object.raw().at(key);
  if (!value.is_number_integer() || (!value.is_number_unsigned() && value.get<std::int64_t>() < 0)) {
    return not_allowed(object, key, "a non-negative integer");
  }
  return value.get<std::uint64_t>();
}

// A JSON number accepted by `ok`; `allowed` says what ok accepts ("a number > 0").
template <typename Predicate>
Result<double> number(const JsonObject& object, std::string_view key, double fallback, Predicate ok,
                      std::string_view allowed) {
  if (!given(object, key)) return fallback;
  const json& value = object.raw().at(key);
  if (!value.is_number() || !std::isfinite(value.get<double>()) || !ok(value.get<double>())) {
    return not_allowed(object, key, allowed);
  }
  return value.get<double>();
}

Result<bool> boolean(const JsonObject& object, std::string_view key, bool fallback) {
  ZINF_ASSIGN_OR_RETURN(const std::optional<bool> value, object.optional_bool(key));
  return value.value_or(fallback);
}

// One of a fixed set of names, with a "did you mean" for a near miss.
template <typename Enum, std::size_t N>
Result<Enum> choice(const JsonObject& object, std::string_view key, Enum fallback,
                    const std::array<std::pair<std::string_view, Enum>, N>& names) {
  if (!given(object, key)) return fallback;
  const json& value = object.raw().at(key);
  std::vector<std::string_view> candidates;
  std::string listed;
  for (const auto& [name, e] : names) {
    candidates.push_back(name);
    listed += fmt::format("{}{}", listed.empty() ? "" : ", ", name);
  }
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    for (const auto& [name, e] : names) {
      if (name == text) return e;
    }
    if (const auto near = closest_match(text, candidates)) {
      return Status::invalid_argument(fmt::format("{}: expected one of {}, found {} (did you mean \"{}\"?)",
                                                  object.field_path(key), listed, shown(value), *near));
    }
  }
  return not_allowed(object, key, fmt::format("one of {}", listed));
}

// An optional nested object: nullopt when absent or null.
Result<std::optional<JsonObject>> section(const JsonObject& object, std::string_view key) {
  if (!given(object, key)) return std::optional<JsonObject>{};
  ZINF_ASSIGN_OR_RETURN(JsonObject inner, object.object(key));
  return std::optional<JsonObject>(std::move(inner));
}

Result<std::string> non_empty_string(const JsonObject& object, std::string_view key) {
  ZINF_ASSIGN_OR_RETURN(std::string value, object.printable_string(key));
  if (value.empty()) return not_allowed(object, key, "a non-empty string");
  return value;
}

Status refuse_keys_of_other_mode(const JsonObject& object, const std::vector<std::string_view>& keys,
                                 std::string_view why) {
  for (std::string_view key : keys) {
    if (object.has(key)) return Status::invalid_argument(fmt::format("{}: {}", object.field_path(key), why));
  }
  return Status::ok();
}

// validate(ModelShape) names fields "model.<field>"; in a scenario they live under "scenario.model".
Status in_scenario(const Status& status) {
  if (status.is_ok()) return status;
  if (status.message().rfind("model.", 0) == 0) return {status.code(), fmt::format("{}.{}", kRoot, status.message())};
  return status.with_context(fmt::format("{}.model", kRoot));
}

constexpr std::array kPrecisionNames{std::pair{std::string_view("fp32"), DType::kF32},
                                     std::pair{std::string_view("bf16"), DType::kBF16},
                                     std::pair{std::string_view("fp16"), DType::kF16}};
constexpr std::array kSourceNames{std::pair{std::string_view("markov"), DataSource::kMarkov},
                                  std::pair{std::string_view("file"), DataSource::kFile}};
constexpr std::array kOptimizerNames{std::pair{std::string_view("adamw"), OptimizerType::kAdamW},
                                     std::pair{std::string_view("adam"), OptimizerType::kAdam}};
constexpr std::array kScheduleNames{std::pair{std::string_view("constant"), optim::LrScheduleKind::kConstant},
                                    std::pair{std::string_view("cosine"), optim::LrScheduleKind::kCosine},
                                    std::pair{std::string_view("linear"), optim::LrScheduleKind::kLinear}};
constexpr std::array kDeviceNames{std::pair{std::string_view("cpu"), device::DeviceKind::kCpu},
                                  std::pair{std::string_view("cuda"), device::DeviceKind::kCuda}};

const std::vector<std::string_view> kTopKeys{
    "name",      "model",      "data",       "batch",  "seq",           "steps",     "precision",
    "optimizer", "loss_scale", "seed",       "device", "device_memory", "threads",   "activation_checkpointing",
    "tiling",    "eval",       "checkpoint", "output", "zero",          "deepspeed", "init"};
const std::vector<std::string_view> kShapeKeys{"layers",        "hidden",          "heads", "vocab",
                                               "max_positions", "tied_embeddings", "bias"};
const std::vector<std::string_view> kShapeOnlyKeys{"layers",        "hidden",          "heads",
                                                   "max_positions", "tied_embeddings", "bias"};
const std::vector<std::string_view> kParamsKeys{"params", "vocab"};
const std::vector<std::string_view> kMarkovKeys{"source", "successors", "skew", "seed"};
const std::vector<std::string_view> kMarkovOnlyKeys{"successors", "skew", "seed"};
const std::vector<std::string_view> kFileKeys{"source", "path"};
const std::vector<std::string_view> kFileOnlyKeys{"path"};

// Fills shape and params_requested from "model". Needs scenario.seq (default max_positions, resolver).
// `dir`: the scenario file's directory (a relative hf_config path is relative to it).
Status parse_model(const JsonObject& root, const ShapeResolver& resolve, std::string_view dir, Scenario& out) {
  ZINF_ASSIGN_OR_RETURN(const JsonObject model, root.object("model"));
  if (is_decoder_model(model)) {
    ZINF_ASSIGN_OR_RETURN(out.shape, parse_decoder_model(model, dir, out.seq));
    out.params_requested.reset();
    return Status::ok();
  }
  ZINF_ASSIGN_OR_RETURN(const std::int64_t vocab, positive_int(model, "vocab", kScenarioDefaultVocab, kMaxDim));
  if (model.has("params")) {
    ZINF_RETURN_IF_ERROR(refuse_keys_of_other_mode(
        model, kShapeOnlyKeys,
        "not allowed together with model.params; give either params (and vocab) or layers/hidden/heads"));
    ZINF_RETURN_IF_ERROR(model.reject_unknown_keys(kParamsKeys));
    const json& value = model.raw().at("params");
    if (!value.is_string() && !value.is_number()) {
      return not_allowed(model, "params", "a parameter count like \"125M\" or 125000000");
    }
    const std::string field = model.field_path("params");
    ZINF_ASSIGN_OR_RETURN(const std::uint64_t params,
                          parse_count(value.is_string() ? value.get<std::string>() : value.dump(), field));
    if (!resolve) {
      return Status::invalid_argument(
          fmt::format("{}: a parameter count cannot be resolved to a shape here; give layers/hidden/heads", field));
    }
    Result<ModelShape> shape = resolve(params, vocab, out.seq);
    if (!shape.is_ok()) return shape.status();  // the resolver names scenario.model.params itself
    out.shape = std::move(shape).value();
    out.params_requested = params;
    return in_scenario(validate(out.shape));
  }
  ZINF_RETURN_IF_ERROR(model.reject_unknown_keys(kShapeKeys));
  for (std::string_view key : {"layers", "hidden", "heads"}) {
    if (!given(model, key)) {
      return Status::invalid_argument(fmt::format(
          "{}: required field is missing; give layers, hidden and heads together, or params", model.field_path(key)));
    }
  }
  ZINF_ASSIGN_OR_RETURN(const std::int64_t layers, positive_int(model, "layers", 0, kMaxLayers));
  ZINF_ASSIGN_OR_RETURN(const std::int64_t hidden, positive_int(model, "hidden", 0, kMaxDim));
  ZINF_ASSIGN_OR_RETURN(const std::int64_t heads, positive_int(model, "heads", 0, kMaxDim));
  if (hidden % heads != 0) {
    return Status::invalid_argument(
        fmt::format("{}: {} does not divide model.hidden {}", model.field_path("heads"), heads, hidden));
  }
  ZINF_ASSIGN_OR_RETURN(const std::int64_t max_positions, positive_int(model, "max_positions", out.seq, kMaxDim));
  ZINF_ASSIGN_OR_RETURN(const bool tied, boolean(model, "tied_embeddings", true));
  ZINF_ASSIGN_OR_RETURN(const bool bias, boolean(model, "bias", true));
  ModelShape shape = gpt_like_shape(layers, hidden, heads, vocab, max_positions);
  shape.name = fmt::format("gpt-like {}x{}", layers, hidden);
  shape.tied_embeddings = tied;
  shape.qkv_bias = bias;
  shape.attn_out_bias = bias;
  shape.mlp_bias = bias;
  out.shape = std::move(shape);
  out.params_requested.reset();
  return in_scenario(validate(out.shape));
}

Status parse_data(const JsonObject& root, Scenario& out) {
  out.data = ScenarioData{};
  out.data.chain_seed = out.seed;
  ZINF_ASSIGN_OR_RETURN(const std::optional<JsonObject> data, section(root, "data"));
  if (data) {
    ZINF_ASSIGN_OR_RETURN(out.data.source, choice(*data, "source", DataSource::kMarkov, kSourceNames));
  }
  if (out.data.source == DataSource::kMarkov) {
    if (out.shape.vocab < 2) {
      return Status::invalid_argument(fmt::format(
          "{}.model.vocab: {} is too small for data.source \"markov\"; expected at least 2", kRoot, out.shape.vocab));
    }
    // The default K (8) shrinks to fit a tiny vocabulary; an explicit K must fit.
    const std::int64_t max_successors = std::min<std::int64_t>(kMaxSuccessors, out.shape.vocab);
    out.data.successors = static_cast<std::uint32_t>(std::min<std::int64_t>(out.data.successors, max_successors));
    if (!data) return Status::ok();
    ZINF_RETURN_IF_ERROR(refuse_keys_of_other_mode(*data, kFileOnlyKeys, "only applies to data.source \"file\""));
    ZINF_RETURN_IF_ERROR(data->reject_unknown_keys(kMarkovKeys));
    ZINF_ASSIGN_OR_RETURN(const std::int64_t successors,
                          positive_int(*data, "successors", out.data.successors, max_successors));
    out.data.successors = static_cast<std::uint32_t>(successors);
    ZINF_ASSIGN_OR_RETURN(out.data.skew, number(
                                             *data, "skew", 0.0, [](double x) { return x >= 0 && x <= kMaxSkew; },
                                             "a number in [0, 16]"));
    ZINF_ASSIGN_OR_RETURN(out.data.chain_seed, unsigned_int(*data, "seed", out.seed));
    return Status::ok();
  }
  // A file source is only chosen through data.source, so `data` is present here.
  ZINF_RETURN_IF_ERROR(refuse_keys_of_other_mode(*data, kMarkovOnlyKeys, "only applies to data.source \"markov\""));
  ZINF_RETURN_IF_ERROR(data->reject_unknown_keys(kFileKeys));
  ZINF_ASSIGN_OR_RETURN(out.data.path, non_empty_string(*data, "path"));
  return Status::ok();
}

Status parse_optimizer(const JsonObject& root, Scenario& out) {
  out.optimizer = OptimizerConfig{};
  ZINF_ASSIGN_OR_RETURN(const std::optional<JsonObject> section_or, section(root, "optimizer"));
  if (!section_or) return Status::ok();
  const JsonObject& opt = *section_or;
  ZINF_RETURN_IF_ERROR(
      opt.reject_unknown_keys({"type", "lr", "beta1", "beta2", "eps", "weight_decay", "grad_clip", "schedule"}));
  OptimizerConfig& o = out.optimizer;
  ZINF_ASSIGN_OR_RETURN(o.type, choice(opt, "type", OptimizerType::kAdamW, kOptimizerNames));
  const auto positive = [](double x) { return x > 0; };
  const auto non_negative = [](double x) { return x >= 0; };
  const auto unit_interval = [](double x) { return x >= 0 && x < 1; };
  ZINF_ASSIGN_OR_RETURN(o.lr, number(opt, "lr", o.lr, positive, "a number > 0"));
  ZINF_ASSIGN_OR_RETURN(o.beta1, number(opt, "beta1", o.beta1, unit_interval, "a number in [0, 1)"));
  ZINF_ASSIGN_OR_RETURN(o.beta2, number(opt, "beta2", o.beta2, unit_interval, "a number in [0, 1)"));
  ZINF_ASSIGN_OR_RETURN(o.eps, number(opt, "eps", o.eps, positive, "a number > 0"));
  const double default_decay = o.type == OptimizerType::kAdamW ? 0.1 : 0.0;
  ZINF_ASSIGN_OR_RETURN(o.weight_decay, number(opt, "weight_decay", default_decay, non_negative, "a number >= 0"));
  ZINF_ASSIGN_OR_RETURN(o.grad_clip,
                        number(opt, "grad_clip", o.grad_clip, non_negative, "a number >= 0 (0 = no clipping)"));
  ZINF_ASSIGN_OR_RETURN(const std::optional<JsonObject> schedule, section(opt, "schedule"));
  if (!schedule) return Status::ok();
  ZINF_RETURN_IF_ERROR(schedule->reject_unknown_keys({"kind", "warmup_steps", "min_lr_ratio"}));
  ZINF_ASSIGN_OR_RETURN(o.schedule.kind, choice(*schedule, "kind", optim::LrScheduleKind::kConstant, kScheduleNames));
  ZINF_ASSIGN_OR_RETURN(o.schedule.warmup_steps, non_negative_int(*schedule, "warmup_steps", 0, kMaxSteps));
  if (o.schedule.warmup_steps > out.steps) {
    return Status::invalid_argument(fmt::format("{}: {} exceeds steps {}", schedule->field_path("warmup_steps"),
                                                o.schedule.warmup_steps, out.steps));
  }
  ZINF_ASSIGN_OR_RETURN(o.schedule.min_lr_ratio, number(
                                                     *schedule, "min_lr_ratio", o.schedule.min_lr_ratio,
                                                     [](double x) { return x >= 0 && x <= 1; }, "a number in [0, 1]"));
  return Status::ok();
}

Status parse_loss_scale(const JsonObject& root, Scenario& out) {
  out.loss_scale = LossScaleConfig{};
  ZINF_ASSIGN_OR_RETURN(const std::optional<JsonObject> scale, section(root, "loss_scale"));
  if (!scale) return Status::ok();
  if (out.precision != DType::kF16) {
    return Status::invalid_argument(fmt::format("{}: only applies to precision fp16 (precision is {})",
                                                root.field_path("loss_scale"), dtype_name(out.precision)));
  }
  ZINF_RETURN_IF_ERROR(scale->reject_unknown_keys({"initial", "growth_interval"}));
  // The scaler's own range (optim::LossScaler: at least min_scale 1, at most the largest float),
  // checked here so the error names the scenario's field.
  ZINF_ASSIGN_OR_RETURN(
      out.loss_scale.initial,
      number(
          *scale, "initial", out.loss_scale.initial,
          [](double x) { return x >= 1.0 && x <= static_cast<double>(std::numeric_limits<float>::max()); },
          "a number from 1 to 3.4e38 (the largest float)"));
  ZINF_ASSIGN_OR_RETURN(out.loss_scale.growth_interval,
                        positive_int(*scale, "growth_interval", out.loss_scale.growth_interval, kMaxSteps));
  return Status::ok();
}

Status parse_runtime_sections(const JsonObject& root, Scenario& out) {
  out.eval = EvalConfig{};
  ZINF_ASSIGN_OR_RETURN(const std::optional<JsonObject> eval, section(root, "eval"));
  if (eval) {
    ZINF_RETURN_IF_ERROR(eval->reject_unknown_keys({"every", "batches"}));
    ZINF_ASSIGN_OR_RETURN(out.eval.every, non_negative_int(*eval, "every", 0, kMaxSteps));
    ZINF_ASSIGN_OR_RETURN(out.eval.batches, positive_int(*eval, "batches", out.eval.batches, kMaxSteps));
  }
  out.checkpoint = CheckpointConfig{};
  ZINF_ASSIGN_OR_RETURN(const std::optional<JsonObject> ckpt, section(root, "checkpoint"));
  if (ckpt) {
    ZINF_RETURN_IF_ERROR(ckpt->reject_unknown_keys({"dir", "every", "keep_last", "resume", "strict"}));
    ZINF_ASSIGN_OR_RETURN(out.checkpoint.dir, non_empty_string(*ckpt, "dir"));
    ZINF_ASSIGN_OR_RETURN(out.checkpoint.every, positive_int(*ckpt, "every", out.checkpoint.every, kMaxSteps));
    ZINF_ASSIGN_OR_RETURN(out.checkpoint.keep_last,
                          positive_int(*ckpt, "keep_last", out.checkpoint.keep_last, 1000000));
    ZINF_ASSIGN_OR_RETURN(out.checkpoint.resume, boolean(*ckpt, "resume", out.checkpoint.resume));
    ZINF_ASSIGN_OR_RETURN(out.checkpoint.strict, boolean(*ckpt, "strict", out.checkpoint.strict));
  }
  out.init = InitConfig{};
  ZINF_ASSIGN_OR_RETURN(const std::optional<JsonObject> init, section(root, "init"));
  if (init) {
    ZINF_RETURN_IF_ERROR(init->reject_unknown_keys({"safetensors"}));
    ZINF_ASSIGN_OR_RETURN(out.init.safetensors, non_empty_string(*init, "safetensors"));
  }
  out.output = OutputConfig{};
  ZINF_ASSIGN_OR_RETURN(const std::optional<JsonObject> output, section(root, "output"));
  if (output) {
    ZINF_RETURN_IF_ERROR(output->reject_unknown_keys({"record", "log_every"}));
    if (given(*output, "record")) {
      ZINF_ASSIGN_OR_RETURN(out.output.record, non_empty_string(*output, "record"));
    }
    ZINF_ASSIGN_OR_RETURN(out.output.log_every, positive_int(*output, "log_every", out.output.log_every, kMaxSteps));
  }
  return Status::ok();
}

// Sets out.operator_tiling: the uniform factor, or auto's choice against the device budget of
// gathered parameters (spec/operator_tiling.h). Needs out.zero and out.precision parsed.
Status resolve_tiling(const JsonObject& root, Scenario& out) {
  if (!out.tiling_auto) {
    out.operator_tiling = OperatorTiling::uniform(out.tiling, out.shape.tied_embeddings);
    return Status::ok();
  }
  const std::string field = root.field_path("tiling");
  // Resident parameters: the whole model is on the device, tiles would not shrink the working set.
  if (out.zero.stage < 3 || out.zero.params == Tier::kDevice) {
    out.operator_tiling = OperatorTiling{};
    return Status::ok();
  }
  if (out.zero.max_live_bytes == 0) {
    return Status::invalid_argument(fmt::format(
        "{}: \"auto\" sizes the tiles against zero.max_live_bytes (the device bytes of gathered parameters); give "
        "zero.max_live_bytes or a tiling factor",
        field));
  }
  ZINF_ASSIGN_OR_RETURN(out.operator_tiling,
                        choose_tiling(out.shape, dtype_size_bytes(out.precision), out.zero.max_live_bytes, field));
  return Status::ok();
}

}  // namespace

std::string_view data_source_name(DataSource source) { return source == DataSource::kFile ? "file" : "markov"; }
std::string_view optimizer_type_name(OptimizerType type) { return type == OptimizerType::kAdam ? "adam" : "adamw"; }

bool operator==(const Scenario& a, const Scenario& b) {
  const ModelShape& x = a.shape;
  const ModelShape& y = b.shape;
  const bool same_shape = x.name == y.name && x.layers == y.layers && x.hidden == y.hidden && x.heads == y.heads &&
                          x.kv_heads == y.kv_heads && x.head_dim == y.head_dim && x.ffn_hidden == y.ffn_hidden &&
                          x.vocab == y.vocab && x.max_positions == y.max_positions && x.norm == y.norm &&
                          x.mlp == y.mlp && x.position == y.position && x.qkv_bias == y.qkv_bias &&
                          x.attn_out_bias == y.attn_out_bias && x.mlp_bias == y.mlp_bias &&
                          x.tied_embeddings == y.tied_embeddings && x.norm_bias == y.norm_bias &&
                          x.norm_eps == y.norm_eps && x.rope == y.rope;
  return same_shape && a.name == b.name && a.params_requested == b.params_requested && a.data == b.data &&
         a.batch == b.batch && a.seq == b.seq && a.steps == b.steps && a.precision == b.precision &&
         a.optimizer == b.optimizer && a.loss_scale == b.loss_scale && a.seed == b.seed && a.device == b.device &&
         a.device_memory_bytes == b.device_memory_bytes && a.threads == b.threads &&
         a.activation_checkpointing == b.activation_checkpointing && a.tiling == b.tiling &&
         a.tiling_auto == b.tiling_auto && a.operator_tiling == b.operator_tiling && a.eval == b.eval &&
         a.checkpoint == b.checkpoint && a.init == b.init && a.output == b.output && a.zero == b.zero;
}

Result<Scenario> parse_scenario(const nlohmann::json& document, std::string_view source_name,
                                const ShapeResolver& resolve) {
  ZINF_ASSIGN_OR_RETURN(const JsonObject root, JsonObject::wrap(document, std::string(kRoot)));
  ZINF_RETURN_IF_ERROR(root.reject_unknown_keys(kTopKeys));
  Scenario out;

  std::string stem = std::filesystem::path(std::string(source_name)).stem().string();
  if (given(root, "name")) {
    ZINF_ASSIGN_OR_RETURN(out.name, non_empty_string(root, "name"));
  } else {
    out.name = stem.empty() ? std::string(kRoot) : std::move(stem);
  }
  ZINF_ASSIGN_OR_RETURN(out.seed, unsigned_int(root, "seed", 0));
  ZINF_ASSIGN_OR_RETURN(out.batch, positive_int(root, "batch", kScenarioDefaultBatch, kMaxBatch));
  ZINF_ASSIGN_OR_RETURN(out.seq, positive_int(root, "seq", kScenarioDefaultSeq, kMaxSeq));
  if (!root.has("steps")) {
    return Status::invalid_argument(
        fmt::format("{}: required field is missing; give the number of training steps", root.field_path("steps")));
  }
  ZINF_ASSIGN_OR_RETURN(out.steps, positive_int(root, "steps", 0, kMaxSteps));
  ZINF_ASSIGN_OR_RETURN(out.precision, choice(root, "precision", DType::kF32, kPrecisionNames));

  if (!root.has("model")) {
    return Status::invalid_argument(
        fmt::format("{}: required field is missing; give {{\"layers\", \"hidden\", \"heads\"}} or {{\"params\"}}",
                    root.field_path("model")));
  }
  ZINF_RETURN_IF_ERROR(
      parse_model(root, resolve, std::filesystem::path(std::string(source_name)).parent_path().string(), out));
  if (out.seq > out.shape.max_positions) {
    return Status::invalid_argument(
        fmt::format("{}: {} exceeds model.max_positions {}", root.field_path("seq"), out.seq, out.shape.max_positions));
  }
  ZINF_RETURN_IF_ERROR(parse_data(root, out));
  ZINF_RETURN_IF_ERROR(parse_optimizer(root, out));
  ZINF_RETURN_IF_ERROR(parse_loss_scale(root, out));

  ZINF_ASSIGN_OR_RETURN(out.device, choice(root, "device", device::DeviceKind::kCpu, kDeviceNames));
  if (given(root, "device_memory")) {
    // 0 is the same as leaving the field out (no budget), as for every size budget of a scenario
    // (scenarios/README.md).
    Result<std::uint64_t> budget = root.bytes("device_memory", true);
    if (!budget.is_ok()) {
      return Status(budget.status().code(), budget.status().message() + "; 0 or leaving it out: no budget");
    }
    if (*budget != 0) out.device_memory_bytes = *budget;
  }
  ZINF_ASSIGN_OR_RETURN(out.threads, non_negative_int(root, "threads", 0, kMaxThreads));
  ZINF_ASSIGN_OR_RETURN(out.activation_checkpointing, boolean(root, "activation_checkpointing", false));
  out.tiling_auto = given(root, "tiling") && root.raw().at("tiling") == "auto";
  if (given(root, "tiling") && root.raw().at("tiling").is_string() && !out.tiling_auto) {
    return Status::invalid_argument(fmt::format("{}: expected a positive integer or \"auto\", found {}",
                                                root.field_path("tiling"), shown(root.raw().at("tiling"))));
  }
  if (!out.tiling_auto) {
    ZINF_ASSIGN_OR_RETURN(out.tiling, positive_int(root, "tiling", 1, kMaxDim));
  }
  if (out.tiling > max_tiling(out.shape)) {
    return Status::invalid_argument(fmt::format(
        "{}: {} is more than {}, the output features of the smallest tiled linear (each tile needs at least one)",
        root.field_path("tiling"), out.tiling, max_tiling(out.shape)));
  }
  if (out.shape.ffn_hidden % out.tiling != 0) {
    return Status::invalid_argument(fmt::format("{}: {} does not divide the MLP width {} (model.ffn_hidden)",
                                                root.field_path("tiling"), out.tiling, out.shape.ffn_hidden));
  }
  ZINF_RETURN_IF_ERROR(parse_runtime_sections(root, out));
  if (given(root, "zero")) {
    ZINF_ASSIGN_OR_RETURN(const JsonObject zero, root.object("zero"));
    ZINF_ASSIGN_OR_RETURN(out.zero, parse_zero_config(zero));
  }
  if (given(root, "deepspeed")) ZINF_RETURN_IF_ERROR(apply_scenario_deepspeed(root, out));
  ZINF_RETURN_IF_ERROR(name_deepspeed_keys(resolve_tiling(root, out), out));
  if (out.zero.activations != Tier::kDevice && !out.activation_checkpointing) {
    return Status::invalid_argument(
        fmt::format("{}.activations: \"cpu\" needs activation_checkpointing true (only the checkpointed block inputs "
                    "can live in host memory); set activation_checkpointing or remove zero.activations",
                    root.field_path("zero")));
  }

  if (out.device_memory_bytes) {
    const OneLayerDeviceBytes need = one_layer_device_bytes_breakdown(out);
    const std::uint64_t need_total = need.total();
    if (*out.device_memory_bytes < need_total) {
      return Status::invalid_argument(fmt::format(
          "{}: {} is too small for even one layer (one layer needs {}: {} of model states + {} of activations); "
          "raise device_memory or lower batch/seq",
          root.field_path("device_memory"), format_bytes(static_cast<double>(*out.device_memory_bytes)),
          format_bytes(static_cast<double>(need_total)), format_bytes(static_cast<double>(need.model_states)),
          format_bytes(static_cast<double>(need.activations))));
    }
  }
  return out;
}

Result<Scenario> load_scenario(const std::string& path, const ShapeResolver& resolve) {
  ZINF_ASSIGN_OR_RETURN(const json document, read_json_file(path));
  return parse_scenario(document, path, resolve);
}

}  // namespace zinf::spec
