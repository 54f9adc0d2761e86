// DeepSpeedConfig: a DeepSpeed ds_config.json as zinf reads it — the ZeRO stage, offload_param /
// offload_optimizer, aio, the three batch sizes, fp16/bf16 with loss scaling, the optimizer,
// gradient clipping, activation checkpointing and the stage-3 budgets — and its resolution:
// "auto" values filled in the way the Hugging Face integration fills them (from the model and the
// training settings), every other value checked the way DeepSpeed checks it.
//
// Pure data plus a strict parser. It knows nothing of hardware: whether a config is *right* for
// a machine is the planner's question (planner/deepspeed_plan.h). Keys are sorted three ways:
// used (mapped onto zinf's settings), unused (known, no effect in zinf: listed once in
// `unused_keys`), and keys zinf cannot honour (an error naming the key). Within the sections zinf
// reads, an unknown key is an error with the closest known key, as DeepSpeed's own validation does.
// Every other name DeepSpeed's config classes accept for a key (pydantic aliases, deprecated and
// legacy names: deepspeed_key_aliases()) is read as the key it names, and errors name the key as
// the file wrote it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/core/dtype.h"
#include "libengine/core/status.h"
#include "libengine/spec/state_placement.h"
#include "libengine/spec/zero_config.h"

namespace zinf::spec {

// A setting that may be given as a value, as "auto", or not at all.
template <typename T>
struct DsSetting {
  std::optional<T> value;
  bool is_auto = false;
  bool operator==(const DsSetting&) const = default;
};

struct DsOffload {
  Tier device = Tier::kDevice;  // "none" -> kDevice, "cpu", "nvme"
  std::string nvme_path;        // required for nvme
  bool pin_memory = false;
  std::int64_t buffer_count = 0;  // DeepSpeed's defaults: 5 for parameters, 4 for the optimizer
  std::int64_t buffer_size = 0;   // parameters only, elements per buffer; default 1e8
  std::int64_t max_in_cpu = 0;    // parameters only, elements kept in CPU memory; default 1e9
  bool operator==(const DsOffload&) const = default;
};

struct DsAio {
  std::int64_t block_size_bytes = 1048576;  // DeepSpeed's defaults
  std::int64_t queue_depth = 8;
  std::int64_t thread_count = 1;  // "intra_op_parallelism" (DeepSpeed 0.19.8 ignores the older "thread_count")
  bool operator==(const DsAio&) const = default;
};

// One more name DeepSpeed accepts for a key, from its config classes at kDeepSpeedSourceCommit
// (github.com/microsoft/DeepSpeed): deepspeed/runtime/zero/config.py (pydantic Field(alias=...),
// populate_by_name, and json_schema_extra deprecated/new_param), runtime/config.py and
// runtime/constants.py (BFLOAT16_OLD, the boolean zero_optimization of
// read_zero_config_deprecated). runtime/zero/offload_config.py declares no alias; DeepSpeed at
// this commit has no runtime/precision_config.py (fp16/bf16 are read by runtime/config.py).
struct DsKeyAlias {
  std::string_view section;    // "" for the top level, else "zero_optimization"
  std::string_view name;       // the other name, as a config writes it: "max_live_parameters"
  std::string_view canonical;  // the key zinf documents it as: "stage3_max_live_parameters"
  std::string_view kind;       // "alias" (both names are the same field), "deprecated", "legacy"
  std::string_view effect;     // what zinf does with it, for the table in docs/deepspeed.md
};
inline constexpr std::string_view kDeepSpeedSourceCommit = "38327e07f6cd39b63418f60cedd1651b0be3e7c3";
// The whole table, in a fixed order. Static storage; thread-safe.
const std::vector<DsKeyAlias>& deepspeed_key_aliases();

struct DeepSpeedConfig {
  int stage = 0;  // zero_optimization.stage; 0 without the section
  DsOffload offload_param;
  DsOffload offload_optimizer;
  DsAio aio;
  DsSetting<std::int64_t> micro_batch;  // train_micro_batch_size_per_gpu
  DsSetting<std::int64_t> grad_accumulation;
  DsSetting<std::int64_t> train_batch;
  DsSetting<bool> fp16;
  DsSetting<bool> bf16;
  double loss_scale = 0;  // fp16.loss_scale: 0 = dynamic
  std::int64_t initial_scale_power = 16;
  std::int64_t loss_scale_window = 1000;
  std::optional<std::string> optimizer_type;  // as written: "Adam", "AdamW", ...
  bool adam_w_mode = true;                    // DeepSpeed's "Adam" is AdamW unless adam_w_mode is false
  DsSetting<double> lr;
  DsSetting<std::array<double, 2>> betas;
  DsSetting<double> eps;
  DsSetting<double> weight_decay;
  DsSetting<double> gradient_clipping;
  bool partition_activations = false;
  bool cpu_checkpointing = false;
  std::optional<std::int64_t> number_checkpoints;
  // zero_optimization budgets, in elements (DeepSpeed counts parameters, not bytes).
  DsSetting<std::int64_t> max_live_parameters;    // stage3_max_live_parameters, default 1e9
  DsSetting<std::int64_t> prefetch_bucket_size;   // stage3_prefetch_bucket_size, default 5e7
  DsSetting<std::int64_t> persistence_threshold;  // stage3_param_persistence_threshold, default 1e5
  DsSetting<std::int64_t> sub_group_size;         // default 1e9
  DsSetting<std::int64_t> reduce_bucket_size;     // default 5e8
  std::vector<std::string> unused_keys;           // dotted paths, in file order
  // Keys the file wrote under another name (deepspeed_key_aliases): canonical dotted path
  // ("zero_optimization.stage3_max_live_parameters") -> as written ("zero_optimization.max_live_parameters").
  std::vector<std::pair<std::string, std::string>> written_as;

