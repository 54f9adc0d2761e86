// Bandwidth model: how long one training step takes when states live where a placement puts them.
//
// Two views, both from the ZeRO-Infinity paper (§4) and kept consistent:
//  * the paper's per-kind efficiency, efficiency = ait·bw / (ait·bw + peak_tp), with arithmetic
//    intensity (FLOPs per byte moved) seq·bsz for parameters and gradients, seq·bsz/4 for
//    optimizer states and 24·hd·ci for activation checkpoints;
//  * a resource model of the step: every byte a placement moves is charged to the link it crosses
//    (PCIe per GPU, NVMe and CPU memory per node, GPU collectives as NCCL runs them
//    (collective_model.h), HBM), with bandwidth-centric
//    partitioning (each rank moves only its 1/world slice, then all-gathers). The step takes as
//    long as the busiest resource if the prefetcher overlaps everything with compute (the design
//    goal), or compute + the busiest link if nothing overlaps. The busiest one is the bottleneck.
// The per-kind bandwidth the paper's formula needs is derived from the resource model, so both
// views agree for the paper's shapes (tests check this).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "libengine/spec/state_placement.h"
#include "libengine/spec/training_spec.h"
#include "planner/compute_rate.h"
#include "planner/hardware_profile.h"
#include "planner/memory_model.h"
#include "planner/schedule_model.h"
#include "planner/strategy.h"

namespace zinf::planner {

// The paper's formulas, one by one.
double arithmetic_intensity_params_grads(std::int64_t seq, std::int64_t micro_batch);      // seq·bsz
double arithmetic_intensity_optimizer(std::int64_t seq, std::int64_t micro_batch);         // seq·bsz/4
double arithmetic_intensity_activations(std::int64_t hidden, std::int64_t ckpt_interval);  // 24·hd·ci
double efficiency(double arithmetic_intensity, double bandwidth, double peak_flops);
// The bandwidth at which `efficiency()` reaches `target` (0 < target < 1).
double bandwidth_for_efficiency(double arithmetic_intensity, double peak_flops, double target);

// Links and devices a step keeps busy. Per GPU: compute, HBM, PCIe each way, collectives.
// Per node: CPU memory, NVMe (reads and writes share the drives).
enum class Resource { kCompute, kHbm, kPcieHostToDevice, kPcieDeviceToHost, kCollectives, kCpuMemory, kNvme };
inline constexpr std::array kAllResources{Resource::kCompute,
                                          Resource::kHbm,
                                          Resource::kPcieHostToDevice,
                                          Resource::kPcieDeviceToHost,
                                          Resource::kCollectives,
                                          Resource::kCpuMemory,
                                          Resource::kNvme};
std::string_view resource_name(Resource resource);   // "compute", "hbm", "pcie_h2d", ...
std::string_view resource_title(Resource resource);  // "GPU compute", "PCIe host->GPU", ...
bool resource_is_per_node(Resource resource);

// The paper's three groups of traffic.
enum class TrafficGroup { kParamsAndGrads, kOptimizer, kActivations };
inline constexpr std::array kAllTrafficGroups{TrafficGroup::kParamsAndGrads, TrafficGroup::kOptimizer,
                                              TrafficGroup::kActivations};
std::string_view traffic_group_name(TrafficGroup group);   // "params_grads", "optimizer", "activations"
std::string_view traffic_group_title(TrafficGroup group);  // "parameters + gradients", ...

struct ResourceLoad {
  double bytes = 0;    // per GPU or per node (resource_is_per_node), per step
  double seconds = 0;  // busy time per step
};

struct GroupTraffic {
  double bytes_per_gpu = 0;         // the paper's data movement per GPU per step
  double arithmetic_intensity = 0;  // FLOPs per GPU per step / bytes_per_gpu
  double seconds = 0;               // time the group alone keeps its busiest resource busy
  double effective_bandwidth = 0;   // bytes_per_gpu / seconds; 0 when nothing moves (seconds == 0)
  double efficiency = 1;            // the paper's formula with effective_bandwidth
  double required_bandwidth = 0;    // bandwidth_for_efficiency at the plan's target efficiency
};

struct StepModel {
  std::array<ResourceLoad, kAllResources.size()> resources{};   // indexed by Resource
  std::array<GroupTraffic, kAllTrafficGroups.size()> groups{};  // indexed by TrafficGroup
  PhaseLoads phases;                                            // busy seconds per phase, per Resource index
  double compute_seconds = 0;
  double step_seconds = 0;             // busiest resource (full overlap: every transfer behind every computation)
  double step_seconds_no_overlap = 0;  // compute + busiest non-compute resource
  Resource bottleneck = Resource::kCompute;
  // The phases as each schedule runs them (indexed by Schedule) and the one asked for.
  std::array<ScheduledStep, kAllSchedules.size()> schedules{};
  ScheduledStep scheduled;
  const ScheduledStep& schedule(Schedule s) const { return schedules[static_cast<std::size_t>(s)]; }

  const ResourceLoad& load(Resource r) const { return resources[static_cast<std::size_t>(r)]; }
  const GroupTraffic& group(TrafficGroup g) const { return groups[static_cast<std::size_t>(g)]; }
};

// `rate`: the GPU's rate in the plan's math mode (compute is charged at rate.achievable_flops).
// `schedule` picks StepModel::scheduled; `norm_before_step`: clipping or fp16 loss scaling (the
// optimizer's update waits for the global norm; see schedule_model.h).
StepModel model_step(const ModelMemory& memory, const StrategyRules& rules, const spec::StatePlacement& placement,
                     const HardwareProfile& hardware, const ComputeRate& rate, double target_efficiency,
                     Schedule schedule = Schedule::kZinf, bool norm_before_step = false);

}  // namespace zinf::planner
