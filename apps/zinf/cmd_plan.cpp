// `zinf plan`: the capacity planner from the command line. Options struct + setup (flags into a
// validated PlanInput, every error naming its flag) + run (one plan, --max-params, or a sweep).
// Rendering for people lives in plan_view.cpp.
#include <algorithm>
#include <charconv>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "apps/zinf/exit_codes.h"
#include "apps/zinf/output.h"
#include "apps/zinf/plan_deepspeed.h"
#include "apps/zinf/plan_flags.h"
#include "apps/zinf/plan_view.h"
#include "apps/zinf/subcommand.h"
#include "libengine/core/split.h"
#include "libengine/core/units.h"
#include "libengine/spec/hf_config.h"
#include "planner/max_params.h"
#include "planner/planner.h"
#include "planner/scenario_plan.h"
#include "planner/shape_rule.h"
#include "planner/sweep.h"

namespace zinf::cli {
namespace {

using planner::HardwareProfile;
using planner::PlanInput;

constexpr std::string_view kDefaultHardware = "dgx-h100";

// A flag that overrides one field of the hardware profile.
struct HardwareOverride {
  std::string flag;
  std::string help;
  std::string type_name;  // how --help shows the value: N, SIZE, BW, FLOPS
  // `mode`: the plan's math mode, the table entry a FLOP/s override sets.
  std::function<Status(HardwareProfile&, const std::string& text, const std::string& flag, planner::MathMode mode)>
      apply;
};

// Each override is checked against the same planner::FigureRange a profile's field is, so a flag
// cannot set a value a profile file could not.
template <typename Field>
HardwareOverride bytes_override(std::string flag, std::string help, Field field, planner::FigureRange range,
                                ZeroIs zero = ZeroIs::kRejected) {
  return {std::move(flag), std::move(help), "SIZE",
          [field, range, zero](HardwareProfile& hw, const std::string& text, const std::string& f, planner::MathMode) {
            ZINF_ASSIGN_OR_RETURN(const std::uint64_t value, parse_bytes(text, f, zero));
            if (value != 0) ZINF_RETURN_IF_ERROR(planner::check_figure(static_cast<double>(value), f, range));
            field(hw) = value;
            return Status::ok();
          }};
}

template <typename Field>
HardwareOverride bandwidth_override(std::string flag, std::string help, Field field) {
  return {std::move(flag), std::move(help), "BW",
          [field](HardwareProfile& hw, const std::string& text, const std::string& f, planner::MathMode) {
            ZINF_ASSIGN_OR_RETURN(const double value, parse_bandwidth(text, f));
            ZINF_RETURN_IF_ERROR(planner::check_figure(value, f, planner::kBandwidthRange));
            field(hw) = value;
            return Status::ok();
          }};
}

// Sets the table entry of the plan's math mode. A single-rate profile (one figure, the bf16/fp16
// rate) keeps its form when the mode is bf16 or fp16 (both entries change) and becomes a table otherwise.
template <typename Table>
HardwareOverride flops_override(std::string flag, std::string help, Table table) {
  return {std::move(flag), std::move(help), "FLOPS",
          [table](HardwareProfile& hw, const std::string& text, const std::string& f, planner::MathMode mode) {
            ZINF_ASSIGN_OR_RETURN(const double value, parse_flops(text, f));
            ZINF_RETURN_IF_ERROR(planner::check_figure(value, f, planner::kFlopsRange));
            const bool half = mode == planner::MathMode::kBf16 || mode == planner::MathMode::kFp16;
            if (hw.node.gpu.single_rate && half) {
              table(hw)[planner::MathMode::kBf16] = value;
              table(hw)[planner::MathMode::kFp16] = value;
            } else {
              hw.node.gpu.single_rate = false;
              table(hw)[mode] = value;
            }
            return Status::ok();
          }};
}

std::vector<HardwareOverride> hardware_overrides() {
  return {
      {"--gpus-per-node", "GPUs per node", "N",
       [](HardwareProfile& hw, const std::string& t, const std::string& f, planner::MathMode) {
         ZINF_ASSIGN_OR_RETURN(hw.node.gpus, parse_positive_int(t, f, planner::kMaxGpusPerNode));
         return Status::ok();
       }},
      bytes_override(
          "--gpu-mem", "Device memory per GPU (e.g. 80GiB)",
          [](HardwareProfile & hw) -> auto& { return hw.node.gpu.memory_bytes; }, planner::kGpuMemoryRange),
      flops_override(
          "--gpu-peak-flops", "Datasheet FLOP/s per GPU in the plan's precision, the MFU denominator (e.g. 989TFLOPS)",
          [](HardwareProfile & hw) -> auto& { return hw.node.gpu.peak_flops; }),
      flops_override(
          "--gpu-flops", "Achievable FLOP/s per GPU on large GEMMs in the plan's precision (the paper's peak_tp)",
          [](HardwareProfile & hw) -> auto& { return hw.node.gpu.achievable_flops; }),
      bandwidth_override(
          "--gpu-mem-bw", "GPU memory (HBM) bandwidth",
          [](HardwareProfile & hw) -> auto& { return hw.node.gpu.memory_bandwidth; }),
      bytes_override(
          "--cpu-mem", "CPU memory per node usable for training states",
          [](HardwareProfile & hw) -> auto& { return hw.node.cpu_memory_bytes; }, planner::kHostBytesRange),
      bandwidth_override(
          "--cpu-mem-bw", "CPU memory bandwidth per node",
          [](HardwareProfile & hw) -> auto& { return hw.node.cpu_memory_bandwidth; }),
      bytes_override(
          "--nvme", "NVMe capacity per node (0 for none)",
          [](HardwareProfile & hw) -> auto& { return hw.node.nvme_capacity_bytes; }, planner::kHostBytesRange,
          ZeroIs::kAllowed),
      bandwidth_override(
          "--nvme-read-bw", "NVMe read bandwidth per node (all drives)",
          [](HardwareProfile & hw) -> auto& { return hw.node.nvme_read_bandwidth; }),
      bandwidth_override(
          "--nvme-write-bw", "NVMe write bandwidth per node (all drives)",
          [](HardwareProfile & hw) -> auto& { return hw.node.nvme_write_bandwidth; }),
      bandwidth_override(
          "--pcie-bw", "Host<->GPU bandwidth per GPU per direction",
          [](HardwareProfile & hw) -> auto& { return hw.node.pcie_bandwidth_per_gpu; }),
      bandwidth_override(
          "--gpu-link-bw", "GPU<->GPU bandwidth per GPU inside a node (NVLink)",
          [](HardwareProfile & hw) -> auto& { return hw.node.gpu_link_bandwidth; }),
      bandwidth_override(
          "--net-bw", "Network bandwidth per node between nodes (all NICs)",
          [](HardwareProfile & hw) -> auto& { return hw.node.network_bandwidth; }),
  };
}

class PlanCommand final : public Subcommand {
 public:
  explicit PlanCommand(CLI::App& app) : overrides_(hardware_overrides()) {
    command_ = app.add_subcommand(
        "plan", "Plan training a model on a cluster: memory per tier, placement, step time, bottleneck");
    CLI::App& c = *command_;
    const auto option = [&](const std::string& name, std::string& target, const std::string& help,
                            const std::string& group, const std::string& type = "N") {
      options_[name] = c.add_option(name, target, help)->type_name(type)->group(group);
    };
    const std::string model = "Model (one of --params, --layers/--hidden/--heads, --hf-config)";
    option("--params", params_, "Parameter count; zinf picks a GPT-like shape (e.g. 1T, 175B, 1.3e12)", model, "COUNT");
    option("--layers", layers_, "Transformer layers", model);
    option("--hidden", hidden_, "Hidden size", model);
    option("--heads", heads_, "Attention heads", model);
    option("--kv-heads", kv_heads_, "Key/value heads (grouped-query attention; default = heads)", model);
    option("--ffn", ffn_, "MLP inner size (default 4 x hidden)", model);
    option("--vocab", vocab_, "Vocabulary size (default 50257)", model);
    option("--hf-config", hf_config_, "A Hugging Face config.json (GPT-2, GPT-NeoX, LLaMA, Mistral, Qwen2)", model,
           "FILE");

    const std::string training = "Training";
    option("--seq", seq_, "Sequence length (default 1024)", training);
    option("--micro-batch", micro_batch_, "Micro-batch per GPU (default 1)", training);
    option("--ckpt-interval", ckpt_interval_, "Layers between activation checkpoints (default 1)", training);
    option("--tiling", tiling_, "Memory-centric tiling factor for the largest operator (default 1)", training);
    option("--precision", precision_,
           "bf16, fp16, fp32 (fp32 matmuls, PyTorch's default) or tf32 (fp32 training with TF32 matmuls: "
           "allow_tf32); default bf16",
           training, "DTYPE");
    option("--accounting", accounting_, "Model-state accounting: paper (20 B/param), zero (16) or fp32 (16)", training,
           "NAME");
    c.add_flag("--no-activation-checkpointing", no_checkpointing_,
               "Keep every layer's activations and recompute nothing (6 instead of 8 FLOPs per parameter per token)")
        ->group(training);
    c.add_flag("--norm-before-step", norm_before_step_,
               "The optimizer step needs the global gradient norm first (gradient clipping; implied by fp16)")
        ->group(training);
    option("--scenario", scenario_,
           "Plan a `zinf train` scenario: its model, seq, batch, precision, checkpointing, tiling, clipping, zero "
           "placement and overlap_optimizer",
           training, "FILE");

    const std::string hardware = "Hardware (a profile, then per-field overrides)";
    option(
        "--hw", hw_,
        fmt::format("Built-in profile name or a profile JSON file (default {}; see `zinf hw list`)", kDefaultHardware),
        hardware, "NAME|FILE");
    option("--nodes", nodes_, "Nodes; a list (1,2,4) or range (1..64) sweeps", hardware, "N|LIST");
    for (HardwareOverride& o : overrides_) {
      options_[o.flag] =
          c.add_option(o.flag, override_values_[o.flag], o.help)->type_name(o.type_name)->group(hardware);
    }

    const std::string strategy = "Strategy";
    option("--strategy", strategy_,
           "auto (ZeRO-Infinity placement search), dp, zero2, zero3, zero-offload, zinf-cpu, zinf-nvme", strategy,
           "NAME");
    option("--place", place_,
           "Pin states to tiers: params=nvme,optimizer=cpu (kinds: params, grads, optimizer, activations; "
           "tiers: gpu, cpu, nvme)",
           strategy, "KIND=TIER,...");
    option("--target-efficiency", target_efficiency_, "Efficiency the required bandwidth is quoted for (default 0.9)",
           strategy, "F");
    option("--schedule", schedule_,
           "Whose step schedule to predict: zinf (the optimizer overlaps the backward pass; default) or deepspeed "
           "(the offloaded optimizer step runs after it)",
           strategy, "NAME");

    const std::string deepspeed = "DeepSpeed";
    option("--ds-config", ds_config_,
           "A DeepSpeed ds_config.json: plan its stage, offload and batch on this hardware, resolve its \"auto\" "
           "values and say which settings are wrong for it",
           deepspeed, "FILE");
    option("--emit-ds-config", emit_ds_config_, "Write the chosen placement as a DeepSpeed config to FILE", deepspeed,
           "FILE");

    const std::string modes = "Modes";
    c.add_flag("--max-params", max_params_, "The largest model each strategy can hold on this hardware")->group(modes);
    c.add_option("--sweep", sweeps_,
                 "Sweep KEY=VALUES, repeatable: params=1B..100T, micro-batch=1..16, seq=512,1024 "
                 "(keys: params, nodes, gpus-per-node, micro-batch, seq, tiling, ckpt-interval)")
        ->type_name("KEY=VALUES")
        ->group(modes);
    add_output_options(c, output_);
  }

