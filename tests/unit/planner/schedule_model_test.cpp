// Schedule model: the phases of a step under zinf's and DeepSpeed's schedules against closed forms
// worked out by hand in the comments, on hand-built per-phase loads; and the planner's schedules
// and no-checkpointing mode end to end on the built-in profiles (the 1T scaling the paper measured).
#include "planner/schedule_model.h"

#include "planner/bandwidth_model.h"
#include "planner/planner.h"
#include "planner/shape_rule.h"
#include "tests/catch.h"

namespace zinf::planner {
namespace {

constexpr std::size_t kCompute = 0, kPcieH2d = 2, kCpuMemory = 5, kNvme = 6;

// Forward: compute 2 s, PCIe 1 s. Backward: compute 4 s, PCIe 3 s, NVMe 1 s.
// Optimizer reads: NVMe 3 s. Optimizer update: CPU memory 1.5 s. Optimizer writes: NVMe 2 s.
PhaseLoads hand_loads() {
  PhaseLoads loads;
  loads.at(Phase::kForward)[kCompute] = 2.0;
  loads.at(Phase::kForward)[kPcieH2d] = 1.0;
  loads.at(Phase::kBackward)[kCompute] = 4.0;
  loads.at(Phase::kBackward)[kPcieH2d] = 3.0;
  loads.at(Phase::kBackward)[kNvme] = 1.0;
  loads.at(Phase::kOptimizerRead)[kNvme] = 3.0;
  loads.at(Phase::kOptimizerWrite)[kNvme] = 2.0;
  loads.at(Phase::kOptimizerUpdate)[kCpuMemory] = 1.5;
  return loads;
}

TEST_CASE("deepspeed: forward, backward, then the whole optimizer phase") {
  ScheduleOptions options;
  options.schedule = Schedule::kDeepSpeed;
  const ScheduledStep step = schedule_step(hand_loads(), options);
  // fwd = max(2, 1) = 2 (compute); bwd = max(4, 3, 1) = 4 (compute); opt = max over resources of
  // read + update + write = max(NVMe 3 + 2, CPU 1.5) = 5 (NVMe). Step = 2 + 4 + 5 = 11.
  CHECK(step.forward.seconds == 2.0);
  CHECK(step.forward.bottleneck == kCompute);
  CHECK(step.backward.seconds == 4.0);
  CHECK(step.optimizer.seconds == 5.0);
  CHECK(step.optimizer.bottleneck == kNvme);
  CHECK(step.step_seconds == 11.0);
  CHECK(step.optimizer_work_seconds == 5.0);
  CHECK(step.optimizer_hidden_seconds == 0.0);
  CHECK_FALSE(step.overlapped);
}

TEST_CASE("zinf: the optimizer shares the whole step's resources, the last sub-group is exposed") {
  ScheduleOptions options;  // zinf, no global norm first, 8 sub-groups
  const ScheduledStep step = schedule_step(hand_loads(), options);
  // Forward + backward + reads + updates + writes per resource: compute 2 + 4 = 6, PCIe 1 + 3 = 4,
  // NVMe 1 + 3 + 2 = 6, CPU 1.5 -> 6. The chain: forward 2 + backward 4 + the last sub-group's
  // update (its writes go behind) CPU 1.5 / 8 = 0.1875 -> 6.1875. Step = max(6, 6.1875): the
  // optimizer adds 0.1875 s after the backward pass.
  CHECK(step.backward.seconds == 4.0);
  CHECK(step.optimizer.seconds == Approx(0.1875));
  CHECK(step.optimizer.bottleneck == kCpuMemory);
  CHECK(step.step_seconds == Approx(6.1875));
  // DeepSpeed's 11 s less zinf's 6.1875 s: 4.8125 of the optimizer's 5 s hidden.
  CHECK(step.optimizer_hidden_seconds == Approx(4.8125));
  CHECK(step.overlapped);

  // A drive three times slower: NVMe 3 + 9 + 6 = 18 s over the step sets it, 11.8125 s beyond the
  // chain, waited for in the forward (2 of the passes' 6 s: +3.9375) and backward pass (+7.875);
  // the optimizer phase is still the last update, 0.1875 s. DeepSpeed: 2 + 4 + (9 + 6) = 21 s, so
  // 3 s of the optimizer's 15 are hidden.
  PhaseLoads slow_drive = hand_loads();
  for (const Phase phase : {Phase::kBackward, Phase::kOptimizerRead, Phase::kOptimizerWrite}) {
    slow_drive.at(phase)[kNvme] *= 3.0;
  }
  const ScheduledStep nvme_bound = schedule_step(slow_drive, options);
  CHECK(nvme_bound.step_seconds == Approx(18.0));
  CHECK(nvme_bound.forward.seconds == Approx(5.9375));
  CHECK(nvme_bound.forward.bottleneck == kNvme);
  CHECK(nvme_bound.backward.seconds == Approx(11.875));
  CHECK(nvme_bound.backward.bottleneck == kNvme);
  CHECK(nvme_bound.optimizer.seconds == Approx(0.1875));
  CHECK(nvme_bound.optimizer.bottleneck == kCpuMemory);
  CHECK(nvme_bound.optimizer_hidden_seconds == Approx(3.0));

  // The CPU backend: the updates use the compute resource (CPU Adam between the backward pass's
  // operators), 1.6 s of it. The 7 of 8 sub-groups stepped during the backward lengthen it:
  // 4 + 1.4 = 5.4 s; the chain 2 + 5.4 + 1.6 / 8 = 7.6 against compute 2 + 4 + 1.6 = 7.6 and NVMe 6.
  PhaseLoads cpu_backend = hand_loads();
  cpu_backend.at(Phase::kOptimizerUpdate)[kCpuMemory] = 0.0;
  cpu_backend.at(Phase::kOptimizerUpdate)[kCompute] = 1.6;
  const ScheduledStep on_cores = schedule_step(cpu_backend, options);
  CHECK(on_cores.backward.seconds == Approx(5.4));
  CHECK(on_cores.backward.bottleneck == kCompute);
  CHECK(on_cores.optimizer.seconds == Approx(0.2));
  CHECK(on_cores.step_seconds == Approx(7.6));

  // A backward pass long enough to hide everything but the tail: compute 20 s.
  PhaseLoads long_backward = hand_loads();
  long_backward.at(Phase::kBackward)[kCompute] = 20.0;
  const ScheduledStep hidden = schedule_step(long_backward, options);
  // max(22, 6) = 22 vs 2 + 20 + 0.1875: the tail sets it, 0.1875 s after the backward.
  CHECK(hidden.optimizer.seconds == Approx(0.1875));
  CHECK(hidden.step_seconds == Approx(2.0 + 20.0 + 0.1875));
  CHECK(hidden.optimizer_hidden_seconds == Approx(5.0 - 0.1875));
}

TEST_CASE("the gradient norm runs after the backward pass: exposed in both schedules, before the last update") {
  PhaseLoads loads = hand_loads();
  loads.at(Phase::kGradientNorm)[kCpuMemory] = 0.5;
  // zinf: per resource compute 6, PCIe 4, NVMe 6, CPU 1.5 + 0.5 = 2 -> 6. The chain: 2 + 4 + the norm
  // 0.5 + the last update 1.5 / 8 = 6.6875, the optimizer phase 0.6875 on CPU memory.
  const ScheduledStep zinf = schedule_step(loads, ScheduleOptions{});
  CHECK(zinf.step_seconds == Approx(6.6875));
  CHECK(zinf.optimizer.seconds == Approx(0.6875));
  CHECK(zinf.optimizer.bottleneck == kCpuMemory);
  // DeepSpeed: the optimizer phase max(NVMe 3 + 2, CPU 1.5 + 0.5) = 5, step 11; 4.3125 s hidden.
  CHECK(zinf.optimizer_hidden_seconds == Approx(11.0 - 6.6875));
  ScheduleOptions deepspeed;
  deepspeed.schedule = Schedule::kDeepSpeed;
  CHECK(schedule_step(loads, deepspeed).step_seconds == Approx(11.0));
  // A norm longer than the drive's share: CPU 1.5 + 6 = 7.5 is the optimizer phase alone.
  loads.at(Phase::kGradientNorm)[kCpuMemory] = 6.0;
  CHECK(schedule_step(loads, deepspeed).optimizer.seconds == Approx(7.5));
  CHECK(schedule_step(loads, deepspeed).optimizer.bottleneck == kCpuMemory);
}

TEST_CASE("zinf with clipping or fp16 loss scaling: the updates wait for the norm, reads and writes overlap") {
  ScheduleOptions options;
  options.norm_before_step = true;
  const ScheduledStep step = schedule_step(hand_loads(), options);
  // Backward + reads: compute 4, PCIe 3, NVMe 1 + 3 = 4 -> 4. Then the updates: CPU 1.5 (the writes
  // go behind). The step: max(chain 2 + 4 + 1.5, everything per resource 6) = 7.5.
  CHECK(step.backward.seconds == 4.0);
  CHECK(step.optimizer.seconds == 1.5);
  CHECK(step.optimizer.bottleneck == kCpuMemory);
  CHECK(step.step_seconds == 2.0 + 4.0 + 1.5);
  CHECK(step.optimizer_hidden_seconds == 3.5);
  CHECK_FALSE(step.overlapped);

  // A drive three times slower: its 18 s over the step set it, 12 s after the backward pass.
  PhaseLoads slow_drive = hand_loads();
  for (const Phase phase : {Phase::kBackward, Phase::kOptimizerRead, Phase::kOptimizerWrite}) {
    slow_drive.at(phase)[kNvme] *= 3.0;
  }
  const ScheduledStep nvme_bound = schedule_step(slow_drive, options);
  // Backward + reads: NVMe 3 + 9 = 12 -> 12; chain 2 + 12 + 1.5 = 15.5 < 18.
  CHECK(nvme_bound.backward.seconds == Approx(12.0));
  CHECK(nvme_bound.step_seconds == Approx(18.0));
  CHECK(nvme_bound.optimizer.bottleneck == kNvme);
}

TEST_CASE("zinf with the norm first: reads beyond the pipeline's sets follow the updates") {
  ScheduleOptions options;
  options.norm_before_step = true;
  options.read_ahead = 0.25;  // the sets hold a quarter of the optimizer states
  const ScheduledStep step = schedule_step(hand_loads(), options);
  // Backward + a quarter of the reads: compute 4, PCIe 3, NVMe 1 + 0.75 -> 4 (compute). Then the
  // updates with the other reads and the writes they wait for: NVMe 0.75 (3 + 2) = 3.75, CPU 1.5
  // -> 3.75 (NVMe); chain 2 + 4 + 3.75 = 9.75 > 6.
  CHECK(step.backward.seconds == 4.0);
  CHECK(step.optimizer.seconds == Approx(3.75));
  CHECK(step.optimizer.bottleneck == kNvme);
  CHECK(step.step_seconds == Approx(2.0 + 4.0 + 3.75));
  // DeepSpeed's 11 s less 9.75 s: the 0.75 s of reads taken ahead and the 0.5 s of writes behind.
  CHECK(step.optimizer_hidden_seconds == Approx(1.25));

  // No read ahead at all: the whole optimizer phase after the backward pass, as DeepSpeed's.
  options.read_ahead = 0.0;
  CHECK(schedule_step(hand_loads(), options).step_seconds == Approx(11.0));
  // read_ahead does not touch the step planned without the norm.
  options.norm_before_step = false;
  CHECK(schedule_step(hand_loads(), options).step_seconds == Approx(6.1875));
}

TEST_CASE("an optimizer on the device runs after the backward pass in both schedules") {
  ScheduleOptions options;
  options.optimizer_on_host = false;
  const ScheduledStep zinf = schedule_step(hand_loads(), options);
  options.schedule = Schedule::kDeepSpeed;
  const ScheduledStep deepspeed = schedule_step(hand_loads(), options);
  CHECK(zinf.step_seconds == 11.0);
  CHECK(deepspeed.step_seconds == 11.0);
}

TEST_CASE("schedule names round-trip, unknown names are refused") {
  for (Schedule s : kAllSchedules) CHECK(schedule_from_name(schedule_name(s)) == s);
  CHECK_FALSE(schedule_from_name("megatron").has_value());
}

PlanInput one_t_input(std::int64_t nodes, Schedule schedule) {
  PlanInput input;
  input.hardware = load_hardware_profile("dgx2-v100").value();
  input.hardware.nodes = nodes;
  input.requested_params = 1'000'000'000'000ULL;
  input.shape = shape_for_params(input.requested_params, kDefaultVocab, input.training.seq).value();
  input.schedule = schedule;
  return input;
}

// deepspeed and zinf steps recomputed from the plan's per-phase loads with the closed forms.
struct HandSteps {
  double deepspeed = 0;
  double zinf = 0;
};
HandSteps hand_steps(const StepModel& step, bool optimizer_on_host) {
  const auto busiest_of = [](const ResourceSeconds& a) {
    double m = 0;
    for (double v : a) m = std::max(m, v);
    return m;
  };
  const PhaseLoads& p = step.phases;
  ResourceSeconds opt{}, all{};
  for (std::size_t r = 0; r < kScheduleResources; ++r) {
    opt[r] = p.at(Phase::kOptimizerRead)[r] + p.at(Phase::kOptimizerUpdate)[r] + p.at(Phase::kOptimizerWrite)[r];
    all[r] = p.at(Phase::kForward)[r] + p.at(Phase::kBackward)[r] + opt[r];
  }
  const double fwd = busiest_of(p.at(Phase::kForward));
  const double bwd = busiest_of(p.at(Phase::kBackward));
  HandSteps out;
  out.deepspeed = fwd + bwd + busiest_of(opt);
  // zinf: max(max over resources of forward + backward + read + update + write, forward + backward
  // + update / sub-groups), as docs/plan.md states it (8 sub-groups; the update uses no GPU compute).
  CHECK(p.at(Phase::kOptimizerUpdate)[0] == 0.0);
  out.zinf = optimizer_on_host ? std::max(busiest_of(all), fwd + bwd + busiest_of(p.at(Phase::kOptimizerUpdate)) / 8.0)
                               : out.deepspeed;
  return out;
}

TEST_CASE("1T on DGX-2 nodes: TFLOP/s per GPU rises from 4 to 32 nodes under DeepSpeed's schedule") {
  double previous = 0;
  for (std::int64_t nodes : {4, 8, 16, 32}) {
    INFO(nodes << " nodes");
    const Result<Plan> plan = make_plan(one_t_input(nodes, Schedule::kDeepSpeed));
    REQUIRE(plan.is_ok());
    REQUIRE(plan->feasible);
    const double tflops = plan->prediction.achieved_flops_per_gpu;
    CHECK(tflops > previous);  // strictly rising: the paper's super-linear scaling
    previous = tflops;
    // The step and the zinf gain against the closed forms on the plan's own phase loads.
    const bool on_host = plan->placement[spec::StateKind::kOptimizer] != spec::Tier::kDevice;
    const HandSteps hand = hand_steps(plan->step, on_host);
    CHECK(plan->prediction.step_seconds == Approx(hand.deepspeed));
    CHECK(plan->prediction.step_seconds_other_schedule == Approx(hand.zinf));
    CHECK(hand.zinf <= hand.deepspeed);
    // At 4 nodes the optimizer states are on NVMe and the optimizer phase is long: zinf gains.
    if (nodes == 4) CHECK(hand.deepspeed / hand.zinf > 1.2);
    // The FLOPs per GPU are fixed (same micro-batch); only the step shrinks.
    CHECK(tflops == Approx(plan->memory.flops_per_gpu_per_step / hand.deepspeed));
  }
}

TEST_CASE("no activation checkpointing: 6 FLOPs per parameter per token, two parameter loads, no checkpoints") {
  const spec::ModelShape shape = spec::gpt_like_shape(12, 768, 12, 50257, 1024);
  spec::TrainingSpec training;
  training.activation_checkpointing = false;
  const ModelMemory memory = model_memory(shape, training);
  const double p = static_cast<double>(memory.params);
  // 2 * 3 * 1 * 1024 * P: forward 2, backward 4, no recompute.
  CHECK(memory.flops_per_gpu_per_step == Approx(6.0 * 1024 * p));
  CHECK(memory.forward_flops_per_gpu == Approx(2.0 * 1024 * p));
  CHECK(memory.activation_checkpoint_bytes_per_gpu == 0.0);
  // Every layer's activations are working memory: bsz * seq * nl * (16 * hd + 2 * heads * seq)
  //   = 1 * 1024 * 12 * (12,288 + 24,576).
  CHECK(memory.activation_working_bytes_per_gpu == Approx(1024.0 * 12 * (16 * 768 + 2 * 12 * 1024)));
  CHECK(memory.parameter_loads() == 2.0);
  // With checkpointing: 8, three loads, one block recomputed at a time.
  training.activation_checkpointing = true;
  const ModelMemory checkpointed = model_memory(shape, training);
  CHECK(checkpointed.flops_per_gpu_per_step == Approx(8.0 * 1024 * p));
  CHECK(checkpointed.parameter_loads() == 3.0);
  CHECK(checkpointed.activation_working_bytes_per_gpu == Approx(1024.0 * 1 * (16 * 768 + 2 * 12 * 1024)));

  // ZeRO-3 with parameters in CPU memory on one GPU: host->GPU carries the parameters twice (2 B each).
  HardwareProfile hw = load_hardware_profile("dgx2-v100").value();
  hw.node.gpus = 1;
  spec::StatePlacement placement;
  placement.tiers = {spec::Tier::kCpu, spec::Tier::kCpu, spec::Tier::kCpu, spec::Tier::kDevice};
  const StepModel step = model_step(memory, strategy_rules(Strategy::kZero3), placement, hw,
                                    gpu_compute_rate(hw, MathMode::kFp16).value(), 0.9);
  CHECK(step.load(Resource::kPcieHostToDevice).bytes == Approx(2.0 * 2.0 * p));
  CHECK(step.group(TrafficGroup::kActivations).arithmetic_intensity == 0.0);
  CHECK(step.group(TrafficGroup::kActivations).required_bandwidth == 0.0);
  // Compute: 6 * 1024 * P at 70 TFLOP/s, split 2 : 4 between forward and backward.
  CHECK(step.phases.at(Phase::kForward)[kCompute] == Approx(2.0 * 1024 * p / 70e12));
  CHECK(step.phases.at(Phase::kBackward)[kCompute] == Approx(4.0 * 1024 * p / 70e12));
}

}  // namespace
}  // namespace zinf::planner
