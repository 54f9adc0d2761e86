#include "planner/bandwidth_model.h"

#include <algorithm>
#include <limits>

#include "planner/collective_model.h"

namespace zinf::planner {

static_assert(kScheduleResources == kAllResources.size(), "schedule_model indexes resources as bandwidth_model does");

using spec::StateKind;
using spec::Tier;

double arithmetic_intensity_params_grads(std::int64_t seq, std::int64_t micro_batch) {
  return static_cast<double>(seq) * static_cast<double>(micro_batch);
}

double arithmetic_intensity_optimizer(std::int64_t seq, std::int64_t micro_batch) {
  return static_cast<double>(seq) * static_cast<double>(micro_batch) / 4.0;
}

double arithmetic_intensity_activations(std::int64_t hidden, std::int64_t ckpt_interval) {
  return 24.0 * static_cast<double>(hidden) * static_cast<double>(ckpt_interval);
}

double efficiency(double arithmetic_intensity, double bandwidth, double peak_flops) {
  const double delivered = arithmetic_intensity * bandwidth;
  return delivered / (delivered + peak_flops);
}

double bandwidth_for_efficiency(double arithmetic_intensity, double peak_flops, double target) {
  return target * peak_flops / (arithmetic_intensity * (1.0 - target));
}

std::string_view resource_name(Resource resource) {
  switch (resource) {
    case Resource::kCompute:
      return "compute";
    case Resource::kHbm:
      return "hbm";
    case Resource::kPcieHostToDevice:
      return "pcie_h2d";
    case Resource::kPcieDeviceToHost:
      return "pcie_d2h";
    case Resource::kCollectives:
      return "collectives";
    case Resource::kCpuMemory:
      return "cpu_memory";
    case Resource::kNvme:
      return "nvme";
  }
  return "?";
}

std::string_view resource_title(Resource resource) {
  switch (resource) {
    case Resource::kCompute:
      return "GPU compute";
    case Resource::kHbm:
      return "GPU memory (HBM)";
    case Resource::kPcieHostToDevice:
      return "PCIe host->GPU";
    case Resource::kPcieDeviceToHost:
      return "PCIe GPU->host";
    case Resource::kCollectives:
      return "GPU collectives";
    case Resource::kCpuMemory:
      return "CPU memory";
    case Resource::kNvme:
      return "NVMe";
  }
  return "?";
}

bool resource_is_per_node(Resource resource) { return resource == Resource::kCpuMemory || resource == Resource::kNvme; }

std::string_view traffic_group_name(TrafficGroup group) {
  switch (group) {
    case TrafficGroup::kParamsAndGrads:
      return "params_grads";
    case TrafficGroup::kOptimizer:
      return "optimizer";
    case TrafficGroup::kActivations:
      return "activations";
  }
  return "?";
}

std::string_view traffic_group_title(TrafficGroup group) {
  switch (group) {
    case TrafficGroup::kParamsAndGrads:
      return "parameters + gradients";
    case TrafficGroup::kOptimizer:
      return "optimizer states";
    case TrafficGroup::kActivations:
      return "activation checkpoints";
  }
  return "?";
}

namespace {

// Accumulates bytes and busy seconds per (group, resource).
class TrafficLedger {
 public:
  void charge(TrafficGroup group, Phase phase, Resource resource, double bytes, double bandwidth) {
    if (bytes <= 0) return;
    Cell& cell = cells_[static_cast<std::size_t>(group)][static_cast<std::size_t>(resource)];
    cell.bytes += bytes;
    cell.seconds += bytes / bandwidth;
    phases_.at(phase)[static_cast<std::size_t>(resource)] += bytes / bandwidth;
  }
  const PhaseLoads& phases() const { return phases_; }
  const ResourceLoad& at(TrafficGroup group, Resource resource) const {
    return cells_[static_cast<std::size_t>(group)][static_cast<std::size_t>(resource)];
  }

