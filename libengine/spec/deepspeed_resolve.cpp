// resolve_deepspeed and zero_config_from_deepspeed (declared in deepspeed_config.h): "auto" filled
// in as the Hugging Face integration does (transformers' integrations/deepspeed.py,
// HfTrainerDeepSpeedConfig.trainer_config_process/_finalize), the batch sizes completed and checked
// as DeepSpeed's _set_batch_related_parameters does, and the engine's ZeroConfig built from it.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "libengine/spec/deepspeed_config.h"

namespace zinf::spec {
namespace {

// DeepSpeed's defaults for the budgets (deepspeed/runtime/zero/config.py).
constexpr std::int64_t kDefaultMaxLive = 1'000'000'000;
constexpr std::int64_t kDefaultPrefetch = 50'000'000;
constexpr std::int64_t kDefaultPersistence = 100'000;
constexpr std::int64_t kDefaultSubGroup = 1'000'000'000;
constexpr std::int64_t kDefaultReduceBucket = 500'000'000;
// GRADIENT_CLIPPING_DEFAULT in DeepSpeed 0.19.8's runtime/constants.py (the pinned version,
// scripts/requirements-peers.txt): an absent gradient_clipping clips at 1.0. It was 0.0 (no
// clipping) in older releases, e.g. at commit 38327e07 which deepspeed_keys.cpp cites.
constexpr double kDefaultGradientClipping = 1.0;

std::string key_path(const std::string& root, std::string_view key) { return fmt::format("{}.{}", root, key); }

// One setting: the config's value, or for "auto" the source's (recorded), or for an absent key
// `absent` (DeepSpeed's default).
template <typename T>
T pick(const DsSetting<T>& setting, T from_source, T absent, std::string_view key, const std::string& from,
       std::vector<DsResolution>& resolutions) {
  if (setting.value) return *setting.value;
  if (setting.is_auto) {
    resolutions.push_back({std::string(key), fmt::format("{}", from_source), from});
    return from_source;
  }
  return absent;
}

Status resolve_batches(const DeepSpeedConfig& c, const DsAutoSources& s, const std::string& root,
                       ResolvedDeepSpeed& out) {
  const std::int64_t world = s.world_size;
  // HF's mismatch check: a value in the config must agree with the one the trainer was given.
  if (c.micro_batch.value && s.micro_batch && *c.micro_batch.value != *s.micro_batch) {
    return Status::invalid_argument(fmt::format("{}: {} but the {} is {}; make them agree or write \"auto\"",
                                                key_path(root, "train_micro_batch_size_per_gpu"), *c.micro_batch.value,
                                                s.micro_batch_name, *s.micro_batch));
  }
  const std::int64_t source_micro = s.micro_batch.value_or(s.default_micro_batch);
  std::optional<std::int64_t> micro = c.micro_batch.value;
  std::optional<std::int64_t> accum = c.grad_accumulation.value;
  std::optional<std::int64_t> train = c.train_batch.value;
  // Where each factor came from when not from the config, for the message of a failed check.
  std::string micro_from, accum_from;
  if (c.micro_batch.is_auto) {
    micro = source_micro;
    micro_from = s.micro_batch_name;
    out.resolutions.push_back({"train_micro_batch_size_per_gpu", std::to_string(source_micro), s.micro_batch_name});
  } else if (!micro && s.micro_batch) {
    // Not in the config: the trainer's per-device batch is what runs (HF passes
    // per_device_train_batch_size), so a train_batch_size in the config is checked against it.
    micro = *s.micro_batch;
    micro_from = s.micro_batch_name;
  }
  if (c.grad_accumulation.is_auto) {
    accum = s.grad_accumulation.value_or(1);
    accum_from = s.grad_accumulation ? s.grad_accumulation_name : "gradient accumulation (zinf steps once per batch)";
    out.resolutions.push_back({"gradient_accumulation_steps", std::to_string(*accum), accum_from});
  } else if (!accum && s.grad_accumulation) {
    accum = *s.grad_accumulation;
    accum_from = s.grad_accumulation_name;
  }
  if (c.train_batch.is_auto) {
    train = world * micro.value_or(source_micro) * accum.value_or(1);
    out.resolutions.push_back(
        {"train_batch_size", std::to_string(*train), fmt::format("world size {} x micro-batch x accumulation", world)});
  }
  // DeepSpeed's completion rules when one or two of the three are given.
  if (train && micro && !accum) accum = *train / (*micro * world);
  if (train && accum && !micro) micro = *train / (*accum * world);
  if (train && !micro && !accum) {
    accum = 1;
    micro = *train / world;
  }
  if (!train && !micro) micro = source_micro;
  if (!accum) accum = 1;
  if (!train) train = *micro * *accum * world;
  if (*micro < 1 || *accum < 1 || *train != *micro * *accum * world) {
    const std::int64_t would_work = std::max<std::int64_t>(*micro, 1) * std::max<std::int64_t>(*accum, 1) * world;
    const auto from = [](const std::string& source) { return source.empty() ? "" : " (" + source + ")"; };
    return Status::invalid_argument(
        fmt::format("{}: {} is not train_micro_batch_size_per_gpu {}{} x gradient_accumulation_steps {}{} x world "
                    "size {}; DeepSpeed requires them equal: use {}{}",
                    key_path(root, "train_batch_size"), *train, *micro, from(micro_from), *accum, from(accum_from),
                    world, would_work, micro_from.empty() && accum_from.empty() ? "" : " or \"auto\""));
  }
  out.micro_batch = *micro;
  out.grad_accumulation = *accum;
  out.train_batch = *train;
  return Status::ok();
}

std::string enabled_text(const DsSetting<bool>& setting) {
  if (setting.is_auto) return "\"auto\"";
  if (setting.value) return *setting.value ? "true" : "false";
  return "not given";
}

Status resolve_precision(const DeepSpeedConfig& c, const DsAutoSources& s, const std::string& root,
                         ResolvedDeepSpeed& out) {
  const std::string fp16_key = c.key("fp16.enabled");
  const std::string bf16_key = c.key("bf16.enabled");
  const bool silent = !c.fp16.value && !c.fp16.is_auto && !c.bf16.value && !c.bf16.is_auto;
  if (silent) {
    // A config without fp16/bf16 leaves the precision to the caller; DeepSpeed's own default is fp32.
    out.precision = s.precision.value_or(DType::kF32);
    return Status::ok();
  }
  const bool fp16_on = c.fp16.value.value_or(false);
  const bool bf16_on = c.bf16.value.value_or(false);
  bool fp16 = fp16_on;
  bool bf16 = bf16_on;
  std::string from;
  if (s.precision) {
    // The Hugging Face integration: "auto" takes the trainer's --fp16 / --bf16.
    if (c.fp16.is_auto) fp16 = *s.precision == DType::kF16;
    if (c.bf16.is_auto) bf16 = *s.precision == DType::kBF16;
    from = s.precision_name;
  } else if (!fp16_on && !bf16_on && (c.fp16.is_auto || c.bf16.is_auto)) {
    // No precision given and none enabled outright: a config with a half-precision section on
    // "auto" asks for mixed precision, the way its trainer is meant to run it. zinf picks bf16
    // when bf16 is "auto" (no loss scaling to tune), else fp16 (README "Coming from DeepSpeed").
    // Both sections written false (no "auto") is fp32, as DeepSpeed reads it.
    if (c.bf16.is_auto) {
      bf16 = true;
    } else {
      fp16 = true;
    }
    from = "no precision given: bf16 when bf16 is \"auto\", else fp16 (zinf's rule)";
  } else if (!fp16_on && !bf16_on) {
    from = fmt::format("{} and {} are false", fp16_key, bf16_key);
  } else {
    from = fmt::format("{} is true", fp16_on ? fp16_key : bf16_key);
  }
  if (c.fp16.is_auto) out.resolutions.push_back({fp16_key, fp16 ? "true" : "false", from});
  if (c.bf16.is_auto) out.resolutions.push_back({bf16_key, bf16 ? "true" : "false", from});
  const auto contradiction = [&](const std::string& key, DType config) {
    return Status::invalid_argument(
        fmt::format("{}: the config trains in {} ({} {}, {} {}) but the {} is {}; make them agree or write \"auto\"",
                    key_path(root, key), dtype_name(config), fp16_key, enabled_text(c.fp16), bf16_key,
                    enabled_text(c.bf16), s.precision_name, dtype_name(*s.precision)));
  };
  // An explicit true the caller contradicts (before "both enabled": the caller's precision may
  // have turned the other section's "auto" on).
  if (s.precision && fp16_on && *s.precision != DType::kF16) return contradiction(fp16_key, DType::kF16);
  if (s.precision && bf16_on && *s.precision != DType::kBF16) return contradiction(bf16_key, DType::kBF16);
  if (fp16 && bf16) {
    return Status::invalid_argument(
        fmt::format("{}: fp16 and bf16 are both enabled; DeepSpeed allows one of them", key_path(root, bf16_key)));
  }
  out.precision = fp16 ? DType::kF16 : bf16 ? DType::kBF16 : DType::kF32;
  if (s.precision && *s.precision != out.precision) {
    // Nothing enabled outright: the section of the caller's precision is the key to change.
    return contradiction(*s.precision == DType::kF16 ? fp16_key : bf16_key, out.precision);
  }
  return Status::ok();
}

}  // namespace

Result<ResolvedDeepSpeed> resolve_deepspeed(const DeepSpeedConfig& config, const DsAutoSources& sources,
                                            const std::string& root) {
  ResolvedDeepSpeed out;
  out.config = config;
  ZINF_RETURN_IF_ERROR(resolve_batches(config, sources, root, out));
  ZINF_RETURN_IF_ERROR(resolve_precision(config, sources, root, out));
  auto& r = out.resolutions;
  const std::string optimizer = sources.optimizer_name;
  out.lr = pick(config.lr, sources.lr, sources.lr, "optimizer.params.lr", optimizer + " lr", r);
  const std::array<double, 2> source_betas{sources.beta1, sources.beta2};
  const std::array<double, 2> betas = config.betas.value.value_or(source_betas);
  if (config.betas.is_auto) {
    r.push_back(
        {"optimizer.params.betas", fmt::format("[{}, {}]", sources.beta1, sources.beta2), optimizer + " betas"});
  }
  out.beta1 = betas[0];
  out.beta2 = betas[1];
  out.eps = pick(config.eps, sources.eps, sources.eps, "optimizer.params.eps", optimizer + " eps", r);
  out.weight_decay = pick(config.weight_decay, sources.weight_decay, sources.weight_decay,
                          "optimizer.params.weight_decay", optimizer + " weight decay", r);
  out.gradient_clipping = pick(config.gradient_clipping, sources.max_grad_norm, kDefaultGradientClipping,
                               "gradient_clipping", sources.grad_clip_name, r);

  const std::int64_t hidden = sources.hidden;
  out.reduce_bucket_size = pick(config.reduce_bucket_size, hidden * hidden, kDefaultReduceBucket,
                                "zero_optimization.reduce_bucket_size", fmt::format("hidden_size^2 ({}^2)", hidden), r);
  // int(0.9 * hidden^2), computed as the integer it is.
  const std::int64_t prefetch_auto = hidden * hidden * 9 / 10;
  out.prefetch_bucket_size = pick(config.prefetch_bucket_size, prefetch_auto, kDefaultPrefetch,
                                  config.key("zero_optimization.stage3_prefetch_bucket_size"),
                                  fmt::format("0.9 x hidden_size^2 (0.9 x {}^2)", hidden), r);
  out.persistence_threshold = pick(config.persistence_threshold, 10 * hidden, kDefaultPersistence,
                                   config.key("zero_optimization.stage3_param_persistence_threshold"),
                                   fmt::format("10 x hidden_size (10 x {})", hidden), r);
  out.max_live_parameters = config.max_live_parameters.value.value_or(kDefaultMaxLive);
  out.sub_group_size = config.sub_group_size.value.value_or(kDefaultSubGroup);
  return out;
}

Result<ZeroConfig> zero_config_from_deepspeed(const ResolvedDeepSpeed& resolved, std::size_t bytes_per_param,
                                              std::uint64_t model_params, const std::string& root) {
  const DeepSpeedConfig& c = resolved.config;
  (void)root;
  ZeroConfig zero;
  // partition_activations + cpu_checkpointing: checkpoints in (pinned) CPU memory, as zinf's
  // zero.activations "cpu" keeps them.
  zero.activations = resolved.activations_tier() == Tier::kCpu ? Tier::kCpu : Tier::kDevice;
  zero.stage = c.stage;
  zero.params = resolved.params_tier();
  zero.optimizer = resolved.optimizer_tier();
  zero.grads = resolved.grads_tier();
  for (const DsOffload* offload : {&c.offload_param, &c.offload_optimizer}) {
    if (offload->device != Tier::kNvme) continue;
    if (std::find(zero.nvme_paths.begin(), zero.nvme_paths.end(), offload->nvme_path) == zero.nvme_paths.end()) {
      zero.nvme_paths.push_back(offload->nvme_path);
    }
  }
  // DeepSpeed's budgets are upper bounds in elements; zinf's are byte budgets the engine reserves,
  // so a bound above the whole model is the whole model.
  const auto bytes_of = [&](std::int64_t elements) {
    return std::min<std::uint64_t>(static_cast<std::uint64_t>(elements), model_params) * bytes_per_param;
  };
  if (c.stage == 3) {
    zero.max_live_bytes = bytes_of(resolved.max_live_parameters);
    zero.persistence_threshold = resolved.persistence_threshold;
    // The host staging for parameters read from NVMe is DeepSpeed's pinned parameter buffers.
    if (zero.params == Tier::kNvme)
      zero.prefetch_bytes = bytes_of(c.offload_param.buffer_count * c.offload_param.buffer_size);
  }
  // A sub-group size below the model caps zinf's sub-groups (an offloaded optimizer); DeepSpeed's
  // default 1e9 and anything at least the model leave them derived.
  if (zero.optimizer != Tier::kDevice && c.sub_group_size.value &&
      static_cast<std::uint64_t>(*c.sub_group_size.value) < model_params) {
    zero.sub_group_size = *c.sub_group_size.value;
  }
  return zero;
}

}  // namespace zinf::spec
