// Bandwidth model: the paper's arithmetic intensities and efficiency formula (SC21 §4), and the
// per-resource step model on hand-built machines whose every byte and second is worked out in the
// comments from the rules documented in bandwidth_model.h / .cpp.
#include "planner/bandwidth_model.h"

#include <cmath>

#include "libengine/spec/model_shape.h"
#include "libengine/spec/state_placement.h"
#include "libengine/spec/training_spec.h"
#include "planner/memory_model.h"
#include "planner/strategy.h"
#include "tests/catch.h"

namespace zinf::planner {
namespace {

using spec::StateKind;
using spec::Tier;

// GPT-2 small under the paper accounting, seq 1024, micro-batch 1 (see memory_model_test.cpp):
//   P  = 124,439,808           Pb = Gb = 2P = 248,879,616     Ob = 16P = 1,991,036,928
//   A  = 2*1*1024*768*12 = 18,874,368 (checkpoints per GPU)  flops = 8*1024*P = 1,019,410,907,136
constexpr double kP = 124439808.0;
constexpr double kPb = 248879616.0;
constexpr double kGb = 248879616.0;
constexpr double kOb = 1991036928.0;
constexpr double kA = 18874368.0;
constexpr double kFlops = 1019410907136.0;

ModelMemory gpt2_memory() { return model_memory(spec::gpt_like_shape(12, 768, 12, 50257, 1024), spec::TrainingSpec{}); }

// Round numbers so every time below is a short division.
HardwareProfile hand_profile(std::int64_t nodes, std::int64_t gpus_per_node) {
  HardwareProfile hw;
  hw.name = "hand";
  hw.nodes = nodes;
  hw.node.gpus = gpus_per_node;
  hw.node.gpu.name = "hand gpu";
  hw.node.gpu.memory_bytes = 32'000'000'000ULL;
  hw.node.gpu.peak_flops[MathMode::kBf16] = 100e12;
  hw.node.gpu.achievable_flops[MathMode::kBf16] = 50e12;
  hw.node.gpu.memory_bandwidth = 1e12;  // HBM
  hw.node.cpu_memory_bytes = 1'000'000'000'000ULL;
  hw.node.cpu_memory_bandwidth = 100e9;
  hw.node.nvme_capacity_bytes = 10'000'000'000'000ULL;
  hw.node.nvme_read_bandwidth = 10e9;
  hw.node.nvme_write_bandwidth = 5e9;
  hw.node.pcie_bandwidth_per_gpu = 20e9;
  hw.node.gpu_link_bandwidth = 100e9;
  hw.node.network_bandwidth = 50e9;
  return hw;
}

// The bf16 rate every hand-built step below computes at: 50 TFLOP/s achievable.
ComputeRate bf16(const HardwareProfile& hw) { return gpu_compute_rate(hw, MathMode::kBf16).value(); }

spec::StatePlacement place(Tier params, Tier grads, Tier optimizer, Tier activations) {
  spec::StatePlacement placement;
  placement[StateKind::kParams] = params;
  placement[StateKind::kGrads] = grads;
  placement[StateKind::kOptimizer] = optimizer;
  placement[StateKind::kActivations] = activations;
  return placement;
}

TEST_CASE("arithmetic intensities are the paper's seq*bsz, seq*bsz/4 and 24*hd*ci") {
  CHECK(arithmetic_intensity_params_grads(1024, 1) == 1024.0);
  CHECK(arithmetic_intensity_params_grads(2048, 4) == 8192.0);
  CHECK(arithmetic_intensity_optimizer(1024, 1) == 256.0);
  CHECK(arithmetic_intensity_optimizer(2048, 4) == 2048.0);
  // 24 * 8192 * 1 = 196,608; 24 * 25600 * 2 = 1,228,800.
  CHECK(arithmetic_intensity_activations(8192, 1) == 196608.0);
  CHECK(arithmetic_intensity_activations(25600, 2) == 1228800.0);
}

TEST_CASE("efficiency reproduces the paper: 70 GB/s at bsz*seq 1024 and 70 TFLOP/s is just over 50%") {
  // 1024 * 70e9 / (1024 * 70e9 + 70e12) = 1024 / (1024 + 1000) = 1024 / 2024 = 0.505928853...
  const double e = efficiency(1024, 70e9, 70e12);
  CHECK(e == Approx(1024.0 / 2024.0).epsilon(1e-12));
  CHECK(e == Approx(0.5059).margin(5e-5));
  CHECK(e > 0.5);
  // No bandwidth, no progress; unbounded bandwidth approaches 1.
  CHECK(efficiency(1024, 0, 70e12) == 0.0);
  CHECK(efficiency(1024, 1e30, 70e12) == Approx(1.0));
}

TEST_CASE("bandwidth_for_efficiency inverts efficiency") {
  // 50%: ait * bw = peak -> bw = 70e12 / 1024 = 68,359,375,000.
  CHECK(bandwidth_for_efficiency(1024, 70e12, 0.5) == Approx(68359375000.0).epsilon(1e-12));
  // 90% for the optimizer (ait 256): bw = 0.9 * 70e12 / (256 * 0.1) = 2,460,937,500,000.
  CHECK(bandwidth_for_efficiency(256, 70e12, 0.9) == Approx(2.4609375e12).epsilon(1e-12));
  for (double target : {0.1, 0.5, 0.9, 0.99}) {
    for (double ait : {256.0, 1024.0, 196608.0}) {
      const double bw = bandwidth_for_efficiency(ait, 70e12, target);
      CHECK(efficiency(ait, bw, 70e12) == Approx(target).epsilon(1e-12));
    }
  }
  for (double bw : {1e9, 70e9, 3e12}) {
    CHECK(bandwidth_for_efficiency(1024, 70e12, efficiency(1024, bw, 70e12)) == Approx(bw).epsilon(1e-9));
  }
}

TEST_CASE("model_step: one GPU with everything on it is pure compute") {
  const ModelMemory memory = gpt2_memory();
  const StepModel step = model_step(memory, strategy_rules(Strategy::kAuto),
                                    place(Tier::kDevice, Tier::kDevice, Tier::kDevice, Tier::kDevice),
                                    hand_profile(1, 1), bf16(hand_profile(1, 1)), 0.9);
  // Compute: 1,019,410,907,136 / 50e12 = 0.02038821814272 s.
  CHECK(step.compute_seconds == Approx(kFlops / 50e12).epsilon(1e-12));
  CHECK(step.step_seconds == step.compute_seconds);
  CHECK(step.bottleneck == Resource::kCompute);
  for (Resource r : {Resource::kPcieHostToDevice, Resource::kPcieDeviceToHost, Resource::kCollectives,
                     Resource::kCpuMemory, Resource::kNvme}) {
    INFO(resource_name(r));
    CHECK(step.load(r).bytes == 0.0);
    CHECK(step.load(r).seconds == 0.0);
  }
  // The optimizer step streams its states through HBM once each way: 2 * Ob = 3,982,073,856 bytes,
  // 3.98 ms at 1 TB/s, well under compute.
  CHECK(step.load(Resource::kHbm).bytes == Approx(2 * kOb));
  CHECK(step.load(Resource::kHbm).seconds == Approx(2 * kOb / 1e12));
  CHECK(step.step_seconds_no_overlap == Approx(kFlops / 50e12 + 2 * kOb / 1e12));
  // Nothing crosses a link for parameters or checkpoints: those groups are at full efficiency.
  CHECK(step.group(TrafficGroup::kParamsAndGrads).seconds == 0.0);
  CHECK(step.group(TrafficGroup::kParamsAndGrads).efficiency == 1.0);
  CHECK(step.group(TrafficGroup::kActivations).efficiency == 1.0);
}

TEST_CASE("model_step: one GPU with every state in CPU memory") {
  const ModelMemory memory = gpt2_memory();
  const StepModel step =
      model_step(memory, strategy_rules(Strategy::kAuto), place(Tier::kCpu, Tier::kCpu, Tier::kCpu, Tier::kCpu),
                 hand_profile(1, 1), bf16(hand_profile(1, 1)), 0.9);
  // Host->GPU: the parameters three times (forward, recompute, backward) plus the checkpoints read
  // back in backward: 3 * 248,879,616 + 18,874,368 = 765,513,216 bytes.
  CHECK(step.load(Resource::kPcieHostToDevice).bytes == Approx(3 * kPb + kA));
  CHECK(step.load(Resource::kPcieHostToDevice).bytes == Approx(765513216.0));
  CHECK(step.load(Resource::kPcieHostToDevice).seconds == Approx(765513216.0 / 20e9));
  // GPU->host: the gradients once plus the checkpoints written in forward: 248,879,616 + 18,874,368.
  CHECK(step.load(Resource::kPcieDeviceToHost).bytes == Approx(267753984.0));
  // Across both directions the checkpoints move 2 * A, as the paper counts.
  CHECK(step.load(Resource::kPcieHostToDevice).bytes + step.load(Resource::kPcieDeviceToHost).bytes ==
        Approx(3 * kPb + kGb + 2 * kA));
  // CPU memory: params read 3x, grads written, optimizer read + written, checkpoints written + read:
  // 746,638,848 + 248,879,616 + 3,982,073,856 + 37,748,736 = 5,015,341,056 bytes.
  CHECK(step.load(Resource::kCpuMemory).bytes == Approx(5015341056.0));
  CHECK(step.load(Resource::kCpuMemory).seconds == Approx(5015341056.0 / 100e9));
  CHECK(step.load(Resource::kNvme).bytes == 0.0);
  CHECK(step.load(Resource::kCollectives).bytes == 0.0);  // one GPU: nothing to gather
  CHECK(step.load(Resource::kHbm).bytes == 0.0);          // the optimizer runs on the CPU
  // CPU memory (50.2 ms) is busier than PCIe h2d (38.3 ms) and compute (20.4 ms).
  CHECK(step.bottleneck == Resource::kCpuMemory);
  CHECK(step.step_seconds == Approx(0.05015341056));
  CHECK(step.step_seconds_no_overlap == Approx(kFlops / 50e12 + 0.05015341056));

  // Groups. Params + grads move 3Pb + Gb = 8P = 995,518,464 bytes per GPU; their busiest resource is
  // PCIe h2d for the 3Pb of parameter loads: 746,638,848 / 20e9 = 37.33 ms.
  const GroupTraffic& pg = step.group(TrafficGroup::kParamsAndGrads);
  CHECK(pg.bytes_per_gpu == Approx(8 * kP));
  CHECK(pg.arithmetic_intensity == Approx(1024.0));
  CHECK(pg.seconds == Approx(3 * kPb / 20e9));
  const double pg_bw = 8 * kP / (3 * kPb / 20e9);  // = 20e9 * 4/3
  CHECK(pg.effective_bandwidth == Approx(pg_bw));
  CHECK(pg.efficiency == Approx(1024 * pg_bw / (1024 * pg_bw + 50e12)));
  // 90% needs 0.9 * 50e12 / (1024 * 0.1) = 439,453,125,000 B/s.
  CHECK(pg.required_bandwidth == Approx(439453125000.0));
  // Optimizer: 2 * Ob through CPU memory at 100 GB/s, ait 256.
  const GroupTraffic& opt = step.group(TrafficGroup::kOptimizer);
  CHECK(opt.bytes_per_gpu == Approx(2 * kOb));
  CHECK(opt.arithmetic_intensity == Approx(256.0));
  CHECK(opt.seconds == Approx(2 * kOb / 100e9));
  CHECK(opt.effective_bandwidth == Approx(100e9));
  CHECK(opt.efficiency == Approx(256 * 100e9 / (256 * 100e9 + 50e12)));
  // Checkpoints: 2A per GPU, A each way over PCIe (0.94 ms), ait = 8*1024*P / (2A) = 2P / (768*12).
  const GroupTraffic& act = step.group(TrafficGroup::kActivations);
  CHECK(act.bytes_per_gpu == Approx(2 * kA));
  CHECK(act.arithmetic_intensity == Approx(2 * kP / (768.0 * 12.0)));
  CHECK(act.seconds == Approx(kA / 20e9));
}

TEST_CASE("model_step: one GPU with parameters, gradients and optimizer states on NVMe") {
  const ModelMemory memory = gpt2_memory();
  const StepModel step = model_step(memory, strategy_rules(Strategy::kInfinityNvme),
                                    place(Tier::kNvme, Tier::kNvme, Tier::kNvme, Tier::kCpu), hand_profile(1, 1),
                                    bf16(hand_profile(1, 1)), 0.9);
  // NVMe: params read 3x (3Pb), grads written (Gb), optimizer read (Ob) and written (Ob); CPU Adam
  // runs in CPU memory, so it also reads the gradients back (Gb) and writes the updated params (Pb):
  //   bytes   = 746,638,848 + 248,879,616 + 3,982,073,856 + 248,879,616 + 248,879,616 = 5,475,351,552
  //   seconds = 3Pb/10e9 + Gb/5e9 + Ob/10e9 + Ob/5e9 + Gb/10e9 + Pb/5e9
  //           = 0.0746638848 + 0.0497759232 + 0.1991036928 + 0.3982073856 + 0.0248879616 + 0.0497759232
  //           = 0.7964147712
  CHECK(step.load(Resource::kNvme).bytes == Approx(5475351552.0));
  CHECK(step.load(Resource::kNvme).seconds == Approx(0.7964147712));
  // CPU memory: every NVMe byte of the params/grads/optimizer streams passes through it twice (DMA
  // in, copy out), the optimizer's gradient read and parameter write once, and the checkpoints once
  // each way: 2*(3Pb + Gb + 2*Ob) + Gb + Pb + 2A = 9,955,184,640 + 497,759,232 + 37,748,736 = 10,490,692,608.
  CHECK(step.load(Resource::kCpuMemory).bytes == Approx(10490692608.0));
  CHECK(step.load(Resource::kPcieHostToDevice).bytes == Approx(3 * kPb + kA));
  CHECK(step.load(Resource::kPcieDeviceToHost).bytes == Approx(kGb + kA));
  CHECK(step.bottleneck == Resource::kNvme);
  CHECK(step.step_seconds == Approx(0.7964147712));
}

TEST_CASE("model_step: collectives inside a node and across nodes") {
  const ModelMemory memory = gpt2_memory();
  const spec::StatePlacement on_gpu = place(Tier::kDevice, Tier::kDevice, Tier::kDevice, Tier::kDevice);

  // ZeRO-3, 1 node x 4 GPUs: three all-gathers of the parameters and one reduce-scatter of the
  // gradients, each GPU receiving (G-1)/G = 3/4 of the data: (3Pb + Gb) * 3/4 = 746,638,848 bytes
  // over NVLink at 100 GB/s. The optimizer slice streams through HBM: 2 * Ob / 4 per GPU.
  StepModel step =
      model_step(memory, strategy_rules(Strategy::kZero3), on_gpu, hand_profile(1, 4), bf16(hand_profile(1, 4)), 0.9);
  CHECK(step.load(Resource::kCollectives).bytes == Approx(746638848.0));
  CHECK(step.load(Resource::kCollectives).seconds == Approx(746638848.0 / 100e9));
  CHECK(step.load(Resource::kHbm).bytes == Approx(2 * kOb / 4));
  CHECK(step.load(Resource::kPcieHostToDevice).bytes == 0.0);

  // Plain data parallelism, same node: no gathers, an all-reduce of the gradients (2 * Gb * 3/4 =
  // 373,319,424) and every GPU steps the whole optimizer (2 * Ob through HBM).
  step = model_step(memory, strategy_rules(Strategy::kDataParallel), on_gpu, hand_profile(1, 4),
                    bf16(hand_profile(1, 4)), 0.9);
  CHECK(step.load(Resource::kCollectives).bytes == Approx(373319424.0));
  CHECK(step.load(Resource::kHbm).bytes == Approx(2 * kOb));

  // ZeRO-3 over 2 nodes x 4 GPUs: each GPU's link carries (3Pb + Gb) * 7/8 = 871,078,656 bytes (the
  // bus bytes of nccl-tests). NCCL runs one ring per NIC, each crossing the node boundary once, so
  // the node's NICs together (50 GB/s, below NVLink's 100) carry what one GPU sends along a ring:
  // busbw 50 GB/s, not a GPU's 12.5 GB/s share of the NICs (issue 24: that made 2 nodes 4x slower).
  step =
      model_step(memory, strategy_rules(Strategy::kZero3), on_gpu, hand_profile(2, 4), bf16(hand_profile(2, 4)), 0.9);
  CHECK(step.load(Resource::kCollectives).bytes == Approx(871078656.0));
  CHECK(step.load(Resource::kCollectives).seconds == Approx(871078656.0 / 50e9));
  // 17.4 ms of collectives hide behind 20.4 ms of compute.
  CHECK(step.bottleneck == Resource::kCompute);

  // Plain data parallelism on 3 nodes: the all-reduce's 2 * Gb * 11/12 bus bytes at the NICs' 50 GB/s.
  step = model_step(memory, strategy_rules(Strategy::kDataParallel), on_gpu, hand_profile(3, 4),
                    bf16(hand_profile(3, 4)), 0.9);
  CHECK(step.load(Resource::kCollectives).bytes == Approx(2 * kGb * 11 / 12));
  CHECK(step.load(Resource::kCollectives).seconds == Approx(2 * kGb * 11 / 12 / 50e9));
}

TEST_CASE("model_step: ZeRO-Offload sends each rank's updated slice up and all-gathers it") {
  const ModelMemory memory = gpt2_memory();
  // 1 node x 4 GPUs; params replicated on GPU, grads and optimizer on CPU, checkpoints on GPU.
  const StepModel step = model_step(memory, strategy_rules(Strategy::kZeroOffload),
                                    place(Tier::kDevice, Tier::kCpu, Tier::kCpu, Tier::kDevice), hand_profile(1, 4),
                                    bf16(hand_profile(1, 4)), 0.9);
  // GPU->host: each rank's gradient slice, Gb / 4 = 62,219,904.
  CHECK(step.load(Resource::kPcieDeviceToHost).bytes == Approx(kGb / 4));
  // host->GPU: each rank's updated parameter slice, Pb / 4 = 62,219,904.
  CHECK(step.load(Resource::kPcieHostToDevice).bytes == Approx(kPb / 4));
  // Collectives: reduce-scatter Gb * 3/4 plus the all-gather of updated params Pb * 3/4
  //   = 186,659,712 + 186,659,712 = 373,319,424.
  CHECK(step.load(Resource::kCollectives).bytes == Approx(373319424.0));
  // CPU memory per node: grads in (Gb), optimizer read + written (2 * Ob), params out (Pb)
  //   = 248,879,616 + 3,982,073,856 + 248,879,616 = 4,479,833,088.
  CHECK(step.load(Resource::kCpuMemory).bytes == Approx(4479833088.0));
}

TEST_CASE("group arithmetic intensities match the paper for a paper-shaped model") {
  // GPT-like, nl 100, hd 8192, 64 heads, seq 2048, micro-batch 2, ci 2 (divides nl), paper accounting.
  const spec::ModelShape shape = spec::gpt_like_shape(100, 8192, 64, 50257, 2048);
  spec::TrainingSpec training;
  training.seq = 2048;
  training.micro_batch = 2;
  training.ckpt_interval = 2;
  const ModelMemory memory = model_memory(shape, training);
  HardwareProfile hw = hand_profile(1, 16);
  const StepModel step = model_step(memory, strategy_rules(Strategy::kAuto),
                                    place(Tier::kCpu, Tier::kCpu, Tier::kNvme, Tier::kCpu), hw, bf16(hw), 0.9);
  // Params + grads: 8*bsz*seq*P / (3*2P + 2P) = bsz*seq = 4096, exactly.
  CHECK(step.group(TrafficGroup::kParamsAndGrads).arithmetic_intensity == Approx(4096.0).epsilon(1e-12));
  // Optimizer: 8*bsz*seq*P / (2 * 16P) = bsz*seq/4 = 1024, exactly.
  CHECK(step.group(TrafficGroup::kOptimizer).arithmetic_intensity == Approx(1024.0).epsilon(1e-12));
  // Checkpoints: 8*bsz*seq*P / (2 * 2*bsz*seq*hd*nl/ci) = 2*P*ci / (hd*nl) ~ 24*hd*ci = 393,216;
  // the exact P has 0.55% more than 12*nl*hd^2 (embeddings, biases, norms).
  const double act = step.group(TrafficGroup::kActivations).arithmetic_intensity;
  CHECK(act == Approx(24.0 * 8192 * 2).epsilon(0.01));
  CHECK(act > 24.0 * 8192 * 2);
  // The required bandwidths are the inverse of the paper's formula at the 90% target.
  CHECK(step.group(TrafficGroup::kParamsAndGrads).required_bandwidth == Approx(0.9 * 50e12 / (4096 * 0.1)));
  CHECK(step.group(TrafficGroup::kOptimizer).required_bandwidth == Approx(0.9 * 50e12 / (1024 * 0.1)));
}

TEST_CASE("resource and group names") {
  CHECK(resource_name(Resource::kPcieHostToDevice) == "pcie_h2d");
  CHECK(resource_name(Resource::kNvme) == "nvme");
  CHECK(resource_is_per_node(Resource::kCpuMemory));
  CHECK(resource_is_per_node(Resource::kNvme));
  CHECK_FALSE(resource_is_per_node(Resource::kPcieHostToDevice));
  CHECK(traffic_group_name(TrafficGroup::kOptimizer) == "optimizer");
}

}  // namespace
}  // namespace zinf::planner