 private:
  using Cell = ResourceLoad;
  std::array<std::array<Cell, kAllResources.size()>, kAllTrafficGroups.size()> cells_{};
  PhaseLoads phases_;
};

// The figures of one step that do not depend on where states live.
struct Cluster {
  double gpus = 0;
  double nodes = 0;
};

Cluster describe_cluster(const HardwareProfile& hardware) {
  Cluster cluster;
  cluster.gpus = static_cast<double>(hardware.total_gpus());
  cluster.nodes = static_cast<double>(hardware.nodes);
  return cluster;
}

// A collective over every GPU, charged to each GPU's collective link as nccl-tests' bus bytes at
// its busbw (collective_model.h).
void charge_collective(TrafficLedger& ledger, const HardwareProfile& hardware, TrafficGroup group, Phase phase,
                       Collective collective, double size) {
  ledger.charge(group, phase, Resource::kCollectives, bus_bytes(hardware, collective, size),
                collective_bandwidth(hardware, collective).bus_bandwidth);
}

// Moving `bytes` (cluster total, spread evenly over ranks) into or out of the CPU or NVMe tier.
// Per node: the drives and CPU memory see the node's share; per GPU: PCIe sees the rank's share.
struct Mover {
  TrafficLedger& ledger;
  const NodeSpec& node;
  const Cluster& cluster;

