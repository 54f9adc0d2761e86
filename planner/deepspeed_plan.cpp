#include "planner/deepspeed_plan.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "libengine/core/units.h"

namespace zinf::planner {
namespace {

using spec::StateKind;
using spec::Tier;

// fp32 master weights, Adam m and v: what the optimizer swapper moves per element of a sub-group.
constexpr double kOptimizerSwapBytesPerElement = 12.0;
// O_DIRECT needs block-aligned transfers; 4 KiB is the logical block of every NVMe drive zinf meets.
constexpr std::int64_t kDirectIoAlignment = 4096;

std::string count_text(double elements) { return fmt::format("{:.0f}", std::max(0.0, std::floor(elements))); }

std::uint64_t largest_parameter(const Plan& plan) {
  const spec::ModelShape& shape = plan.input.shape;
  return std::max<std::uint64_t>(plan.memory.largest_operator_params,
                                 static_cast<std::uint64_t>(shape.vocab) * static_cast<std::uint64_t>(shape.hidden));
}

const char* device_name(Tier tier) { return tier == Tier::kDevice ? "none" : tier == Tier::kCpu ? "cpu" : "nvme"; }

}  // namespace

void apply_deepspeed(const spec::ResolvedDeepSpeed& resolved, PlanInput& input) {
  const int stage = resolved.config.stage;
  const bool nvme_optimizer = resolved.optimizer_tier() == Tier::kNvme;
  input.strategy = stage == 0       ? Strategy::kDataParallel
                   : stage < 3      ? Strategy::kDeepSpeedStage12
                   : nvme_optimizer ? Strategy::kDeepSpeedStage3NvmeOptimizer
                                    : Strategy::kDeepSpeedStage3;
  input.pinned[static_cast<std::size_t>(StateKind::kParams)] = resolved.params_tier();
  // With the optimizer on NVMe the config does not say where gradients wait (CPU or NVMe): searched.
  input.pinned[static_cast<std::size_t>(StateKind::kGrads)] =
      nvme_optimizer ? std::nullopt : std::optional<Tier>(resolved.grads_tier());
  input.pinned[static_cast<std::size_t>(StateKind::kOptimizer)] = resolved.optimizer_tier();
  input.pinned[static_cast<std::size_t>(StateKind::kActivations)] = resolved.activations_tier();
  input.training.micro_batch = resolved.micro_batch;
  input.training.precision = resolved.precision;
  if (resolved.config.number_checkpoints && input.shape.layers > 0) {
    const std::int64_t n = std::min(*resolved.config.number_checkpoints, input.shape.layers);
    input.training.ckpt_interval = (input.shape.layers + n - 1) / n;
  }
}

std::vector<DsFinding> check_deepspeed(const spec::ResolvedDeepSpeed& resolved, const Plan& plan) {
  std::vector<DsFinding> out;
  const spec::DeepSpeedConfig& c = resolved.config;
  const HardwareProfile& hw = plan.input.hardware;
  const double bytes_per_element = plan.memory.bytes_per_param.params;
  const double largest = static_cast<double>(largest_parameter(plan));
  // CPU memory one rank has to itself once the placement's states are in: DeepSpeed pins its
  // buffers per process, one process per GPU.
  const double gpus = static_cast<double>(std::max<std::int64_t>(hw.node.gpus, 1));
  const double host_free_per_rank =
      std::max(0.0, plan.footprint.cpu.capacity_bytes - plan.footprint.cpu.used_bytes) / gpus;
  const double device_free = std::max(0.0, plan.footprint.device.capacity_bytes - plan.footprint.device.used_bytes);

  if (c.offload_param.device == Tier::kNvme) {
    const double pinned = static_cast<double>(c.offload_param.buffer_count) *
                          static_cast<double>(c.offload_param.buffer_size) * bytes_per_element;
    if (pinned > host_free_per_rank) {
      out.push_back(
          {"zero_optimization.offload_param.buffer_size",
           fmt::format("{} buffers x {} elements x {:.0f} B = {} of pinned memory per rank, but a rank has {} "
                       "of CPU memory left after the placement",
                       c.offload_param.buffer_count, c.offload_param.buffer_size, bytes_per_element,
                       format_bytes(pinned), format_bytes(host_free_per_rank)),
           count_text(host_free_per_rank / (static_cast<double>(c.offload_param.buffer_count) * bytes_per_element))});
    }
    if (static_cast<double>(c.offload_param.buffer_size) < largest) {
      out.push_back({"zero_optimization.offload_param.buffer_size",
                     fmt::format("{} elements cannot hold the largest parameter ({} elements); DeepSpeed reads each "
                                 "parameter from NVMe into one buffer",
                                 c.offload_param.buffer_size, count_text(largest)),
                     count_text(largest)});
    }
    const double in_cpu = static_cast<double>(c.offload_param.max_in_cpu) * bytes_per_element;
    if (in_cpu > host_free_per_rank) {
      out.push_back({"zero_optimization.offload_param.max_in_cpu",
                     fmt::format("{} elements ({}) of parameters kept in CPU memory per rank, but a rank has {} left",
                                 c.offload_param.max_in_cpu, format_bytes(in_cpu), format_bytes(host_free_per_rank)),
                     count_text(host_free_per_rank / bytes_per_element)});
    }
  }
  if (c.offload_optimizer.device == Tier::kNvme) {
    const double swap = static_cast<double>(c.offload_optimizer.buffer_count) *
                        static_cast<double>(resolved.sub_group_size) * kOptimizerSwapBytesPerElement;
    // A sub-group larger than a rank's optimizer partition is only as large as the partition.
    const double partition = static_cast<double>(plan.memory.params) /
                             static_cast<double>(plan.rules.states_partitioned ? hw.total_gpus() : 1);
    const double effective = std::min(
        swap, static_cast<double>(c.offload_optimizer.buffer_count) * partition * kOptimizerSwapBytesPerElement);
    if (effective > host_free_per_rank) {
      out.push_back(
          {"zero_optimization.sub_group_size",
           fmt::format("the optimizer's NVMe swap buffers ({} x sub-group x 12 B of fp32 weights, m and v) "
                       "take {} per rank, but a rank has {} of CPU memory left",
                       c.offload_optimizer.buffer_count, format_bytes(effective), format_bytes(host_free_per_rank)),
           count_text(host_free_per_rank /
                      (static_cast<double>(c.offload_optimizer.buffer_count) * kOptimizerSwapBytesPerElement))});
    }
  }
  if (c.stage == 3) {
    if (resolved.prefetch_bucket_size > resolved.max_live_parameters) {
      out.push_back({c.key("zero_optimization.stage3_prefetch_bucket_size"),
                     fmt::format("{} elements prefetched is more than the {} live parameters allowed "
                                 "(stage3_max_live_parameters); the prefetch can never be in flight whole",
                                 resolved.prefetch_bucket_size, resolved.max_live_parameters),
                     std::to_string(resolved.max_live_parameters)});
    }
    const double live =
        std::min(static_cast<double>(resolved.max_live_parameters), static_cast<double>(plan.memory.params)) *
        bytes_per_element;
    if (plan.placement[StateKind::kParams] != Tier::kDevice && live > device_free) {
      out.push_back({c.key("zero_optimization.stage3_max_live_parameters"),
                     fmt::format("{} of gathered parameters may be live, but the placement leaves {} of GPU memory",
                                 format_bytes(live), format_bytes(device_free)),
                     count_text(device_free / bytes_per_element)});
    }
    if (static_cast<double>(resolved.max_live_parameters) < 2.0 * largest) {
      out.push_back({c.key("zero_optimization.stage3_max_live_parameters"),
                     fmt::format("{} elements cannot hold the two largest parameters gathered at once ({} elements)",
                                 resolved.max_live_parameters, count_text(2.0 * largest)),
                     count_text(2.0 * largest)});
    }
  }
  const double bucket = static_cast<double>(resolved.reduce_bucket_size) * bytes_per_element;
  if (c.stage > 0 && bucket > device_free) {
    out.push_back({"zero_optimization.reduce_bucket_size",
                   fmt::format("a {} gradient bucket does not fit the {} of GPU memory the placement leaves",
                               format_bytes(bucket), format_bytes(device_free)),
                   count_text(device_free / bytes_per_element)});
  }
  if ((c.offload_param.device == Tier::kNvme || c.offload_optimizer.device == Tier::kNvme) &&
      c.aio.block_size_bytes % kDirectIoAlignment != 0) {
    out.push_back(
        {"aio.block_size",
         fmt::format("{} B is not a multiple of the 4096 B block O_DIRECT transfers need", c.aio.block_size_bytes),
         std::to_string((c.aio.block_size_bytes / kDirectIoAlignment + 1) * kDirectIoAlignment)});
  }
  return out;
}

Result<nlohmann::json> deepspeed_config_for(const Plan& plan, const std::string& nvme_path) {
  using json = nlohmann::json;
  const spec::StatePlacement& p = plan.placement;
  const int stage = plan.rules.params_partitioned ? 3 : plan.rules.states_partitioned ? 2 : 0;
  // What DeepSpeed can say: gradients where the optimizer steps, NVMe only at stage 3, checkpoints
  // on the GPU or (cpu_checkpointing) in CPU memory, parameters offloaded only with the optimizer.
  const Tier optimizer = p[StateKind::kOptimizer];
  const Tier grads_expected = optimizer == Tier::kDevice ? Tier::kDevice : Tier::kCpu;
  const bool grads_sayable =
      p[StateKind::kGrads] == grads_expected || (optimizer == Tier::kNvme && p[StateKind::kGrads] == Tier::kNvme);
  std::string unsayable;
  if (!grads_sayable) {
    unsayable = fmt::format("gradients on {} with the optimizer on {}", spec::tier_name(p[StateKind::kGrads]),
                            spec::tier_name(optimizer));
  } else if (stage < 3 && optimizer == Tier::kNvme) {
    unsayable = "the optimizer on NVMe with replicated parameters (DeepSpeed offloads to NVMe at stage 3 only)";
  } else if (p[StateKind::kActivations] == Tier::kNvme) {
    unsayable = "activation checkpoints on NVMe";
  } else if (p[StateKind::kParams] != Tier::kDevice && optimizer == Tier::kDevice) {
    unsayable = "parameters offloaded with the optimizer on the GPU";
  }
  if (!unsayable.empty()) {
    return Status::invalid_argument(fmt::format(
        "the chosen placement has no DeepSpeed equivalent: {}; pin the states with the placement flags", unsayable));
  }
  const spec::TrainingSpec& training = plan.input.training;
  const std::int64_t world = plan.input.hardware.total_gpus();
  json zero{{"stage", stage}};
  const auto offload = [&](Tier tier) {
    json section{{"device", device_name(tier)}};
    if (tier == Tier::kNvme) section["nvme_path"] = nvme_path;
    if (tier != Tier::kDevice) section["pin_memory"] = true;
    return section;
  };
  if (stage > 0) zero["offload_optimizer"] = offload(p[StateKind::kOptimizer]);
  if (stage == 3) {
    zero["offload_param"] = offload(p[StateKind::kParams]);
    const std::uint64_t largest = largest_parameter(plan);
    zero["stage3_max_live_parameters"] = std::max<std::uint64_t>(1'000'000'000, 2 * largest);
    zero["stage3_param_persistence_threshold"] = 10 * plan.input.shape.hidden;
    if (p[StateKind::kParams] == Tier::kNvme) {
      zero["offload_param"]["buffer_count"] = 5;
      zero["offload_param"]["buffer_size"] = std::max<std::uint64_t>(100'000'000, largest);
    }
  }
  json out{{"train_micro_batch_size_per_gpu", training.micro_batch},
           {"gradient_accumulation_steps", 1},
           {"train_batch_size", training.micro_batch * world},
           {"bf16", {{"enabled", training.precision == DType::kBF16}}},
           {"fp16", {{"enabled", training.precision == DType::kF16}}},
           {"zero_optimization", std::move(zero)}};
  json checkpointing{{"partition_activations", p[StateKind::kActivations] == Tier::kCpu},
                     {"cpu_checkpointing", p[StateKind::kActivations] == Tier::kCpu}};
  const std::int64_t layers = plan.input.shape.layers;
  const std::int64_t checkpoints = (layers + training.ckpt_interval - 1) / training.ckpt_interval;
  if (checkpoints > 0 && (layers + checkpoints - 1) / checkpoints == training.ckpt_interval) {
    checkpointing["number_checkpoints"] = checkpoints;
  }
  out["activation_checkpointing"] = std::move(checkpointing);
  return Result<nlohmann::json>(std::move(out));
}

nlohmann::json deepspeed_to_json(const spec::ResolvedDeepSpeed& resolved, const std::vector<DsFinding>& findings) {
  using json = nlohmann::json;
  json autos = json::array();
  for (const spec::DsResolution& r : resolved.resolutions)
    autos.push_back({{"key", r.key}, {"value", r.value}, {"from", r.from}});
  json wrong = json::array();
  for (const DsFinding& f : findings)
    wrong.push_back({{"key", f.key}, {"problem", f.problem}, {"would_work", f.would_work}});
  const spec::DeepSpeedConfig& c = resolved.config;
  return json{{"stage", c.stage},
              {"offload_param", device_name(c.offload_param.device)},
              {"offload_optimizer", device_name(c.offload_optimizer.device)},
              {"train_micro_batch_size_per_gpu", resolved.micro_batch},
              {"gradient_accumulation_steps", resolved.grad_accumulation},
              {"train_batch_size", resolved.train_batch},
              {"precision", dtype_name(resolved.precision)},
              {"gradient_clipping", resolved.gradient_clipping},
              {"optimizer",
               {{"lr", resolved.lr},
                {"betas", {resolved.beta1, resolved.beta2}},
                {"eps", resolved.eps},
                {"weight_decay", resolved.weight_decay}}},
              {"stage3_max_live_parameters", resolved.max_live_parameters},
              {"stage3_prefetch_bucket_size", resolved.prefetch_bucket_size},
              {"stage3_param_persistence_threshold", resolved.persistence_threshold},
              {"sub_group_size", resolved.sub_group_size},
              {"reduce_bucket_size", resolved.reduce_bucket_size},
              {"aio",
               {{"block_size", c.aio.block_size_bytes},
                {"queue_depth", c.aio.queue_depth},
                {"thread_count", c.aio.thread_count}}},
              {"auto", std::move(autos)},
              {"unused_keys", c.unused_keys},
              {"wrong_for_hardware", std::move(wrong)}};
}

}  // namespace zinf::planner
