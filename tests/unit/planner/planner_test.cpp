// Placement search and make_plan(): the paper's headline cases on a DGX-2 (a 1T model on one node
// only with NVMe; ZeRO-3 alone needs many nodes), a small model staying on the GPU, input errors,
// and footprint() arithmetic worked out by hand.
#include "planner/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "libengine/spec/model_shape.h"
#include "planner/hardware_profile.h"
#include "planner/placement.h"
#include "planner/shape_rule.h"
#include "tests/catch.h"

namespace zinf::planner {
namespace {

using spec::StateKind;
using spec::Tier;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGpt2Params = 124439808.0;

HardwareProfile dgx2() { return load_hardware_profile("dgx2-v100").value(); }

PlanInput input_for(const spec::ModelShape& shape, Strategy strategy) {
  PlanInput input;
  input.shape = shape;
  input.model_source = "test";
  input.hardware = dgx2();
  input.strategy = strategy;
  return input;  // seq 1024, micro-batch 1, ci 1, tiling 1, bf16, paper accounting
}

spec::ModelShape one_trillion() { return shape_for_params(1'000'000'000'000ULL, 50257, 1024).value(); }
spec::ModelShape gpt2() { return spec::gpt_like_shape(12, 768, 12, 50257, 1024); }

// The single-change suggestion that changes `changed_field`, if any.
const FieldChange* find_suggestion(const Plan& plan, std::string_view changed_field) {
  const auto it = std::find_if(plan.suggestions.begin(), plan.suggestions.end(), [&](const Suggestion& s) {
    return s.changes.size() == 1 && s.changes.front().field == changed_field;
  });
  return it == plan.suggestions.end() ? nullptr : &it->changes.front();
}

TEST_CASE("a 1T model fits one DGX-2 under ZeRO-Infinity only with NVMe") {
  // 1T parameters x 20 bytes = 20 TB of model states. One DGX-2 has 16 x 32 GiB = 550 GB of GPU
  // memory and 1.5 TB of CPU memory, so the 16 TB of optimizer states can only go to the 28 TB of NVMe.
  const Result<Plan> plan = make_plan(input_for(one_trillion(), Strategy::kAuto));
  REQUIRE(plan.is_ok());
  REQUIRE(plan->feasible);
  CHECK(plan->placement[StateKind::kOptimizer] == Tier::kNvme);
  CHECK(plan->placement[StateKind::kOptimizer] != Tier::kDevice);
  // 2 TB of half parameters fits neither 16 GPUs (125 GB each) nor 1.5 TB of CPU memory.
  CHECK(plan->placement[StateKind::kParams] == Tier::kNvme);
  CHECK(plan->footprint.fits());
  CHECK(plan->footprint.nvme.used_bytes >= 18e12);  // at least params + optimizer: 18 B/param
  CHECK(plan->footprint.nvme.used_bytes <= 28e12);
  CHECK(plan->prediction.step_seconds > 0);
  CHECK(plan->suggestions.empty());
  // The note about the optimizer on NVMe is there.
  CHECK(std::any_of(plan->notes.begin(), plan->notes.end(),
                    [](const std::string& note) { return note.find("NVMe") != std::string::npos; }));
}

TEST_CASE("a 1T model under ZeRO-3 on one DGX-2 is infeasible and suggests more nodes") {
  const spec::ModelShape shape = one_trillion();
  const Result<Plan> plan = make_plan(input_for(shape, Strategy::kZero3));
  REQUIRE(plan.is_ok());
  CHECK_FALSE(plan->feasible);
  CHECK(plan->prediction.step_seconds == 0.0);
  CHECK(plan->bottleneck.find("does not fit") == 0);
  const FieldChange* nodes = find_suggestion(*plan, field::kNodes);
  REQUIRE(nodes != nullptr);

  // By hand: each GPU holds 20*P/(16*n) of states plus its checkpoints (2*seq*hd*nl), the largest
  // operator's half params + grads (16*hd^2) and the activation working memory
  // (seq*(16*hd + 2*heads*seq)), within 32 GiB.
  const double p = static_cast<double>(spec::count_parameters(shape).total);
  const double hd = static_cast<double>(shape.hidden);
  const double nl = static_cast<double>(shape.layers);
  const double heads = static_cast<double>(shape.heads);
  const double working = 2.0 * 1024 * hd * nl + 16.0 * hd * hd + 1024.0 * (16.0 * hd + 2.0 * heads * 1024);
  const double room = 32.0 * kGiB - working;
  REQUIRE(room > 0);
  const auto expected_nodes = static_cast<std::int64_t>(std::ceil(20.0 * p / (16.0 * room)));
  // Around 1T * 20 B / 16 / ~18 GB ~ 70 nodes.
  CHECK(expected_nodes > 50);
  CHECK(expected_nodes < 100);
  CHECK(nodes->value == std::to_string(expected_nodes));
}

TEST_CASE("GPT-2 small stays entirely on the GPU and is compute-bound") {
  const Result<Plan> plan = make_plan(input_for(gpt2(), Strategy::kAuto));
  REQUIRE(plan.is_ok());
  REQUIRE(plan->feasible);
  for (StateKind kind : spec::kAllStateKinds) {
    INFO(spec::state_kind_name(kind));
    CHECK(plan->placement[kind] == Tier::kDevice);
  }
  CHECK(plan->step.bottleneck == Resource::kCompute);
  CHECK(plan->bottleneck.find("compute-bound") == 0);
  // Compute = 8 * 1024 * 124,439,808 / 70e12 = 14.563 ms: the whole step if every transfer hid.
  const double compute = 8.0 * 1024 * kGpt2Params / 70e12;
  CHECK(plan->prediction.compute_seconds == Approx(compute));
  CHECK(plan->prediction.step_seconds_full_overlap == Approx(compute));
  // The optimizer on the GPU steps after the backward pass in both schedules: each GPU streams its
  // 1/16 slice of the 16 B/param optimizer states through HBM once each way,
  // 2 * 16 * 124,439,808 / 16 / 900e9 = 0.2765 ms, after the 14.563 ms of compute.
  const double optimizer = 2.0 * 16.0 * kGpt2Params / 16.0 / 900e9;
  const double step = compute + optimizer;
  CHECK(plan->prediction.step_seconds == Approx(step));
  CHECK(plan->prediction.step_seconds_other_schedule == Approx(step));
  CHECK(plan->prediction.efficiency == Approx(compute / step));
  // 16 GPUs x 1024 tokens per step.
  CHECK(plan->prediction.tokens_per_second == Approx(16.0 * 1024 / step));
  CHECK(plan->prediction.achieved_flops_per_gpu == Approx(70e12 * compute / step));
  // MFU counts 6 of the 8 FLOPs/param/token against the 125 TFLOP/s peak: 0.75 * 70 / 125 = 0.42
  // of the compute share of the step.
  CHECK(plan->prediction.mfu == Approx(0.42 * compute / step));
}

TEST_CASE("a pinned placement the strategy forbids is an InvalidArgument naming the placement field") {
  PlanInput input = input_for(gpt2(), Strategy::kZero3);
  input.pinned[static_cast<std::size_t>(StateKind::kOptimizer)] = Tier::kNvme;
  const Result<Plan> plan = make_plan(input);
  REQUIRE_FALSE(plan.is_ok());
  CHECK(plan.status().code() == ErrorCode::kInvalidArgument);
  // The planner names its own fields; a caller's namer (the CLI's flags) replaces every one of them.
  CHECK(plan.status().message() == "placement: optimizer=nvme is not allowed by strategy zero3");
  const FieldNamer shout = [](std::string_view name) { return fmt::format("<{}>", name); };
  CHECK(make_plan(input, shout).status().message() == "<placement>: optimizer=nvme is not allowed by <strategy> zero3");

  PlanInput no_nvme = input_for(gpt2(), Strategy::kAuto);
  no_nvme.hardware.node.nvme_capacity_bytes = 0;
  no_nvme.pinned[static_cast<std::size_t>(StateKind::kParams)] = Tier::kNvme;
  const Result<Plan> without = make_plan(no_nvme);
  REQUIRE_FALSE(without.is_ok());
  CHECK(without.status().code() == ErrorCode::kInvalidArgument);
  CHECK(without.status().message() ==
        "placement: params=nvme but the hardware has no NVMe (capacity 0); set hardware.nvme");
}

TEST_CASE("an allowed pin is obeyed and the rest is searched") {
  PlanInput input = input_for(gpt2(), Strategy::kAuto);
  input.pinned[static_cast<std::size_t>(StateKind::kOptimizer)] = Tier::kCpu;
  const Result<Plan> plan = make_plan(input);
  REQUIRE(plan.is_ok());
  REQUIRE(plan->feasible);
  CHECK(plan->placement[StateKind::kOptimizer] == Tier::kCpu);
  CHECK(plan->placement[StateKind::kParams] == Tier::kDevice);
}

TEST_CASE("target efficiency outside (0, 1) is an InvalidArgument") {
  for (double target : {0.0, 1.0, -0.5, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    INFO(target);
    PlanInput input = input_for(gpt2(), Strategy::kAuto);
    input.target_efficiency = target;
    const Result<Plan> plan = make_plan(input);
    REQUIRE_FALSE(plan.is_ok());
    CHECK(plan.status().code() == ErrorCode::kInvalidArgument);
    CHECK(plan.status().message().find("target_efficiency:") == 0);
  }
}

TEST_CASE("invalid shape, training or hardware is an InvalidArgument naming the field") {
  PlanInput input = input_for(gpt2(), Strategy::kAuto);
  input.training.micro_batch = 0;
  CHECK(make_plan(input).status().message().find("training.micro_batch") == 0);
  input = input_for(gpt2(), Strategy::kAuto);
  input.shape.layers = -1;
  CHECK(make_plan(input).status().message().find("model.layers") == 0);
  input = input_for(gpt2(), Strategy::kAuto);
  input.hardware.node.gpus = 0;
  CHECK(make_plan(input).status().message().find("hw.node.gpus") == 0);
}

TEST_CASE("footprint: device tier per GPU is states / G plus working memory") {
  const spec::TrainingSpec training;
  const ModelMemory memory = model_memory(gpt2(), training);
  const HardwareProfile hw = dgx2();
  spec::StatePlacement on_gpu;  // all device

  // ZeRO-3, all on GPU, 16 GPUs:
  //   states      20 * 124,439,808 / 16                = 155,549,760
  //   checkpoints 2 * 1024 * 768 * 12                  =  18,874,368
  //   MSWM        4 bytes * 50257 * 768 (embedding)    = 154,389,504
  //   AWM         1024 * (16 * 768 + 2 * 12 * 1024)    =  37,748,736
  //   total                                            = 366,562,368
  Footprint fp = footprint(memory, strategy_rules(Strategy::kZero3), on_gpu, hw);
  CHECK(fp.device.used_bytes == Approx(366562368.0));
  CHECK(fp.device.capacity_bytes == 32.0 * kGiB);
  CHECK(fp.cpu.used_bytes == 0.0);
  CHECK(fp.nvme.used_bytes == 0.0);
  CHECK(fp.fits());
  CHECK(fp.device.items.size() == 6);  // four state kinds + two working memories

  // Data parallel: every GPU holds all 20 B/param; no gather buffer (params are resident):
  //   2,488,796,160 + 18,874,368 + 37,748,736 = 2,545,419,264.
  fp = footprint(memory, strategy_rules(Strategy::kDataParallel), on_gpu, hw);
  CHECK(fp.device.used_bytes == Approx(2545419264.0));

  // ZeRO-Infinity CPU offload with checkpoints on CPU too: per node 20 B/param + 16 GPUs' checkpoints
  //   = 2,488,796,160 + 16 * 18,874,368 = 2,790,786,048; the GPU keeps only working memory
  //   154,389,504 + 37,748,736 = 192,138,240.
  spec::StatePlacement on_cpu;
  for (StateKind kind : spec::kAllStateKinds) on_cpu[kind] = Tier::kCpu;
  fp = footprint(memory, strategy_rules(Strategy::kInfinityCpu), on_cpu, hw);
  CHECK(fp.cpu.used_bytes == Approx(2790786048.0));
  CHECK(fp.device.used_bytes == Approx(192138240.0));
  CHECK(fp.cpu.capacity_bytes == 1.5e12);

  // The same over 4 nodes (64 GPUs): the partitioned model states per node are a quarter, but each
  // node still holds its own 16 GPUs' checkpoints: 2,488,796,160 / 4 + 16 * 18,874,368
  //   = 622,199,040 + 301,989,888 = 924,188,928.
  HardwareProfile four = hw;
  four.nodes = 4;
  fp = footprint(memory, strategy_rules(Strategy::kInfinityCpu), on_cpu, four);
  CHECK(fp.cpu.used_bytes == Approx(924188928.0));
  CHECK(fp.device.used_bytes == Approx(192138240.0));

  // ZeRO-Offload: replicated half params on every GPU (2P) + checkpoints + AWM, grads and optimizer
  // on CPU once per node (18P = 2,239,916,544).
  spec::StatePlacement offload = on_gpu;
  offload[StateKind::kGrads] = Tier::kCpu;
  offload[StateKind::kOptimizer] = Tier::kCpu;
  fp = footprint(memory, strategy_rules(Strategy::kZeroOffload), offload, hw);
  CHECK(fp.device.used_bytes == Approx(2 * kGpt2Params + 18874368.0 + 37748736.0));
  CHECK(fp.cpu.used_bytes == Approx(18 * kGpt2Params));
}

TEST_CASE("footprint fractions and fit") {
  TierUsage usage;
  usage.used_bytes = 3;
  usage.capacity_bytes = 2;
  CHECK_FALSE(usage.fits());
  CHECK(usage.fraction() == 1.5);
  usage.capacity_bytes = 0;
  CHECK(usage.fraction() > 1e29);
  usage.used_bytes = 0;
  CHECK(usage.fraction() == 0.0);
  CHECK(usage.fits());
}

TEST_CASE("cluster_state_bytes counts replicas") {
  const ModelMemory memory = model_memory(gpt2(), spec::TrainingSpec{});
  const StrategyRules dp = strategy_rules(Strategy::kDataParallel);
  const StrategyRules z3 = strategy_rules(Strategy::kZero3);
  CHECK(cluster_state_bytes(StateKind::kParams, memory, dp, 16) == Approx(16 * 2 * kGpt2Params));
  CHECK(cluster_state_bytes(StateKind::kParams, memory, z3, 16) == Approx(2 * kGpt2Params));
  CHECK(cluster_state_bytes(StateKind::kOptimizer, memory, dp, 16) == Approx(16 * 16 * kGpt2Params));
  CHECK(cluster_state_bytes(StateKind::kActivations, memory, z3, 16) == Approx(16 * 18874368.0));
}

TEST_CASE("GPU working memory larger than a GPU is explained as such") {
  // hd 65536: 16 * 65536^2 = 64 GiB of model-state working memory, over a 32 GiB V100, whatever
  // the placement; tiling 4 brings it to 16 GiB.
  const spec::ModelShape shape = spec::gpt_like_shape(2, 65536, 512, 50257, 1024);
  const Result<Plan> plan = make_plan(input_for(shape, Strategy::kAuto));
  REQUIRE(plan.is_ok());
  CHECK_FALSE(plan->feasible);
  CHECK(plan->bottleneck.find("GPU working memory alone") != std::string::npos);
  const FieldChange* tiling = find_suggestion(*plan, field::kTiling);
  REQUIRE(tiling != nullptr);
  // Working memory: 16 * hd^2 / t + AWM, AWM = 1024 * (16 * 65536 + 2 * 512 * 1024) = 2 GiB; the states
  // go to CPU/NVMe. 64/t + 2 <= 32 -> t >= 3 (64/3 = 21.3 GiB + 2 GiB + checkpoints on the host).
  CHECK(tiling->value == "3");
}

// Issue 24 §5: the planner charged every precision at the one peak a profile had, the bf16
// tensor-core rate, so an fp32 H100 plan reported 461 TFLOP/s per GPU and beat bf16.
TEST_CASE("an fp32 plan computes at the fp32 rate and is slower than bf16, TF32 only when asked") {
  PlanInput input = input_for(shape_for_params(7'000'000'000ULL, 50257, 1024).value(), Strategy::kAuto);
  input.hardware = load_hardware_profile("dgx-h100").value();
  const Plan bf16 = make_plan(input).value();
  input.training.precision = DType::kF32;
  input.training.accounting = spec::StateAccounting::kFp32;
  const Plan fp32 = make_plan(input).value();
  input.fp32_matmul_tf32 = true;
  const Plan tf32 = make_plan(input).value();
  REQUIRE((bf16.feasible && fp32.feasible && tf32.feasible));
  CHECK(bf16.rate.mode == MathMode::kBf16);
  CHECK(fp32.rate.mode == MathMode::kFp32);
  CHECK(tf32.rate.mode == MathMode::kTf32);
  CHECK(fp32.rate.peak_flops == 67e12);
  CHECK(fp32.prediction.achieved_flops_per_gpu <= 67e12);
  CHECK(fp32.prediction.step_seconds > tf32.prediction.step_seconds);
  CHECK(tf32.prediction.step_seconds > bf16.prediction.step_seconds);
  // fp32 compute time is the same FLOPs at the fp32 achievable rate (71% of 67 TFLOP/s, the
  // fraction the profile's bf16 figures give).
  CHECK(fp32.prediction.compute_seconds ==
        Approx(fp32.memory.flops_per_gpu_per_step / (67e12 * 700e12 / 989.4e12)).epsilon(1e-12));
  // tf32 applies to fp32 training only.
  input.training.precision = DType::kBF16;
  input.training.accounting = spec::StateAccounting::kPaper;
  CHECK(make_plan(input).status().message() == "precision: tf32 applies to fp32 training, not bf16");
}

// Issue 24 §5: across nodes each GPU was charged a 1/16 share of the DGX-2's NICs for every
// collective, so a 1B model was predicted 6x slower on two nodes than on one, and `auto` chose
// ZeRO-Offload for a model that fits the GPUs.
TEST_CASE("a 1B model on two DGX-2 nodes is not several times slower than on one and stays on the GPU") {
  PlanInput input = input_for(shape_for_params(1'000'000'000ULL, 50257, 1024).value(), Strategy::kAuto);
  const Plan one = make_plan(input).value();
  input.hardware.nodes = 2;
  const Plan two = make_plan(input).value();
  REQUIRE((one.feasible && two.feasible));
  // Per GPU the work is the same; collectives run at min(NVLink 120, NICs 90) = 90 GB/s busbw
  // instead of 120, so the step grows by at most 120/90.
  CHECK(two.prediction.step_seconds <= one.prediction.step_seconds * 120.0 / 90.0 * (1 + 1e-9));
  for (const Plan* plan : {&one, &two}) {
    for (StateKind kind : {StateKind::kParams, StateKind::kGrads, StateKind::kOptimizer})
      CHECK(plan->placement[kind] == Tier::kDevice);
  }
}

}  // namespace
}  // namespace zinf::planner
