#include "libengine/spec/deepspeed_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "libengine/spec/deepspeed_keys.h"
#include "libengine/spec/json_input.h"

namespace zinf::spec {
namespace {

using json = nlohmann::json;

// Largest element count accepted: DeepSpeed configs write 1e14 for "no limit" (sub_group_size).
constexpr double kMaxCount = 1e15;

// The keys of each section, in three sets: used by zinf, known but without effect in zinf, and
// (checked by the parser) keys whose non-default value zinf cannot honour.
struct KeySets {
  std::vector<std::string_view> used;
  std::vector<std::string_view> unused;
  std::vector<std::string_view> refused;  // an error when given a value other than false/0/null
};

const KeySets kZeroKeys{
    {"stage", "offload_param", "offload_optimizer", "stage3_max_live_parameters", "stage3_prefetch_bucket_size",
     "stage3_param_persistence_threshold", "sub_group_size", "reduce_bucket_size", "aio"},
    {"overlap_comm",
     "contiguous_gradients",
     "allgather_partitions",
     "allgather_bucket_size",
     "reduce_scatter",
     "stage3_max_reuse_distance",
     "stage3_gather_16bit_weights_on_model_save",
     "stage3_gather_fp16_weights_on_model_save",
     "gather_16bit_weights_on_model_save",
     "round_robin_gradients",
     "elastic_checkpoint",
     "load_from_fp32_weights",
     "ignore_unused_parameters",
     "legacy_stage1",
     "log_trace_cache_warnings",
     "memory_efficient_linear",
     "use_multi_rank_bucket_allreduce",
     "stage3_module_granularity_threshold",
     "stage3_use_all_reduce_for_fetch_params",
     "stage3_model_persistence_threshold",
     "zeropp_loco_param",
     "mics_hierarchical_params_gather",
     "pipeline_loading_checkpoint",
     "override_module_apply"},
    {"zero_quantized_weights", "zero_quantized_nontrainable_weights", "zero_quantized_gradients",
     "zero_hpz_partition_size", "mics_shard_size"}};
const KeySets kOffloadParamKeys{
    {"device", "nvme_path", "pin_memory", "buffer_count", "buffer_size", "max_in_cpu"}, {}, {}};
const KeySets kOffloadOptimizerKeys{{"device", "nvme_path", "pin_memory", "buffer_count", "ratio"},
                                    {"pipeline_read", "pipeline_write", "pipeline", "fast_init"},
                                    {}};
// thread_count was the aio thread count of older DeepSpeed; 0.19.8 (runtime/swap_tensor/aio_config.py)
// reads only intra_op_parallelism and ignores thread_count, so zinf does too (listed as unused, with why).
const KeySets kAioKeys{{"block_size", "queue_depth", "intra_op_parallelism"},
                       {"single_submit", "overlap_events", "thread_count"},
                       {"use_gds"}};
const KeySets kFp16Keys{{"enabled", "loss_scale", "initial_scale_power", "loss_scale_window"},
                        {"hysteresis", "consecutive_hysteresis", "min_loss_scale", "auto_cast"},
                        {"fp16_master_weights_and_grads"}};
const KeySets kBf16Keys{{"enabled"}, {"immediate_grad_update", "check_grad_overflow"}, {}};
const KeySets kActivationKeys{{"partition_activations", "cpu_checkpointing", "number_checkpoints"},
                              {"contiguous_memory_optimization", "synchronize_checkpoint_boundary", "profile"},
                              {}};
const KeySets kTopKeys{
    {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "gradient_clipping", "fp16",
     "bf16", "optimizer", "zero_optimization", "activation_checkpointing", "aio"},
    {},
    {}};

bool truthy(const json& value) {
  if (value.is_null()) return false;
  if (value.is_boolean()) return value.get<bool>();
  if (value.is_number()) return value.get<double>() != 0.0;
  return true;
}

// A refused key is harmless at false/0/null and at DeepSpeed's own default, which leaves the
// feature off (zero_hpz_partition_size 1: no secondary partition; mics_shard_size -1: no MiCS).
bool refused_value(std::string_view key, const json& value) {
  if (!truthy(value)) return false;
  if (!value.is_number() || value.is_boolean()) return true;
  const double number = value.get<double>();
  if (key == "zero_hpz_partition_size") return number != 1.0;
  if (key == "mics_shard_size") return number != -1.0;
  return true;
}

// Sorts the keys of `object` (the section `section` of DeepSpeedConfig, "" = top level, none for
// a section without other names): a key
// under another of its names (deepspeed_key_aliases) counts as the key it names; refused keys
// with a value that turns their feature on are an error; unused keys are recorded; unknown keys
// are an error (`strict`) or recorded as unused (the top level, where DeepSpeed has dozens of
// sections zinf has nothing to do with).
Status sort_keys(const JsonObject& object, const KeySets& keys, bool strict, DeepSpeedConfig& out,
                 std::optional<std::string_view> section = std::nullopt) {
  std::vector<std::string_view> known = keys.used;
  known.insert(known.end(), keys.unused.begin(), keys.unused.end());
  known.insert(known.end(), keys.refused.begin(), keys.refused.end());
  std::vector<std::string_view> used = keys.used;
  // Only the top level ("") and zero_optimization have other names.
  const std::vector<const DsKeyAlias*> aliases = section ? aliases_in(*section) : std::vector<const DsKeyAlias*>{};
  for (const DsKeyAlias* alias : aliases) {
    known.push_back(alias->name);
    if (std::find(keys.used.begin(), keys.used.end(), alias->canonical) != keys.used.end()) {
      used.push_back(alias->name);
    }
  }
  if (strict) ZINF_RETURN_IF_ERROR(object.reject_unknown_keys(known));
  if (section) ZINF_RETURN_IF_ERROR(check_aliases(object, *section, out.written_as));
  std::vector<std::string>& unused = out.unused_keys;
  for (const auto& [key, value] : object.raw().items()) {
    const auto in = [&key = key](const std::vector<std::string_view>& list) {
      return std::find(list.begin(), list.end(), key) != list.end();
    };
    if (in(keys.refused) && refused_value(key, value)) {
      return Status::invalid_argument(fmt::format("{}: {} is not supported by zinf; remove the key or set it to false",
                                                  object.field_path(key), describe_json_value(value)));
    }
    if (!in(used)) unused.push_back(object.field_path(key));
  }
  return Status::ok();
}

std::string auto_refused(const JsonObject& object, std::string_view key) {
  return fmt::format(
      "{}: \"auto\" is filled in by the Hugging Face integration only for the batch sizes, gradient_clipping, "
      "fp16/bf16.enabled, the optimizer's lr/betas/eps/weight_decay, reduce_bucket_size, "
      "stage3_prefetch_bucket_size and stage3_param_persistence_threshold; give a value",
      object.field_path(key));
}

bool is_auto(const json& value) { return value.is_string() && value.get<std::string>() == "auto"; }

// A count written as an integer or as an integral float (1e9), in [minimum, 1e15].
Result<std::int64_t> count_value(const json& value, const std::string& field, std::int64_t minimum) {
  if (value.is_number() && !value.is_boolean()) {
    const double number = value.get<double>();
    if (std::isfinite(number) && number == std::floor(number) && number >= static_cast<double>(minimum) &&
        number <= kMaxCount) {
      if (const auto exact = exact_int64(value)) return *exact;
      return static_cast<std::int64_t>(number);
    }
  }
  return Status::invalid_argument(
      fmt::format("{}: expected a whole number from {} to 1e15, found {}", field, minimum, describe_json_value(value)));
}

Result<DsSetting<std::int64_t>> count_setting(const JsonObject& object, std::string_view key, bool auto_allowed,
                                              std::int64_t minimum) {
  DsSetting<std::int64_t> out;
  if (!object.has(key) || object.raw().at(key).is_null()) return out;
  const json& value = object.raw().at(key);
  if (is_auto(value)) {
    if (!auto_allowed) return Status::invalid_argument(auto_refused(object, key));
    out.is_auto = true;
    return out;
  }
  ZINF_ASSIGN_OR_RETURN(out.value, count_value(value, object.field_path(key), minimum));
  return out;
}

Result<std::int64_t> count_or(const JsonObject& object, std::string_view key, std::int64_t fallback,
                              std::int64_t minimum) {
  ZINF_ASSIGN_OR_RETURN(const DsSetting<std::int64_t> setting, count_setting(object, key, false, minimum));
  return setting.value.value_or(fallback);
}

Result<double> number_value(const json& value, const std::string& field, double minimum) {
  if (value.is_number() && !value.is_boolean()) {
    const double number = value.get<double>();
    if (std::isfinite(number) && number >= minimum) return number;
  }
  return Status::invalid_argument(
      fmt::format("{}: expected a number >= {}, found {}", field, minimum, describe_json_value(value)));
}

Result<DsSetting<double>> number_setting(const JsonObject& object, std::string_view key, double minimum) {
  DsSetting<double> out;
  if (!object.has(key) || object.raw().at(key).is_null()) return out;
  const json& value = object.raw().at(key);
  if (is_auto(value)) {
    out.is_auto = true;
    return out;
  }
  ZINF_ASSIGN_OR_RETURN(out.value, number_value(value, object.field_path(key), minimum));
  return out;
}

Result<bool> bool_or(const JsonObject& object, std::string_view key, bool fallback) {
  if (!object.has(key) || object.raw().at(key).is_null()) return fallback;
  const json& value = object.raw().at(key);
  if (!value.is_boolean()) {
    return Status::invalid_argument(
        fmt::format("{}: expected true or false, found {}", object.field_path(key), describe_json_value(value)));
  }
  return value.get<bool>();
}

// `section` as the file names it: "fp16", "bf16" or DeepSpeed's legacy "bfloat16".
Result<DsSetting<bool>> enabled_setting(const JsonObject& root, std::string_view section, const KeySets& keys,
                                        DeepSpeedConfig& out) {
  DsSetting<bool> enabled;
  if (!root.has(section) || root.raw().at(section).is_null()) return enabled;
  ZINF_ASSIGN_OR_RETURN(const JsonObject object, root.object(section));
  ZINF_RETURN_IF_ERROR(sort_keys(object, keys, true, out));
  if (object.has("enabled") && is_auto(object.raw().at("enabled"))) {
    enabled.is_auto = true;
  } else {
    ZINF_ASSIGN_OR_RETURN(enabled.value, bool_or(object, "enabled", false));
  }
  if (section == "fp16") {
    if (object.has("loss_scale") && !object.raw().at("loss_scale").is_null()) {
      ZINF_ASSIGN_OR_RETURN(out.loss_scale,
                            number_value(object.raw().at("loss_scale"), object.field_path("loss_scale"), 0.0));
    }
    ZINF_ASSIGN_OR_RETURN(out.initial_scale_power, count_or(object, "initial_scale_power", 16, 0));
    if (out.initial_scale_power > 127) {
      return Status::invalid_argument(fmt::format("{}: 2^{} overflows a float; use at most 127",
                                                  object.field_path("initial_scale_power"), out.initial_scale_power));
    }
    ZINF_ASSIGN_OR_RETURN(out.loss_scale_window, count_or(object, "loss_scale_window", 1000, 1));
  }
  return enabled;
}

Result<DsOffload> parse_offload(const JsonObject& zero, std::string_view key, bool params, DeepSpeedConfig& config) {
  DsOffload out;
  out.buffer_count = params ? 5 : 4;
  out.buffer_size = params ? 100'000'000 : 0;
  out.max_in_cpu = params ? 1'000'000'000 : 0;
  if (!zero.has(key) || zero.raw().at(key).is_null()) return out;
  ZINF_ASSIGN_OR_RETURN(const JsonObject offload, zero.object(key));
  ZINF_RETURN_IF_ERROR(sort_keys(offload, params ? kOffloadParamKeys : kOffloadOptimizerKeys, true, config));
  if (offload.has("device") && !offload.raw().at("device").is_null()) {
    const json& device = offload.raw().at("device");
    const std::string text = device.is_string() ? device.get<std::string>() : "";
    if (text == "none") {
      out.device = Tier::kDevice;
    } else if (text == "cpu") {
      out.device = Tier::kCpu;
    } else if (text == "nvme") {
      out.device = Tier::kNvme;
    } else {
      return Status::invalid_argument(fmt::format("{}: expected \"none\", \"cpu\" or \"nvme\", found {}",
                                                  offload.field_path("device"), describe_json_value(device)));
    }
  }
  if (offload.has("nvme_path") && !offload.raw().at("nvme_path").is_null()) {
    ZINF_ASSIGN_OR_RETURN(out.nvme_path, offload.string("nvme_path"));
  }
  if (out.device == Tier::kNvme && out.nvme_path.empty()) {
    return Status::invalid_argument(fmt::format(
        "{}: required when device is \"nvme\"; give the directory for the swap files (e.g. \"/local_nvme\")",
        offload.field_path("nvme_path")));
  }
  ZINF_ASSIGN_OR_RETURN(out.pin_memory, bool_or(offload, "pin_memory", false));
  ZINF_ASSIGN_OR_RETURN(out.buffer_count, count_or(offload, "buffer_count", out.buffer_count, 1));
  if (params) {
    ZINF_ASSIGN_OR_RETURN(out.buffer_size, count_or(offload, "buffer_size", out.buffer_size, 1));
    ZINF_ASSIGN_OR_RETURN(out.max_in_cpu, count_or(offload, "max_in_cpu", out.max_in_cpu, 0));
  } else if (offload.has("ratio") && !offload.raw().at("ratio").is_null()) {
    ZINF_ASSIGN_OR_RETURN(const double ratio, number_value(offload.raw().at("ratio"), offload.field_path("ratio"), 0));
    if (ratio != 1.0) {
      return Status::invalid_argument(fmt::format(
          "{}: {} offloads part of the optimizer (ZeRO-Offload++); zinf offloads all of it or none: remove the key",
          offload.field_path("ratio"), ratio));
    }
  }
  return out;
}

// DeepSpeed's deprecated cpu_offload / cpu_offload_param (true: that section with device "cpu"):
// applied to `offload` when written; `written` names the key for later messages.
Status deprecated_cpu_offload(const JsonObject& zero, std::string_view key, DsOffload& offload, std::string& written) {
  if (!zero.has(key) || zero.raw().at(key).is_null()) return Status::ok();
  ZINF_ASSIGN_OR_RETURN(const bool on, bool_or(zero, key, false));
  if (on) {
    offload.device = Tier::kCpu;
    written = zero.field_path(key);
  }
  return Status::ok();
}

Status parse_zero(const JsonObject& root, DeepSpeedConfig& out) {
  if (!root.has("zero_optimization") || root.raw().at("zero_optimization").is_null()) return Status::ok();
  if (root.raw().at("zero_optimization").is_boolean()) {
    // DeepSpeed's deprecated form (runtime/zero/config.py read_zero_config_deprecated): true is stage 1.
    out.stage = root.raw().at("zero_optimization").get<bool>() ? 1 : 0;
    return Status::ok();
  }
  ZINF_ASSIGN_OR_RETURN(const JsonObject zero, root.object("zero_optimization"));
  ZINF_RETURN_IF_ERROR(sort_keys(zero, kZeroKeys, true, out, "zero_optimization"));
  ZINF_ASSIGN_OR_RETURN(const std::int64_t stage, count_or(zero, "stage", 0, 0));
  if (stage > 3) {
    return Status::invalid_argument(
        fmt::format("{}: {} is not a ZeRO stage; expected 0, 1, 2 or 3", zero.field_path("stage"), stage));
  }
  out.stage = static_cast<int>(stage);
  ZINF_ASSIGN_OR_RETURN(out.offload_param, parse_offload(zero, "offload_param", true, out));
  ZINF_ASSIGN_OR_RETURN(out.offload_optimizer, parse_offload(zero, "offload_optimizer", false, out));
  std::string param_device = zero.field_path("offload_param.device");
  std::string optimizer_device = zero.field_path("offload_optimizer.device");
  ZINF_RETURN_IF_ERROR(deprecated_cpu_offload(zero, "cpu_offload_param", out.offload_param, param_device));
  ZINF_RETURN_IF_ERROR(deprecated_cpu_offload(zero, "cpu_offload", out.offload_optimizer, optimizer_device));
  if (out.offload_param.device != Tier::kDevice && out.stage != 3) {
    return Status::invalid_argument(
        fmt::format("{}: offloading parameters needs stage 3 (found {})", param_device, out.stage));
  }
  if (out.offload_optimizer.device != Tier::kDevice && out.stage == 0) {
    return Status::invalid_argument(
        fmt::format("{}: offloading the optimizer needs stage 1, 2 or 3 (found 0)", optimizer_device));
  }
  if (out.offload_optimizer.device == Tier::kNvme && out.stage != 3) {
    return Status::invalid_argument(
        fmt::format("{}: \"nvme\" needs stage 3 (ZeRO-Infinity); found stage {}", optimizer_device, out.stage));
  }
  if (out.offload_param.device != Tier::kDevice && out.offload_optimizer.device == Tier::kDevice) {
    return Status::invalid_argument(
        fmt::format("{}: parameters offloaded with the optimizer on the GPU is not supported by zinf; offload the "
                    "optimizer too (offload_optimizer.device \"cpu\" or \"nvme\")",
                    param_device));
  }
  // The Hugging Face integration fills these three from the hidden size. Each is read under the
  // name the file gave it (DeepSpeed's field name or its stage3_ alias).
  const auto name = [&](std::string_view canonical) { return written_name(zero, "zero_optimization", canonical); };
  // DeepSpeed's DeepSpeedZeroConfig: reduce_bucket_size gt=0 (0 is refused there, so here).
  ZINF_ASSIGN_OR_RETURN(out.reduce_bucket_size, count_setting(zero, "reduce_bucket_size", true, 1));
  ZINF_ASSIGN_OR_RETURN(out.prefetch_bucket_size, count_setting(zero, name("stage3_prefetch_bucket_size"), true, 0));
  ZINF_ASSIGN_OR_RETURN(out.persistence_threshold,
                        count_setting(zero, name("stage3_param_persistence_threshold"), true, 0));
  ZINF_ASSIGN_OR_RETURN(out.max_live_parameters, count_setting(zero, name("stage3_max_live_parameters"), false, 0));
  ZINF_ASSIGN_OR_RETURN(out.sub_group_size, count_setting(zero, "sub_group_size", false, 0));
  if (zero.has("aio")) {
    // The Hugging Face docs' NVMe example nests aio here; DeepSpeed reads it at the top level only,
    // and its DeepSpeedZeroConfig refuses the config (an extra field): so does zinf.
    return Status::invalid_argument(fmt::format(
        "{}: DeepSpeed refuses aio inside zero_optimization (it is not one of that section's fields) and reads it "
        "only at the top level; move the \"aio\" section up, next to zero_optimization",
        zero.field_path("aio")));
  }
  return Status::ok();
}

Status parse_optimizer(const JsonObject& root, DeepSpeedConfig& out) {
  if (!root.has("optimizer") || root.raw().at("optimizer").is_null()) return Status::ok();
  ZINF_ASSIGN_OR_RETURN(const JsonObject optimizer, root.object("optimizer"));
  ZINF_RETURN_IF_ERROR(optimizer.reject_unknown_keys({"type", "params"}));
  ZINF_ASSIGN_OR_RETURN(const std::string type, optimizer.string("type"));
  std::string lower = type;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower != "adam" && lower != "adamw") {
    return Status::invalid_argument(
        fmt::format("{}: '{}' is not supported; zinf trains with Adam or AdamW (its CPU Adam offloads the optimizer)",
                    optimizer.field_path("type"), type));
  }
  out.optimizer_type = type;
  if (!optimizer.has("params") || optimizer.raw().at("params").is_null()) return Status::ok();
  ZINF_ASSIGN_OR_RETURN(const JsonObject params, optimizer.object("params"));
  const KeySets keys{{"lr", "betas", "eps", "weight_decay", "adam_w_mode", "bias_correction"},
                     {"torch_adam", "fused", "foreach", "capturable", "maximize", "differentiable"},
                     {"amsgrad"}};
  ZINF_RETURN_IF_ERROR(sort_keys(params, keys, true, out));
  if (params.has("bias_correction")) {
    ZINF_ASSIGN_OR_RETURN(const bool bias_correction, bool_or(params, "bias_correction", true));
    if (!bias_correction) {
      return Status::invalid_argument(fmt::format("{}: false is not supported; zinf's Adam always corrects the bias",
                                                  params.field_path("bias_correction")));
    }
  }
  ZINF_ASSIGN_OR_RETURN(out.adam_w_mode, bool_or(params, "adam_w_mode", true));
  if (lower == "adamw") out.adam_w_mode = true;
  ZINF_ASSIGN_OR_RETURN(out.lr, number_setting(params, "lr", 0.0));
  ZINF_ASSIGN_OR_RETURN(out.eps, number_setting(params, "eps", 0.0));
  ZINF_ASSIGN_OR_RETURN(out.weight_decay, number_setting(params, "weight_decay", 0.0));
  if (params.has("betas") && !params.raw().at("betas").is_null()) {
    const json& betas = params.raw().at("betas");
    if (is_auto(betas)) {
      out.betas.is_auto = true;
    } else {
      const bool pair = betas.is_array() && betas.size() == 2 && betas[0].is_number() && betas[1].is_number() &&
                        !betas[0].is_boolean() && !betas[1].is_boolean();
      const auto in_range = [](double b) { return std::isfinite(b) && b >= 0.0 && b < 1.0; };
      if (!pair || !in_range(betas[0].get<double>()) || !in_range(betas[1].get<double>())) {
        return Status::invalid_argument(fmt::format("{}: expected [beta1, beta2], each in [0, 1), found {}",
                                                    params.field_path("betas"), describe_json_value(betas)));
      }
      out.betas.value = std::array<double, 2>{betas[0].get<double>(), betas[1].get<double>()};
    }
  }
  return Status::ok();
}

Status parse_activation_checkpointing(const JsonObject& root, DeepSpeedConfig& out) {
  if (!root.has("activation_checkpointing") || root.raw().at("activation_checkpointing").is_null()) {
    return Status::ok();
  }
  ZINF_ASSIGN_OR_RETURN(const JsonObject ac, root.object("activation_checkpointing"));
  ZINF_RETURN_IF_ERROR(sort_keys(ac, kActivationKeys, true, out));
  ZINF_ASSIGN_OR_RETURN(out.partition_activations, bool_or(ac, "partition_activations", false));
  ZINF_ASSIGN_OR_RETURN(out.cpu_checkpointing, bool_or(ac, "cpu_checkpointing", false));
  const bool absent =
      !ac.has("number_checkpoints") || ac.raw().at("number_checkpoints").is_null() ||
      (ac.raw().at("number_checkpoints").is_boolean() && !ac.raw().at("number_checkpoints").get<bool>());
  if (!absent) {
    ZINF_ASSIGN_OR_RETURN(out.number_checkpoints,
                          count_value(ac.raw().at("number_checkpoints"), ac.field_path("number_checkpoints"), 1));
  }
  return Status::ok();
}

Status parse_aio(const JsonObject& root, DeepSpeedConfig& out) {
  if (!root.has("aio") || root.raw().at("aio").is_null()) return Status::ok();
  ZINF_ASSIGN_OR_RETURN(const JsonObject aio, root.object("aio"));
  ZINF_RETURN_IF_ERROR(sort_keys(aio, kAioKeys, true, out));
  ZINF_ASSIGN_OR_RETURN(out.aio.block_size_bytes, count_or(aio, "block_size", out.aio.block_size_bytes, 512));
  ZINF_ASSIGN_OR_RETURN(out.aio.queue_depth, count_or(aio, "queue_depth", out.aio.queue_depth, 1));
  ZINF_ASSIGN_OR_RETURN(out.aio.thread_count, count_or(aio, "intra_op_parallelism", out.aio.thread_count, 1));
  if (aio.has("thread_count")) {
    const std::string path = aio.field_path("thread_count");
    std::replace(out.unused_keys.begin(), out.unused_keys.end(), path,
                 path + " (DeepSpeed 0.19.8 ignores it; aio.intra_op_parallelism sets the I/O threads)");
  }
  return Status::ok();
}

}  // namespace

