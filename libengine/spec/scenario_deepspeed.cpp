#include "libengine/spec/scenario_deepspeed.h"

#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "libengine/spec/deepspeed_config.h"
#include "libengine/spec/model_shape.h"

namespace zinf::spec {
namespace {

bool given(const JsonObject& object, std::string_view key) {
  return object.has(key) && !object.raw().at(key).is_null();
}

// Whether the scenario wrote `section.key` itself.
bool scenario_gives(const JsonObject& root, std::string_view section, std::string_view key) {
  if (!given(root, section) || !root.raw().at(section).is_object()) return false;
  const nlohmann::json& object = root.raw().at(section);
  return object.contains(key) && !object.at(key).is_null();
}

// Where a DeepSpeed value and the scenario's own meet: the config's explicit value fills a field
// the scenario left out, and must equal one it gave.
class Filler {
 public:
  Filler(const JsonObject& root, std::string prefix) : root_(root), prefix_(std::move(prefix)) {}

  Status fill(double ds_value, std::string_view ds_key, std::string_view section, std::string_view key,
              double& field) const {
    const bool mine = section.empty() ? given(root_, key) : scenario_gives(root_, section, key);
    if (mine && std::fabs(field - ds_value) > 1e-12 * std::max(std::fabs(field), std::fabs(ds_value))) {
      return Status::invalid_argument(fmt::format(
          "{}ds_config.{} is {:g} but scenario.{}{}{} is {:g}; make them agree, drop one, or write \"auto\"", prefix_,
          ds_key, ds_value, section, section.empty() ? "" : ".", key, field));
    }
    field = ds_value;
    return Status::ok();
  }

  Status refuse(std::string_view ds_key, std::string_view why) const {
    return Status::invalid_argument(fmt::format("{}ds_config.{}: {}", prefix_, ds_key, why));
  }