  void to_gpu_from(Tier tier, TrafficGroup group, Phase phase, double cluster_bytes) const {
    if (tier == Tier::kDevice) return;
    ledger.charge(group, phase, Resource::kPcieHostToDevice, cluster_bytes / cluster.gpus, node.pcie_bandwidth_per_gpu);
    read_host(tier, group, phase, cluster_bytes);
  }
  void from_gpu_to(Tier tier, TrafficGroup group, Phase phase, double cluster_bytes) const {
    if (tier == Tier::kDevice) return;
    ledger.charge(group, phase, Resource::kPcieDeviceToHost, cluster_bytes / cluster.gpus, node.pcie_bandwidth_per_gpu);
    write_host(tier, group, phase, cluster_bytes);
  }
  // Reading from a host tier: NVMe data is DMA'd into CPU memory first, then read out of it.
  void read_host(Tier tier, TrafficGroup group, Phase phase, double cluster_bytes) const {
    const double per_node = cluster_bytes / cluster.nodes;
    if (tier == Tier::kNvme) {
      ledger.charge(group, phase, Resource::kNvme, per_node, node.nvme_read_bandwidth);
      ledger.charge(group, phase, Resource::kCpuMemory, per_node, node.cpu_memory_bandwidth);
    }
    ledger.charge(group, phase, Resource::kCpuMemory, per_node, node.cpu_memory_bandwidth);
  }
  void write_host(Tier tier, TrafficGroup group, Phase phase, double cluster_bytes) const {
    const double per_node = cluster_bytes / cluster.nodes;
    ledger.charge(group, phase, Resource::kCpuMemory, per_node, node.cpu_memory_bandwidth);
    if (tier == Tier::kNvme) {
      ledger.charge(group, phase, Resource::kCpuMemory, per_node, node.cpu_memory_bandwidth);
      ledger.charge(group, phase, Resource::kNvme, per_node, node.nvme_write_bandwidth);
    }
  }
  // Moving data between two tiers for the optimizer step (gradients in, updated parameters out).
  void between(Tier from, Tier to, TrafficGroup group, Phase phase, double cluster_bytes) const {
    if (from == to) return;
    if (from == Tier::kDevice) return from_gpu_to(to, group, phase, cluster_bytes);
    if (to == Tier::kDevice) return to_gpu_from(from, group, phase, cluster_bytes);
    // CPU <-> NVMe: the drives do the work; CPU memory is touched once either way.
    const double per_node = cluster_bytes / cluster.nodes;
    ledger.charge(group, phase, Resource::kCpuMemory, per_node, node.cpu_memory_bandwidth);
    if (from == Tier::kNvme) ledger.charge(group, phase, Resource::kNvme, per_node, node.nvme_read_bandwidth);
    if (to == Tier::kNvme) ledger.charge(group, phase, Resource::kNvme, per_node, node.nvme_write_bandwidth);
  }
};

}  // namespace

StepModel model_step(const ModelMemory& memory, const StrategyRules& rules, const spec::StatePlacement& placement,
                     const HardwareProfile& hardware, const ComputeRate& rate, double target_efficiency,
                     Schedule schedule, bool norm_before_step) {
  const NodeSpec& node = hardware.node;
  const Cluster cluster = describe_cluster(hardware);
  TrafficLedger ledger;
  const Mover move{ledger, node, cluster};
  const bool collectives = cluster.gpus > 1;
  const Tier params_tier = placement[StateKind::kParams];
  const Tier grads_tier = placement[StateKind::kGrads];
  const Tier optimizer_tier = placement[StateKind::kOptimizer];
  const Tier activations_tier = placement[StateKind::kActivations];

  // Parameters: with ZeRO-3 each rank loads its slice three times per step (forward, recompute,
  // backward; twice without checkpointing) and all-gathers the rest; replicated parameters stay resident.
  constexpr TrafficGroup kPG = TrafficGroup::kParamsAndGrads;
  if (rules.params_partitioned) {
    const double backward_loads = (memory.parameter_loads() - 1.0) * memory.params_bytes;
    for (const auto& [phase, loads] :
         {std::pair{Phase::kForward, memory.params_bytes}, std::pair{Phase::kBackward, backward_loads}}) {
      move.to_gpu_from(params_tier, kPG, phase, loads);
      if (collectives) charge_collective(ledger, hardware, kPG, phase, Collective::kAllGather, loads);
    }
  }
  // Gradients: reduce-scattered into slices (ZeRO-2/3) or all-reduced (plain data parallelism,
  // twice the traffic); each rank's slice then goes to the gradient tier.
  if (collectives) {
    charge_collective(ledger, hardware, kPG, Phase::kBackward,
                      rules.states_partitioned ? Collective::kReduceScatter : Collective::kAllReduce,
                      memory.grads_bytes);
  }
  if (rules.states_partitioned) move.from_gpu_to(grads_tier, kPG, Phase::kBackward, memory.grads_bytes);

  // Optimizer step: read and write every optimizer state once where it lives; bring gradients
  // to it and send updated parameters back to the parameter tier.
  constexpr TrafficGroup kOpt = TrafficGroup::kOptimizer;
  const double replicas = rules.states_partitioned ? 1.0 : cluster.gpus;
  const double optimizer_stream = 2.0 * memory.optimizer_bytes * replicas;
  // States already in the memory that steps them are read by the update itself; NVMe-resident ones
  // are read ahead (Phase::kOptimizerRead) and written behind (Phase::kOptimizerWrite).
  constexpr Phase kUpdate = Phase::kOptimizerUpdate;
  constexpr Phase kWrite = Phase::kOptimizerWrite;
  switch (optimizer_tier) {
    case Tier::kDevice:
      ledger.charge(kOpt, kUpdate, Resource::kHbm, optimizer_stream / cluster.gpus, node.gpu.memory_bandwidth);
      break;
    case Tier::kCpu:
      ledger.charge(kOpt, kUpdate, Resource::kCpuMemory, optimizer_stream / cluster.nodes, node.cpu_memory_bandwidth);
      break;
    case Tier::kNvme:
      move.read_host(Tier::kNvme, kOpt, Phase::kOptimizerRead, memory.optimizer_bytes);
      move.write_host(Tier::kNvme, kOpt, kWrite, memory.optimizer_bytes);
      break;
  }
  // CPU Adam streams NVMe-resident states through CPU memory, so gradients are consumed and updated
  // parameters produced in CPU memory: for those transfers an NVMe optimizer sits in the CPU tier.
  const Tier optimizer_compute_tier = optimizer_tier == Tier::kNvme ? Tier::kCpu : optimizer_tier;
  move.between(grads_tier, optimizer_compute_tier, kOpt, kUpdate, memory.grads_bytes * replicas);
  // The updated parameters: a replicated copy (ZeRO-Offload) is all-gathered from the updated slices.
  move.between(optimizer_compute_tier, params_tier, kOpt, params_tier == Tier::kNvme ? kWrite : kUpdate,
               memory.params_bytes * replicas);
  if (!rules.params_partitioned && rules.states_partitioned && collectives) {
    charge_collective(ledger, hardware, kOpt, kUpdate, Collective::kAllGather, memory.params_bytes);
  }

  // Activation checkpoints: written in forward, read back in backward, each GPU its own.
  constexpr TrafficGroup kAct = TrafficGroup::kActivations;
  const double checkpoints = memory.activation_checkpoint_bytes_per_gpu * cluster.gpus;
  move.from_gpu_to(activations_tier, kAct, Phase::kForward, checkpoints);
  move.to_gpu_from(activations_tier, kAct, Phase::kBackward, checkpoints);

  StepModel step;
  step.compute_seconds = memory.flops_per_gpu_per_step / rate.achievable_flops;
  step.resources[static_cast<std::size_t>(Resource::kCompute)] = {memory.flops_per_gpu_per_step, step.compute_seconds};
  for (TrafficGroup group : kAllTrafficGroups) {
    for (Resource resource : kAllResources) {
      if (resource == Resource::kCompute) continue;
      ResourceLoad& total = step.resources[static_cast<std::size_t>(resource)];
      total.bytes += ledger.at(group, resource).bytes;
      total.seconds += ledger.at(group, resource).seconds;
    }
  }

  // The paper's data movement per GPU for each group (what its arithmetic intensity divides by).
  const double params_per_gpu_loads = memory.parameter_loads() * memory.params_bytes;  // every GPU, every load
  const std::array<double, kAllTrafficGroups.size()> group_bytes{
      params_per_gpu_loads + memory.grads_bytes,
      2.0 * memory.optimizer_bytes,
      2.0 * memory.activation_checkpoint_bytes_per_gpu,
  };
  for (TrafficGroup group : kAllTrafficGroups) {
    GroupTraffic& traffic = step.groups[static_cast<std::size_t>(group)];
    traffic.bytes_per_gpu = group_bytes[static_cast<std::size_t>(group)];
    // Nothing to move (no checkpoints without checkpointing): no intensity, no bandwidth needed.
    traffic.arithmetic_intensity =
        traffic.bytes_per_gpu > 0 ? memory.flops_per_gpu_per_step / traffic.bytes_per_gpu : 0.0;
    for (Resource resource : kAllResources)
      traffic.seconds = std::max(traffic.seconds, ledger.at(group, resource).seconds);
    traffic.effective_bandwidth = traffic.seconds > 0 ? traffic.bytes_per_gpu / traffic.seconds : 0.0;
    traffic.efficiency = traffic.seconds > 0 ? efficiency(traffic.arithmetic_intensity, traffic.effective_bandwidth,
                                                          rate.achievable_flops)
                                             : 1.0;
    traffic.required_bandwidth =
        traffic.bytes_per_gpu > 0
            ? bandwidth_for_efficiency(traffic.arithmetic_intensity, rate.achievable_flops, target_efficiency)
            : 0.0;
  }

  double busiest_link = 0;
  step.step_seconds = step.compute_seconds;
  for (Resource resource : kAllResources) {
    const double seconds = step.load(resource).seconds;
    if (resource != Resource::kCompute) busiest_link = std::max(busiest_link, seconds);
    if (seconds > step.step_seconds) {
      step.step_seconds = seconds;
      step.bottleneck = resource;
    }
  }
  step.step_seconds_no_overlap = step.compute_seconds + busiest_link;

  step.phases = ledger.phases();
  const auto compute = static_cast<std::size_t>(Resource::kCompute);
  const double forward_compute = memory.forward_flops_per_gpu / rate.achievable_flops;
  step.phases.at(Phase::kForward)[compute] = forward_compute;
  step.phases.at(Phase::kBackward)[compute] = step.compute_seconds - forward_compute;
  ScheduleOptions options;
  options.norm_before_step = norm_before_step;
  options.optimizer_on_host = optimizer_tier != Tier::kDevice;
  for (Schedule s : kAllSchedules) {
    options.schedule = s;
    step.schedules[static_cast<std::size_t>(s)] = schedule_step(step.phases, options);
  }
  step.scheduled = step.schedule(schedule);
  return step;
}

}  // namespace zinf::planner
