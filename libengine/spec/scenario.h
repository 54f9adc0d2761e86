// Scenario: what `zinf train scenario.json` runs — the model, the data, batch and sequence length,
// steps, precision, optimizer and schedule, loss scaling, seed, device and its memory budget,
// evaluation, checkpoints and outputs — parsed from JSON and validated up front, so a bad file fails
// in milliseconds with one line naming the field ("scenario.model.heads: 7 does not divide
// model.hidden 1024") instead of minutes into a run. The schema is documented in scenarios/README.md.
//
// This is pure data: it builds nothing (no model, no data source, no device) and does not check
// whether CUDA is present or a token file exists; the caller does that. A model given as a parameter
// count is turned into a shape by a ShapeResolver the caller supplies (the CLI passes the planner's
// shape rule; spec may not depend on the planner).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "libengine/core/dtype.h"
#include "libengine/core/status.h"
#include "libengine/device/device_kind.h"
#include "libengine/optim/lr_schedule_kind.h"
#include "libengine/spec/model_shape.h"
#include "libengine/spec/operator_tiling.h"
#include "libengine/spec/zero_config.h"

namespace zinf::spec {

inline constexpr std::int64_t kScenarioDefaultVocab = 50257;  // GPT-2's tokenizer

// The range of a scenario field that a command-line flag can also set. The parser and the flags
// (`zinf train --steps/--threads/--stop-after`) check against these same constants, so a value is
// never refused in the file and clamped on the command line, or the other way round.
struct IntRange {
  std::int64_t min;
  std::int64_t max;
};
inline constexpr IntRange kStepsRange{1, std::int64_t{1} << 40};  // steps, and a step to stop after
inline constexpr IntRange kThreadsRange{0, 4096};                 // threads; 0 = one per available core
inline constexpr std::int64_t kScenarioDefaultBatch = 8;
inline constexpr std::int64_t kScenarioDefaultSeq = 64;

enum class DataSource { kMarkov, kFile };
enum class OptimizerType { kAdamW, kAdam };  // AdamW: decoupled weight decay; Adam: L2 added to the gradient

std::string_view data_source_name(DataSource source);      // "markov", "file"
std::string_view optimizer_type_name(OptimizerType type);  // "adamw", "adam"

// Where the training tokens come from. The Markov fields mean what train::MarkovSpec's do (its
// vocabulary is model.vocab); `path` is used only for the file source.
struct ScenarioData {
  DataSource source = DataSource::kMarkov;
  std::uint32_t successors = 8;  // markov: K, next-token choices per state, 1 .. min(64, vocab)
  double skew = 0.0;             // markov: row concentration, 0 (uniform over K) .. 16
  std::uint64_t chain_seed =
      0;             // markov: picks the chain and the stream; parse fills in the top-level seed when absent
  std::string path;  // file: flat uint16 tokens or llm.c's format, relative to the working directory
  bool operator==(const ScenarioData&) const = default;
};

// Learning rate over the run: linear warm-up from 0 to lr over warmup_steps, then constant, or a
// cosine/linear decay to lr·min_lr_ratio at the last step.
struct LrScheduleConfig {
  optim::LrScheduleKind kind = optim::LrScheduleKind::kConstant;
  std::int64_t warmup_steps = 0;  // 0 .. steps
  double min_lr_ratio = 0.1;      // 0 .. 1; unused by kConstant
  bool operator==(const LrScheduleConfig&) const = default;
};

struct OptimizerConfig {
  OptimizerType type = OptimizerType::kAdamW;
  double lr = 3e-4;           // peak learning rate, > 0
  double beta1 = 0.9;         // [0, 1)
  double beta2 = 0.95;        // [0, 1)
  double eps = 1e-8;          // > 0
  double weight_decay = 0.1;  // >= 0; the parser's default is 0.1 for adamw and 0 for adam
  double grad_clip = 1.0;     // max global gradient L2 norm, >= 0; 0 = no clipping
  LrScheduleConfig schedule;
  bool operator==(const OptimizerConfig&) const = default;
};

// Dynamic loss scaling; used only with fp16 (the parser refuses a loss_scale section otherwise).
struct LossScaleConfig {
  double initial = 65536.0;             // > 0
  std::int64_t growth_interval = 2000;  // overflow-free steps before the scale doubles, >= 1
  bool operator==(const LossScaleConfig&) const = default;
};

struct EvalConfig {
  std::int64_t every = 0;    // evaluate on held-out batches after every N-th step; 0 = never
  std::int64_t batches = 4;  // held-out batches per evaluation, >= 1
  bool operator==(const EvalConfig&) const = default;
};

struct CheckpointConfig {
  std::string dir;             // empty = no checkpoints
  std::int64_t every = 100;    // save after every N-th step (and after the last), >= 1
  std::int64_t keep_last = 2;  // older checkpoints are deleted, >= 1
  bool resume = true;          // continue from the latest checkpoint in dir when its fingerprint matches
  bool strict = false;         // a newest checkpoint that does not verify is an error, not a fallback
  bool operator==(const CheckpointConfig&) const = default;
};

// Starting weights: "init": {"safetensors": "DIR or file"} — Hugging Face safetensors loaded into the
// states before the first step of a run that does not resume (train/weights_source.h). Not part of the
// fingerprint: a resumed run's states come from its checkpoint whatever the file holds now.
struct InitConfig {
  std::string safetensors;  // empty = the seed's initialisation
  bool operator==(const InitConfig&) const = default;
};

struct OutputConfig {
  std::string record;           // run record JSON path; empty = none
  std::int64_t log_every = 10;  // a progress line every N steps, >= 1
  bool operator==(const OutputConfig&) const = default;
};

// A parsed, validated scenario with every default filled in.
struct Scenario {
  std::string name;                               // default: the source's file stem
  ModelShape shape;                               // resolved: explicit, or from params via the ShapeResolver
  std::optional<std::uint64_t> params_requested;  // set when the model was given as "params"
  ScenarioData data;
  std::int64_t batch = kScenarioDefaultBatch;  // micro-batch B
  std::int64_t seq = kScenarioDefaultSeq;      // T, <= shape.max_positions
  std::int64_t steps = 0;                      // required
  DType precision = DType::kF32;
  OptimizerConfig optimizer;
  LossScaleConfig loss_scale;
  std::uint64_t seed = 0;
  device::DeviceKind device = device::DeviceKind::kCpu;
  std::optional<std::uint64_t> device_memory_bytes;  // budget of the device tier; nullopt = no budget
  std::int64_t threads = 0;                          // compute threads; 0 = all cores
  bool activation_checkpointing = false;
  std::int64_t tiling = 1;   // memory-centric tiling factor; divides shape.ffn_hidden (1 with "auto")
  bool tiling_auto = false;  // "tiling": "auto": operator_tiling chosen per operator (spec/operator_tiling.h)
  // The tiles of each operator the model is built with: `tiling` for the MLP linears and the
  // untied head, or auto's choice.
  OperatorTiling operator_tiling;
  ZeroConfig zero;  // the engine: ZeRO stage and where each kind of state lives ("zero" section,
                    // or built from the DeepSpeed config named by "deepspeed")
  EvalConfig eval;
  CheckpointConfig checkpoint;
  InitConfig init;
  OutputConfig output;
  // Lines for the user that do not stop the run (keys of a DeepSpeed config zinf does not use).
  // Not part of equality or to_json: they describe the input, not the run.
  std::vector<std::string> warnings;
  // When "deepspeed" built the zero section: "scenario.deepspeed: <path>", and for each zero field
  // set from a DeepSpeed key, that key as the file wrote it ({"zero.max_live_bytes",
  // "ds_config.zero_optimization.max_live_parameters"}), so that errors about the engine name
  // what the user wrote (name_deepspeed_keys in spec/scenario_deepspeed.h). Not part of equality
  // or to_json, like warnings.
  std::string deepspeed_context;
  std::vector<std::pair<std::string, std::string>> deepspeed_keys;
};

// Field-by-field equality, every ModelShape field included.
bool operator==(const Scenario& a, const Scenario& b);

// Turns {"params": N} into a shape: (target parameter count, vocab, seq) -> shape with
// max_positions >= seq. Its errors name the field "scenario.model.params" themselves (the CLI's
// resolver, scenario_shape_resolver(), asks the planner's shape rule to); they are returned as they are.
using ShapeResolver = std::function<Result<ModelShape>(std::uint64_t params, std::int64_t vocab, std::int64_t seq)>;

// Parses and validates a scenario document. `source_name` is the file it came from (its stem is the
// default name). Every error is InvalidArgument with ONE line naming the full field path
// ("scenario.optimizer.lr"), the value found and what is allowed. `resolve` is called only for a
// model given as "params" and may be empty otherwise.
Result<Scenario> parse_scenario(const nlohmann::json& json, std::string_view source_name, const ShapeResolver& resolve);

// Reads `path` and parses it. A missing/unreadable file or malformed JSON names the path
// (NotFound/IoError/InvalidArgument); field errors are parse_scenario's.
Result<Scenario> load_scenario(const std::string& path, const ShapeResolver& resolve);

// The fully resolved scenario: every field with its value, defaults included (echoed in the run
// record). A model given as params is written as {"params": N, "vocab": V}, so that
// parse_scenario(to_json(s), …, the same resolver) == s; loss_scale is written for fp16 only,
// checkpoint only when it has a dir, device_memory only when set.
nlohmann::json to_json(const Scenario& scenario);

// Device bytes the smallest unit of work needs: one transformer layer's model states that live on
// the device (params + grads + fp32 master + Adam m, v: 16 B/param in every precision when all are
// there; only the kinds zero places on the device otherwise) plus one block's activations and
// backward scratch for B×T tokens as the model carves them (spec/sizing/activation_layout.h: every
// decoder option, fp32 on the CPU backend, the storage precision on a GPU; GPT-2's shape: 24·C
// values, 4 norm statistics and NH log-sum-exps per token). parse_scenario refuses a device_memory
// below this. Precondition: `scenario` came from parse_scenario (validated shape).
struct OneLayerDeviceBytes {
  std::uint64_t model_states = 0;
  std::uint64_t activations = 0;
  // Saturates at 2^64 - 1 (absurd shapes must not wrap around to "fits").
  std::uint64_t total() const {
    return model_states > std::numeric_limits<std::uint64_t>::max() - activations
               ? std::numeric_limits<std::uint64_t>::max()
               : model_states + activations;
  }
};
OneLayerDeviceBytes one_layer_device_bytes_breakdown(const Scenario& scenario);
std::uint64_t one_layer_device_bytes(const Scenario& scenario);

// A stable hash (16 hex digits) of what must match for a checkpoint to be resumed: the resolved
// model shape, data, batch, seq, precision, optimizer (schedule included), loss_scale (fp16 only)
// and seed. Not steps, output, checkpoint, threads, eval, device, device_memory, tiling,
// activation_checkpointing, zero (stage and placement) or name: changing those keeps a checkpoint
// usable (every state owner writes the same arrays).
std::string fingerprint(const Scenario& scenario);

}  // namespace zinf::spec