 private:
  const JsonObject& root_;
  std::string prefix_;  // "scenario.deepspeed: <path>: "
};

Status apply_optimizer(const ResolvedDeepSpeed& r, const JsonObject& root, const Filler& filler, Scenario& out) {
  const DeepSpeedConfig& c = r.config;
  OptimizerConfig& o = out.optimizer;
  if (c.optimizer_type) {
    const OptimizerType type = c.adam_w_mode ? OptimizerType::kAdamW : OptimizerType::kAdam;
    if (scenario_gives(root, "optimizer", "type") && o.type != type) {
      return filler.refuse("optimizer.type",
                           fmt::format("'{}'{} is {} but scenario.optimizer.type is {}; make them agree",
                                       *c.optimizer_type, c.adam_w_mode ? "" : " with adam_w_mode false",
                                       optimizer_type_name(type), optimizer_type_name(o.type)));
    }
    o.type = type;
  }
  if (c.lr.value) ZINF_RETURN_IF_ERROR(filler.fill(*c.lr.value, "optimizer.params.lr", "optimizer", "lr", o.lr));
  if (c.lr.value && *c.lr.value <= 0) return filler.refuse("optimizer.params.lr", "0 does not train; give lr > 0");
  if (c.betas.value) {
    ZINF_RETURN_IF_ERROR(filler.fill((*c.betas.value)[0], "optimizer.params.betas[0]", "optimizer", "beta1", o.beta1));
    ZINF_RETURN_IF_ERROR(filler.fill((*c.betas.value)[1], "optimizer.params.betas[1]", "optimizer", "beta2", o.beta2));
  }
  if (c.eps.value) {
    if (*c.eps.value <= 0) return filler.refuse("optimizer.params.eps", "must be > 0");
    ZINF_RETURN_IF_ERROR(filler.fill(*c.eps.value, "optimizer.params.eps", "optimizer", "eps", o.eps));
  }
  if (c.weight_decay.value) {
    ZINF_RETURN_IF_ERROR(filler.fill(*c.weight_decay.value, "optimizer.params.weight_decay", "optimizer",
                                     "weight_decay", o.weight_decay));
  }
  if (c.gradient_clipping.value) {
    ZINF_RETURN_IF_ERROR(
        filler.fill(*c.gradient_clipping.value, "gradient_clipping", "optimizer", "grad_clip", o.grad_clip));
  }
  return Status::ok();
}

Status apply_loss_scale(const ResolvedDeepSpeed& r, const Filler& filler, Scenario& out) {
  if (out.precision != DType::kF16) return Status::ok();
  const DeepSpeedConfig& c = r.config;
  if (c.loss_scale != 0.0) {
    return filler.refuse("fp16.loss_scale",
                         fmt::format("{:g} is a static loss scale; zinf scales dynamically: use 0", c.loss_scale));
  }
  double initial = std::ldexp(1.0, static_cast<int>(c.initial_scale_power));
  ZINF_RETURN_IF_ERROR(
      filler.fill(initial, "fp16.initial_scale_power (as 2^power)", "loss_scale", "initial", out.loss_scale.initial));
  double window = static_cast<double>(out.loss_scale.growth_interval);
  ZINF_RETURN_IF_ERROR(filler.fill(static_cast<double>(c.loss_scale_window), "fp16.loss_scale_window", "loss_scale",
                                   "growth_interval", window));
  out.loss_scale.growth_interval = static_cast<std::int64_t>(window);
  return Status::ok();
}

}  // namespace

Status apply_scenario_deepspeed(const JsonObject& root, Scenario& out) {
  if (given(root, "zero")) {
    return Status::invalid_argument(
        fmt::format("{}: the DeepSpeed config sets the engine; drop scenario.zero or the deepspeed field",
                    root.field_path("deepspeed")));
  }
  ZINF_ASSIGN_OR_RETURN(const std::string path, root.string("deepspeed"));
  if (path.empty()) {
    return Status::invalid_argument(
        fmt::format("{}: expected the path of a ds_config.json, found \"\"", root.field_path("deepspeed")));
  }
  const std::string prefix = fmt::format("{}: {}: ", root.field_path("deepspeed"), path);
  Result<DeepSpeedConfig> config = load_deepspeed_config(path);
  if (!config.is_ok()) return config.status().with_context(root.field_path("deepspeed"));

  DsAutoSources sources;
  sources.hidden = out.shape.hidden;
  sources.world_size = 1;  // zinf train runs one rank
  if (given(root, "batch")) sources.micro_batch = out.batch;
  sources.default_micro_batch = kScenarioDefaultBatch;
  sources.grad_accumulation = 1;  // zinf train steps once per batch
  if (given(root, "precision")) sources.precision = out.precision;
  sources.lr = out.optimizer.lr;
  sources.beta1 = out.optimizer.beta1;
  sources.beta2 = out.optimizer.beta2;
  sources.eps = out.optimizer.eps;
  sources.weight_decay = out.optimizer.weight_decay;
  sources.max_grad_norm = out.optimizer.grad_clip;
  sources.micro_batch_name = "scenario.batch";
  sources.grad_accumulation_name = "zinf train: one optimizer step per batch";
  sources.precision_name = "scenario.precision";
  sources.optimizer_name = "scenario.optimizer";
  sources.grad_clip_name = "scenario.optimizer.grad_clip";
  Result<ResolvedDeepSpeed> resolved = resolve_deepspeed(*config, sources, "ds_config");
  if (!resolved.is_ok()) return resolved.status().with_context(path).with_context(root.field_path("deepspeed"));
  const Filler filler(root, prefix);
  if (resolved->grad_accumulation != 1) {
    return filler.refuse("gradient_accumulation_steps",
                         fmt::format("{}: zinf train takes one optimizer step per batch (no accumulation); use 1 or "
                                     "\"auto\", or raise scenario.batch instead",
                                     resolved->grad_accumulation));
  }
  out.batch = resolved->micro_batch;
  if (out.seq * out.batch <= 0) return filler.refuse("train_micro_batch_size_per_gpu", "must be at least 1");
  // A scenario without a precision is fp32, as DeepSpeed without fp16/bf16 is.
  out.precision = resolved->precision;
  ZINF_RETURN_IF_ERROR(apply_optimizer(*resolved, root, filler, out));
  ZINF_RETURN_IF_ERROR(apply_loss_scale(*resolved, filler, out));

  const std::size_t bytes_per_param = out.precision == DType::kF32 ? 4 : 2;
  Result<ZeroConfig> zero =
      zero_config_from_deepspeed(*resolved, bytes_per_param, count_parameters(out.shape).total, "ds_config");
  if (!zero.is_ok()) return zero.status().with_context(path).with_context(root.field_path("deepspeed"));
  out.zero = std::move(zero).value();
  out.deepspeed_context = fmt::format("{}: {}", root.field_path("deepspeed"), path);
  const DeepSpeedConfig& c = resolved->config;
  out.deepspeed_keys = {
      {"zero.max_live_bytes", "ds_config." + c.key("zero_optimization.stage3_max_live_parameters")},
      {"zero.persistence_threshold", "ds_config." + c.key("zero_optimization.stage3_param_persistence_threshold")},
      {"zero.prefetch_bytes", "ds_config.zero_optimization.offload_param.buffer_count x buffer_size"},
      {"zero.sub_group_size", "ds_config.zero_optimization.sub_group_size"}};
  if (out.zero.activations == Tier::kCpu && !out.activation_checkpointing) {
    return filler.refuse("activation_checkpointing.cpu_checkpointing",
                         "true keeps activation checkpoints in CPU memory, but the scenario does not checkpoint; set "
                         "scenario.activation_checkpointing true or cpu_checkpointing false");
  }
  if (!resolved->config.unused_keys.empty()) {
    std::string keys;
    for (const std::string& key : resolved->config.unused_keys)
      keys += fmt::format("{}{}", keys.empty() ? "" : ", ", key);
    out.warnings.push_back(fmt::format("{}not used by zinf: {}", prefix, keys));
  }
  return Status::ok();
}

Status name_deepspeed_keys(const Status& status, const Scenario& scenario) {
  if (status.is_ok() || scenario.deepspeed_keys.empty()) return status;
  const std::string& message = status.message();
  const auto word_start = [&](std::size_t i) {
    return i == 0 || !(std::isalnum(static_cast<unsigned char>(message[i - 1])) || message[i - 1] == '_' ||
                       message[i - 1] == '.');
  };
  std::string out;
  std::size_t i = 0;
  while (i < message.size()) {
    bool replaced = false;
    for (const auto& [field, key] : scenario.deepspeed_keys) {
      const std::string full = "scenario." + field;
      if (message.compare(i, full.size(), full) == 0 && word_start(i)) {
        // The byte budget zinf derived from the key, so its sizes make sense next to it.
        out += fmt::format("{}: {} (zinf's {}, in bytes)", scenario.deepspeed_context, key, field);
        i += full.size();
        replaced = true;
        break;
      }
      if (message.compare(i, field.size(), field) == 0 && word_start(i)) {
        out += key;
        i += field.size();
        replaced = true;
        break;
      }
    }
    if (!replaced) out += message[i++];
  }
  return Status(status.code(), out);
}

}  // namespace zinf::spec