  Status run(const Io& io) override;
  int exit_code_on_success() const override { return does_not_fit_ ? kExitDoesNotFit : kExitOk; }

 private:
  bool given(const std::string& name) const { return options_.at(name)->count() > 0; }
  Result<std::int64_t> int_flag(const std::string& name, const std::string& text, std::int64_t fallback,
                                std::int64_t max = 1 << 30) const {
    if (!given(name)) return fallback;
    return parse_positive_int(text, name, max);
  }
  Result<spec::TrainingSpec> training() const;
  Result<HardwareProfile> hardware(std::vector<std::uint64_t>& node_values, planner::MathMode mode) const;
  bool tf32() const { return given("--precision") && precision_ == "tf32"; }
  Status resolve_model(PlanInput& input, bool model_required, bool params_swept) const;
  Result<std::array<std::optional<spec::Tier>, spec::kAllStateKinds.size()>> pinned() const;

  CLI::App* command_ = nullptr;
  std::vector<HardwareOverride> overrides_;
  std::map<std::string, CLI::Option*> options_;
  std::map<std::string, std::string> override_values_;
  std::string params_, layers_, hidden_, heads_, kv_heads_, ffn_, vocab_, hf_config_;
  std::string seq_, micro_batch_, ckpt_interval_, tiling_, precision_, accounting_;
  std::string hw_, nodes_, strategy_, place_, target_efficiency_, ds_config_, emit_ds_config_, schedule_, scenario_;
  bool max_params_ = false;
  bool no_checkpointing_ = false;
  bool norm_before_step_ = false;
  std::vector<std::string> sweeps_;
  OutputOptions output_;
  bool does_not_fit_ = false;  // set by run(): the exit code after a printed plan
};

Result<spec::TrainingSpec> PlanCommand::training() const {
  spec::TrainingSpec training;
  ZINF_ASSIGN_OR_RETURN(training.seq, int_flag("--seq", seq_, training.seq, 1 << 24));
  ZINF_ASSIGN_OR_RETURN(training.micro_batch, int_flag("--micro-batch", micro_batch_, training.micro_batch, 1 << 20));
  ZINF_ASSIGN_OR_RETURN(training.ckpt_interval, int_flag("--ckpt-interval", ckpt_interval_, training.ckpt_interval));
  ZINF_ASSIGN_OR_RETURN(training.tiling, int_flag("--tiling", tiling_, training.tiling));
  if (given("--precision")) {
    // tf32 is fp32 training (fp32 storage, 16 B/param) whose matmuls run on the TF32 tensor cores.
    const auto precision = tf32() ? std::optional<DType>(DType::kF32) : dtype_from_name(precision_);
    if (!precision) {
      return Status::invalid_argument(
          fmt::format("--precision: '{}' is not one of bf16, fp16, fp32, tf32", precision_));
    }
    training.precision = *precision;
  }
  training.accounting =
      training.precision == DType::kF32 ? spec::StateAccounting::kFp32 : spec::StateAccounting::kPaper;
  if (given("--accounting")) {
    const auto accounting = spec::accounting_from_name(accounting_);
    if (!accounting) {
      return Status::invalid_argument(fmt::format("--accounting: '{}' is not one of paper, zero, fp32", accounting_));
    }
    training.accounting = *accounting;
  }
  training.activation_checkpointing = !no_checkpointing_;
  training.norm_before_step = norm_before_step_;
  // The integer fields were checked as flags above; what is left is the precision/accounting pair.
  ZINF_RETURN_IF_ERROR(
      spec::check_accounting(training, plan_flag_for("training.accounting"), plan_flag_for("training.precision")));
  ZINF_RETURN_IF_ERROR(spec::validate(training));
  return training;
}

Result<HardwareProfile> PlanCommand::hardware(std::vector<std::uint64_t>& node_values, planner::MathMode mode) const {
  const std::string name = given("--hw") ? hw_ : std::string(kDefaultHardware);
  Result<HardwareProfile> loaded = planner::load_hardware_profile(name);
  if (!loaded.is_ok()) return loaded.status().with_context("--hw");
  HardwareProfile hw = std::move(loaded).value();
  for (const HardwareOverride& o : overrides_) {
    if (given(o.flag)) ZINF_RETURN_IF_ERROR(o.apply(hw, override_values_.at(o.flag), o.flag, mode));
  }
  node_values = {static_cast<std::uint64_t>(hw.nodes)};
  if (given("--nodes")) {
    ZINF_ASSIGN_OR_RETURN(node_values, planner::parse_sweep_values(planner::SweepKey::kNodes, nodes_, "--nodes"));
    hw.nodes = static_cast<std::int64_t>(node_values.front());
  }
  const Status valid = planner::validate(hw);
  if (!valid.is_ok()) return valid.with_context(fmt::format("--hw {} with overrides", name));
  return hw;
}

Status PlanCommand::resolve_model(PlanInput& input, bool model_required, bool params_swept) const {
  const bool by_params = given("--params");
  const bool by_shape = given("--layers") || given("--hidden") || given("--heads");
  const bool by_hf = given("--hf-config");
  const int ways = int{by_params} + int{by_shape} + int{by_hf} + int{params_swept};
  if (ways > 1) {
    return Status::invalid_argument(
        "model: give only one of --params, --layers/--hidden/--heads, --hf-config or --sweep params=...");
  }
  if (by_hf && given("--vocab")) {
    return Status::invalid_argument("--vocab: the --hf-config file sets the vocabulary; drop one of the two");
  }
  if (!by_shape && (given("--kv-heads") || given("--ffn"))) {
    return Status::invalid_argument("--kv-heads/--ffn: only apply with --layers/--hidden/--heads");
  }
  ZINF_ASSIGN_OR_RETURN(const std::int64_t vocab, int_flag("--vocab", vocab_, planner::kDefaultVocab, 1 << 24));
  input.shape.vocab = vocab;
  if (params_swept) return Status::ok();  // run_sweep makes one shape per swept count
  if (ways == 0) {
    if (model_required) {
      return Status::invalid_argument(
          "model: missing; give --params (e.g. 1T), --layers/--hidden/--heads, or --hf-config FILE");
    }
    return Status::ok();
  }
  if (by_params) {
    ZINF_ASSIGN_OR_RETURN(input.requested_params, parse_count(params_, "--params"));
    ZINF_ASSIGN_OR_RETURN(input.shape,
                          planner::shape_for_params(input.requested_params, vocab, input.training.seq, plan_flag_for));
    input.model_source = fmt::format("--params {} (shape rule)", params_);
  } else if (by_shape) {
    for (const char* flag : {"--layers", "--hidden", "--heads"}) {
      if (!given(flag))
        return Status::invalid_argument(fmt::format("{}: missing; a shape needs --layers, --hidden and --heads", flag));
    }
    ZINF_ASSIGN_OR_RETURN(const std::int64_t layers, parse_positive_int(layers_, "--layers", 100000));
    ZINF_ASSIGN_OR_RETURN(const std::int64_t hidden, parse_positive_int(hidden_, "--hidden", 1 << 24));
    ZINF_ASSIGN_OR_RETURN(const std::int64_t heads, parse_positive_int(heads_, "--heads", 1 << 24));
    if (hidden % heads != 0) {
      return Status::invalid_argument(fmt::format("--heads: {} does not divide --hidden {}", heads, hidden));
    }
    spec::ModelShape shape = spec::gpt_like_shape(layers, hidden, heads, vocab, input.training.seq);
    ZINF_ASSIGN_OR_RETURN(shape.kv_heads, int_flag("--kv-heads", kv_heads_, heads, 1 << 24));
    ZINF_ASSIGN_OR_RETURN(shape.ffn_hidden, int_flag("--ffn", ffn_, 4 * hidden, 1 << 26));
    if (heads % shape.kv_heads != 0) {
      return Status::invalid_argument(fmt::format("--kv-heads: {} does not divide --heads {}", shape.kv_heads, heads));
    }
    shape.name = fmt::format("gpt-like {}x{}", layers, hidden);
    input.shape = std::move(shape);
    input.model_source = "--layers/--hidden/--heads";
  } else if (by_hf) {
    Result<spec::ModelShape> shape = spec::load_hf_config(hf_config_);
    if (!shape.is_ok()) return shape.status().with_context("--hf-config");
    input.shape = std::move(shape).value();
    input.model_source = fmt::format("--hf-config {}", hf_config_);
    if (input.shape.position == spec::PositionKind::kLearned && input.training.seq > input.shape.max_positions) {
      return Status::invalid_argument(fmt::format("--seq: {} exceeds the model's {} learned positions",
                                                  input.training.seq, input.shape.max_positions));
    }
  }
  return spec::validate(input.shape);
}

Result<std::array<std::optional<spec::Tier>, spec::kAllStateKinds.size()>> PlanCommand::pinned() const {
  std::array<std::optional<spec::Tier>, spec::kAllStateKinds.size()> out{};
  if (!given("--place")) return out;
  for (const std::string_view item : split(place_, ',')) {
    const auto equals = item.find('=');
    const std::string_view kind_name = item.substr(0, equals);
    const auto kind = std::find_if(spec::kAllStateKinds.begin(), spec::kAllStateKinds.end(),
                                   [&](spec::StateKind k) { return spec::state_kind_name(k) == kind_name; });
    const auto tier = equals == std::string_view::npos ? std::nullopt : spec::tier_from_name(item.substr(equals + 1));
    if (kind == spec::kAllStateKinds.end() || !tier) {
      return Status::invalid_argument(fmt::format(
          "--place: '{}' is not KIND=TIER (kinds: params, grads, optimizer, activations; tiers: gpu, cpu, nvme)",
          item));
    }
    std::optional<spec::Tier>& slot = out[static_cast<std::size_t>(*kind)];
    if (slot) {
      return Status::invalid_argument(
          fmt::format("--place: '{}' places {} a second time (already {}); give each kind once", item, kind_name,
                      spec::tier_name(*slot)));
    }
    slot = *tier;
  }
  return out;
}

// A plan's headroom warnings (render_plan put them in the record) also go to stderr, where a user
// who asked for --format json or --out sees them.
void print_warnings(const Rendered& rendered, const Io& io) {
  if (!rendered.record.contains("warnings")) return;
  for (const auto& warning : rendered.record.at("warnings"))
    io.err << "warning: " << warning.get<std::string>() << '\n';
}

Status PlanCommand::run(const Io& io) {
  ZINF_RETURN_IF_ERROR(output_format(output_).status());
  PlanInput input;
  ZINF_ASSIGN_OR_RETURN(input.training, training());
  input.fp32_matmul_tf32 = tf32();
  std::vector<std::uint64_t> node_values;
  ZINF_ASSIGN_OR_RETURN(
      input.hardware, hardware(node_values, planner::math_mode_for(input.training.precision, input.fp32_matmul_tf32)));
  if (given("--strategy")) {
    const auto strategy = planner::strategy_from_name(strategy_);
    if (!strategy) {
      return Status::invalid_argument(fmt::format(
          "--strategy: '{}' is not one of auto, dp, zero2, zero3, zero-offload, zinf-cpu, zinf-nvme", strategy_));
    }
    input.strategy = *strategy;
  }
  ZINF_ASSIGN_OR_RETURN(input.pinned, pinned());
  if (given("--schedule")) {
    const auto schedule = planner::schedule_from_name(schedule_);
    if (!schedule) {
      return Status::invalid_argument(fmt::format("--schedule: '{}' is not one of zinf, deepspeed", schedule_));
    }
    input.schedule = *schedule;
  }
  if (given("--target-efficiency")) {
    double value = 0;
    const auto [end, ec] =
        std::from_chars(target_efficiency_.data(), target_efficiency_.data() + target_efficiency_.size(), value);
    if (ec != std::errc() || end != target_efficiency_.data() + target_efficiency_.size() ||
        !(value > 0 && value < 1)) {
      return Status::invalid_argument(fmt::format(
          "--target-efficiency: '{}' is not a number between 0 and 1 (exclusive), e.g. 0.9", target_efficiency_));
    }
    input.target_efficiency = value;
  }

  std::vector<planner::SweepDimension> dimensions;
  for (const std::string& text : sweeps_) {
    ZINF_ASSIGN_OR_RETURN(planner::SweepDimension dimension, planner::parse_sweep_dimension(text, "--sweep"));
    const auto duplicate =
        std::find_if(dimensions.begin(), dimensions.end(), [&](const auto& d) { return d.key == dimension.key; });
    if (duplicate != dimensions.end() || (dimension.key == planner::SweepKey::kNodes && given("--nodes"))) {
      return Status::invalid_argument(
          fmt::format("--sweep: '{}' is swept twice", planner::sweep_key_name(dimension.key)));
    }
    dimensions.push_back(std::move(dimension));
  }
  if (node_values.size() > 1) dimensions.push_back({planner::SweepKey::kNodes, node_values});
  const bool params_swept = std::any_of(dimensions.begin(), dimensions.end(),
                                        [](const auto& d) { return d.key == planner::SweepKey::kParams; });

  const bool deepspeed = given("--ds-config") || given("--emit-ds-config");
  if (deepspeed && (max_params_ || !dimensions.empty())) {
    return Status::invalid_argument(
        fmt::format("{}: plans one configuration; drop --max-params, --sweep and list-valued --nodes",
                    given("--ds-config") ? "--ds-config" : "--emit-ds-config"));
  }
  if (given("--ds-config") && (given("--strategy") || given("--place"))) {
    return Status::invalid_argument(
        "--ds-config: the config's stage and offload devices choose the placement; drop --strategy/--place");
  }
  if (given("--emit-ds-config")) ZINF_RETURN_IF_ERROR(check_output_path(emit_ds_config_, "--emit-ds-config"));
  if (max_params_) {
    if (!dimensions.empty()) {
      return Status::invalid_argument("--max-params: takes one node count; drop --sweep and list-valued --nodes");
    }
    if (given("--params") || given("--layers") || given("--hf-config") || given("--scenario")) {
      return Status::invalid_argument(
          "--max-params: finds the model size itself; drop --params/--layers/--hf-config/--scenario");
    }
    ZINF_RETURN_IF_ERROR(resolve_model(input, /*model_required=*/false, false));
    const std::vector<planner::Strategy> strategies(planner::kAllStrategies.begin() + 1, planner::kAllStrategies.end());
    ZINF_ASSIGN_OR_RETURN(const auto results, planner::max_params_per_strategy(input, strategies));
    return emit(output_, render_max_params(input, results, io.started), io);
  }
  if (given("--scenario")) {
    for (const char* flag : {"--params", "--layers", "--hidden", "--heads", "--kv-heads", "--ffn", "--vocab",
                             "--hf-config", "--seq", "--micro-batch", "--ckpt-interval", "--tiling", "--precision",
                             "--accounting", "--strategy", "--place", "--ds-config", "--emit-ds-config"}) {
      if (given(flag)) {
        return Status::invalid_argument(
            fmt::format("--scenario: the scenario sets the model, training and placement; drop {}", flag));
      }
    }
    if (no_checkpointing_ || norm_before_step_) {
      return Status::invalid_argument(
          "--scenario: the scenario's activation_checkpointing and optimizer.grad_clip decide these; drop "
          "--no-activation-checkpointing/--norm-before-step");
    }
    if (max_params_ || !dimensions.empty()) {
      return Status::invalid_argument("--scenario: plans one configuration; drop --max-params and --sweep");
    }
    ZINF_ASSIGN_OR_RETURN(const spec::Scenario scenario, spec::load_scenario(scenario_, scenario_shape_resolver()));
    const planner::Schedule asked = input.schedule;
    // FLOP/s overrides set the scenario's math mode, not the default one.
    ZINF_ASSIGN_OR_RETURN(input.hardware, hardware(node_values, planner::math_mode_for(scenario.precision, false)));
    input = planner::plan_input_for(scenario, input.hardware);
    if (given("--schedule")) input.schedule = asked;
    input.model_source += fmt::format(" (--scenario {})", scenario_);
    ZINF_ASSIGN_OR_RETURN(const planner::Plan plan, planner::make_plan(input, plan_flag_for));
    does_not_fit_ = !plan.feasible;
    const Rendered rendered = render_plan(plan, !given("--hw"), io.started);
    print_warnings(rendered, io);
    return emit(output_, rendered, io);
  }
  ZINF_RETURN_IF_ERROR(resolve_model(input, /*model_required=*/!params_swept, params_swept));
  if (!dimensions.empty()) {
    ZINF_ASSIGN_OR_RETURN(const auto points, planner::run_sweep(input, dimensions, plan_flag_for));
    does_not_fit_ = std::none_of(points.begin(), points.end(), [](const auto& p) { return p.feasible; });
    return emit(output_, render_sweep(dimensions, points, io.started), io);
  }
  if (!given("--ds-config")) {
    ZINF_ASSIGN_OR_RETURN(const planner::Plan plan, planner::make_plan(input, plan_flag_for));
    does_not_fit_ = !plan.feasible;
    if (given("--emit-ds-config")) ZINF_RETURN_IF_ERROR(emit_ds_config(plan, emit_ds_config_, io));
    const Rendered rendered = render_plan(plan, !given("--hw"), io.started);
    print_warnings(rendered, io);
    return emit(output_, rendered, io);
  }
  DsPlanFlags flags;
  if (given("--micro-batch")) flags.micro_batch = input.training.micro_batch;
  if (given("--precision")) flags.precision = input.training.precision;
  if (given("--ckpt-interval")) flags.ckpt_interval = input.training.ckpt_interval;
  flags.accounting_given = given("--accounting");
  ZINF_ASSIGN_OR_RETURN(const spec::ResolvedDeepSpeed resolved, apply_ds_config(ds_config_, flags, input));
  input.model_source += fmt::format(", --ds-config {}", ds_config_);
  ZINF_ASSIGN_OR_RETURN(const planner::Plan plan, planner::make_plan(input, ds_plan_flag_for));
  does_not_fit_ = !plan.feasible;
  if (given("--emit-ds-config")) ZINF_RETURN_IF_ERROR(emit_ds_config(plan, emit_ds_config_, io));
  Rendered rendered = render_plan(plan, !given("--hw"), io.started);
  print_warnings(rendered, io);
  add_deepspeed_view(ds_config_, resolved, planner::check_deepspeed(resolved, plan),
                     plan.placement[spec::StateKind::kGrads], rendered);
  return emit(output_, rendered, io);
}

}  // namespace

std::unique_ptr<Subcommand> add_plan_command(CLI::App& app) { return std::make_unique<PlanCommand>(app); }

}  // namespace zinf::cli