Result<DeepSpeedConfig> parse_deepspeed_config(const nlohmann::json& document, const std::string& root_name) {
  ZINF_ASSIGN_OR_RETURN(const JsonObject root, JsonObject::wrap(document, root_name));
  DeepSpeedConfig out;
  ZINF_RETURN_IF_ERROR(sort_keys(root, kTopKeys, false, out, std::string_view()));
  ZINF_ASSIGN_OR_RETURN(out.micro_batch, count_setting(root, "train_micro_batch_size_per_gpu", true, 1));
  ZINF_ASSIGN_OR_RETURN(out.grad_accumulation, count_setting(root, "gradient_accumulation_steps", true, 1));
  ZINF_ASSIGN_OR_RETURN(out.train_batch, count_setting(root, "train_batch_size", true, 1));
  ZINF_ASSIGN_OR_RETURN(out.gradient_clipping, number_setting(root, "gradient_clipping", 0.0));
  ZINF_ASSIGN_OR_RETURN(out.fp16, enabled_setting(root, "fp16", kFp16Keys, out));
  // bf16, or DeepSpeed's legacy name for it, "bfloat16" (runtime/constants.py BFLOAT16_OLD).
  const std::string_view bf16 = written_name(root, "", "bf16");
  ZINF_ASSIGN_OR_RETURN(out.bf16, enabled_setting(root, bf16, kBf16Keys, out));
  if (out.fp16.value.value_or(false) && out.bf16.value.value_or(false)) {
    return Status::invalid_argument(fmt::format(
        "{}.enabled: fp16 and {} are both enabled; DeepSpeed allows one of them", root.field_path(bf16), bf16));
  }
  ZINF_RETURN_IF_ERROR(parse_zero(root, out));
  ZINF_RETURN_IF_ERROR(parse_optimizer(root, out));
  ZINF_RETURN_IF_ERROR(parse_activation_checkpointing(root, out));
  ZINF_RETURN_IF_ERROR(parse_aio(root, out));
  return out;
}

Result<DeepSpeedConfig> load_deepspeed_config(const std::string& path) {
  ZINF_ASSIGN_OR_RETURN(const json document, read_json_file(path));
  Result<DeepSpeedConfig> config = parse_deepspeed_config(document, "ds_config");
  if (!config.is_ok()) return config.status().with_context(path);
  return config;
}

}  // namespace zinf::spec