  // A key as the file wrote it (its alias when it used one), for messages; `canonical` unchanged
  // when the file used that name or did not write the key.
  std::string key(std::string_view canonical) const;
};

// Parses a ds_config document. `source` names it in errors ("ds_config.json"); fields are named
// "<root>.zero_optimization.offload_param.nvme_path" with `root` as given. Every error is
// InvalidArgument, one line naming the key, the value found and what is allowed.
Result<DeepSpeedConfig> parse_deepspeed_config(const nlohmann::json& document, const std::string& root);
// Reads (read_json_file: bounded, regular files only) and parses a file; errors are
// "<path>: ds_config.<key>: ...".
Result<DeepSpeedConfig> load_deepspeed_config(const std::string& path);

// What "auto" is resolved from, as the Hugging Face Trainer does: its TrainingArguments are here
// the planner's flags or the scenario's fields. Defaults are TrainingArguments' defaults.
struct DsAutoSources {
  std::int64_t hidden = 0;                  // model hidden size (reduce/prefetch buckets, persistence threshold)
  std::int64_t world_size = 1;              // data-parallel ranks
  std::optional<std::int64_t> micro_batch;  // per_device_train_batch_size, when the caller sets it
  std::int64_t default_micro_batch = 8;     // TrainingArguments' per_device_train_batch_size
  // The caller's gradient accumulation (HF: gradient_accumulation_steps), when it has one: it
  // fills an "auto" or absent gradient_accumulation_steps. nullopt: DeepSpeed completes it.
  std::optional<std::int64_t> grad_accumulation;
  // The caller's precision, when given: "auto" fp16/bf16 take it, and a config that trains in
  // another precision is an error naming both. nullopt: "auto" enables bf16 when bf16 is "auto",
  // else fp16 (the config offers mixed precision; see README "Coming from DeepSpeed"), and a
  // config without fp16/bf16 trains in fp32, as DeepSpeed.
  std::optional<DType> precision;
  double lr = 5e-5;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double max_grad_norm = 1.0;
  // How the caller names each source in messages and in the "auto" table.
  std::string micro_batch_name = "micro-batch";
  std::string grad_accumulation_name = "gradient accumulation";
  std::string precision_name = "precision";
  std::string optimizer_name = "optimizer";
  std::string grad_clip_name = "gradient clipping";
};

// One "auto" resolved: the key, the value it took and where that came from.
struct DsResolution {
  std::string key;    // "zero_optimization.reduce_bucket_size"
  std::string value;  // "1048576"
  std::string from;   // "hidden_size^2 (1024^2)"
};

// Every setting with a value: DeepSpeed's defaults for what was not given, "auto" resolved.
struct ResolvedDeepSpeed {
  DeepSpeedConfig config;  // the parsed config; its DsSettings all carry values after resolution
  std::int64_t micro_batch = 1;
  std::int64_t grad_accumulation = 1;
  std::int64_t train_batch = 1;
  DType precision = DType::kF32;
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, gradient_clipping = 0;
  std::int64_t max_live_parameters = 0, prefetch_bucket_size = 0, persistence_threshold = 0, sub_group_size = 0,
               reduce_bucket_size = 0;
  std::vector<DsResolution> resolutions;

  Tier params_tier() const { return config.offload_param.device; }
  Tier optimizer_tier() const { return config.offload_optimizer.device; }
  // Gradients live where the optimizer steps: on the CPU when the optimizer is offloaded.
  Tier grads_tier() const { return optimizer_tier() == Tier::kDevice ? Tier::kDevice : Tier::kCpu; }
  // Checkpoints go to the CPU only when DeepSpeed would move them: partitioned and cpu_checkpointing.
  Tier activations_tier() const {
    return config.partition_activations && config.cpu_checkpointing ? Tier::kCpu : Tier::kDevice;
  }
};

// Resolves "auto" and checks what DeepSpeed checks: train_batch_size = micro-batch x accumulation
// x world size, fp16 and bf16 not both on. Errors name "<root>.<key>".
Result<ResolvedDeepSpeed> resolve_deepspeed(const DeepSpeedConfig& config, const DsAutoSources& sources,
                                            const std::string& root);

// The engine settings a resolved config asks for: stage, tiers, NVMe paths (both offload paths,
// once each), and the stage-3 budgets turned into bytes at `bytes_per_param` (the compute
// precision's size, at most the whole model of `model_params`: DeepSpeed's bounds are in elements
// and may exceed the model, zinf's are byte budgets the engine reserves). Refuses what zinf's
// engine cannot do (activation checkpoints in CPU memory), naming the DeepSpeed key.
Result<ZeroConfig> zero_config_from_deepspeed(const ResolvedDeepSpeed& resolved, std::size_t bytes_per_param,
                                              std::uint64_t model_params, const std::string& root);

}  // namespace zinf::spec
