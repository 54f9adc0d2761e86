// Schedule model: how the phases of one training step — forward, backward, optimizer — follow and
// overlap each other, given how long each phase keeps each resource busy. The resource view
// (bandwidth_model.h) says how many seconds of work a step puts on every link; this file says which
// of those seconds can run at the same time, for two schedules:
//
//  * deepspeed: parameter fetches overlap forward and backward compute (prefetch) and gradient
//    offload overlaps backward, but the offloaded optimizer step (NVMe reads of master/m/v, CPU
//    Adam, write-back) starts when the backward pass has ended:
//        step = fwd + bwd + opt,  each phase lasting as long as its busiest resource.
//  * zinf (the engine with zero.overlap_optimizer, its default): a sub-group's optimizer states are
//    read from the forward pass on (as many as the host pipeline holds, then as sub-groups are
//    written back), its step runs as soon as its gradients are final, and its writes (states and
//    new parameters) are written behind, on into the next forward pass, so the optimizer's
//    transfers share the whole step's resources:
//        step = max(max_r (fwd_r + bwd_r + read_r + update_r + write_r + norm_r),
//                   fwd + bwd' + norm + update / sub_groups)
//    (the last sub-group's update cannot start before the backward ends; bwd' is the backward pass
//    with the other sub-groups' updates added to its compute resource when they use it — the CPU
//    backend, whose CPU Adam runs between the backward's operators). When the first term sets the
//    step, the time beyond the chain is waited for in the forward and backward passes (their
//    prefetches queue behind the optimizer's transfers), split in proportion to their length, and
//    the optimizer phase is the last update alone. When the step needs the
//    global gradient norm first (clipping, fp16 loss scaling) every update waits for it; the reads
//    that fit the host pipeline overlap the backward pass (a share a of them: the engine's pipeline
//    sets hold that many sub-groups), the others follow the updates, each into a set whose write
//    must finish first; the other writes are still written behind:
//        step = max(max_r (fwd_r + bwd_r + read_r + update_r + write_r + norm_r),
//                   fwd + max_r (bwd_r + a·read_r) + max_r (norm_r + update_r + (1 - a)·(read_r + write_r))).
//    DeepSpeed's optimizer phase holds the norm as well (it computes one every step too).
//    An optimizer on the device runs after the backward pass in both schedules (the engine overlaps
//    only the host optimizer).
// Pure arithmetic; no knowledge of placements or hardware.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace zinf::planner {

enum class Schedule { kZinf, kDeepSpeed };
inline constexpr std::array kAllSchedules{Schedule::kZinf, Schedule::kDeepSpeed};
std::string_view schedule_name(Schedule schedule);  // "zinf", "deepspeed"
std::optional<Schedule> schedule_from_name(std::string_view name);

// Parts of a step whose transfers the schedules place differently. kOptimizerUpdate: the step's
// arithmetic and the transfers it waits for; kOptimizerWrite: the writes to NVMe of the updated
// states and parameters, which zinf writes behind; kGradientNorm: the global gradient norm, one
// pass over every gradient once the backward pass has ended (the engine computes it every step:
// clipping and fp16 loss scaling need it before any update, and the step's report shows it).
enum class Phase { kForward, kBackward, kOptimizerRead, kOptimizerUpdate, kOptimizerWrite, kGradientNorm };
inline constexpr std::array kAllPhases{Phase::kForward,         Phase::kBackward,       Phase::kOptimizerRead,
                                       Phase::kOptimizerUpdate, Phase::kOptimizerWrite, Phase::kGradientNorm};
// "forward", "backward", "optimizer_read", "optimizer_update", "optimizer_write", "gradient_norm"
std::string_view phase_name(Phase phase);

// Busy seconds per resource per phase. Resources are indices 0..kScheduleResources-1
// (bandwidth_model's Resource enum; index 0 is compute).
inline constexpr std::size_t kScheduleResources = 7;
using ResourceSeconds = std::array<double, kScheduleResources>;
struct PhaseLoads {
  std::array<ResourceSeconds, kAllPhases.size()> seconds{};  // indexed by Phase
  ResourceSeconds& at(Phase phase) { return seconds[static_cast<std::size_t>(phase)]; }
  const ResourceSeconds& at(Phase phase) const { return seconds[static_cast<std::size_t>(phase)]; }
};

struct ScheduleOptions {
  Schedule schedule = Schedule::kZinf;
  bool norm_before_step = false;  // clipping or fp16 loss scaling: the update waits for the global norm
  bool optimizer_on_host = true;  // the optimizer runs on the CPU (states in CPU memory or on NVMe)
  double sub_groups = 8;          // the optimizer pipeline's granularity (>= 1): the exposed tail is 1/sub_groups
  // With norm_before_step: the share of the optimizer's reads that can run before the first update,
  // in [0, 1] (the engine: the sub-groups its host pipeline sets hold; 1: a pipeline as deep as the
  // step, every read ahead).
  double read_ahead = 1.0;
};

// One phase as the schedule runs it: how long it lasts and which resource sets that length.
struct PhaseTime {
  double seconds = 0;
  std::size_t bottleneck = 0;  // resource index
};

struct ScheduledStep {
  Schedule schedule = Schedule::kZinf;
  PhaseTime forward;
  // The backward pass, with the optimizer reads it absorbs when the norm comes first, and without
  // it the updates stepped during it where they share its compute resource (the CPU backend).
  PhaseTime backward;
  PhaseTime optimizer;                  // what of the optimizer runs after the backward pass has ended
  double optimizer_work_seconds = 0;    // the optimizer phase run on its own (deepspeed's phase)
  double optimizer_hidden_seconds = 0;  // of that, hidden behind the backward pass
  double step_seconds = 0;              // forward + backward + exposed optimizer
  bool overlapped = false;              // the optimizer's update overlapped the backward pass
};

// The busiest resource of `loads` (index 0 when all are zero).
PhaseTime busiest(const ResourceSeconds& loads);

ScheduledStep schedule_step(const PhaseLoads& loads, const ScheduleOptions& options);

}  // namespace zinf::planner
