// Engine model: what the planner says `zinf train` allocates and moves, against the engine's own
// objects (the GPT model's activation buffers, parameter table and FLOP count, built here on the
// CPU device) and against budgets and traffic worked out by hand from partitioned_states.cpp's rules.
#include "planner/engine_model.h"

#include "libengine/device/cpu_device.h"
#include "libengine/model/gpt.h"
#include "tests/catch.h"

namespace zinf::planner {
namespace {

spec::Scenario small_scenario(bool checkpointing) {
  spec::Scenario s;
  s.shape = spec::gpt_like_shape(2, 64, 4, 128, 16);
  s.batch = 2;
  s.seq = 16;
  s.steps = 1;
  s.activation_checkpointing = checkpointing;
  return s;
}

TEST_CASE("the engine model's activation bytes, parameters and FLOPs are the GPT model's") {
  for (bool checkpointing : {false, true}) {
    for (const auto& [layers, hidden, heads, vocab, seq, batch] :
         {std::tuple{2, 64, 4, 128, 16, 2}, std::tuple{4, 256, 4, 512, 64, 8}, std::tuple{3, 96, 3, 1000, 24, 3}}) {
      INFO(layers << "x" << hidden << " vocab " << vocab << " checkpointing " << checkpointing);
      spec::Scenario scenario = small_scenario(checkpointing);
      scenario.shape = spec::gpt_like_shape(layers, hidden, heads, vocab, seq);
      scenario.seq = seq;
      scenario.batch = batch;
      auto device = device::make_cpu_device({});
      model::GptConfig config;
      config.shape = scenario.shape;
      config.batch = batch;
      config.seq = seq;
      config.activation_checkpointing = checkpointing;
      auto gpt = model::Gpt::create(config, *device);
      REQUIRE(gpt.is_ok());
      CHECK(model_activation_bytes(scenario, 4) == static_cast<double>(gpt.value()->activation_bytes()));
      const model::ParamTable& table = gpt.value()->params();
      const std::vector<std::int64_t> numels = parameter_numels(scenario.shape);
      REQUIRE(numels.size() == static_cast<std::size_t>(table.size()));
      for (model::ParamId id = 0; id < table.size(); ++id) {
        CHECK(numels[static_cast<std::size_t>(id)] == static_cast<std::int64_t>(table[id].numel));
      }
      // The model counts forward + backward (3 forwards); the recompute adds the forward of every
      // block but the last: (layers - 1) / layers of the forward less the head's 2·B·T·V·C.
      const double forward = gpt.value()->flops_per_step() / 3.0;
      const double head = 2.0 * batch * seq * vocab * hidden;
      const double recompute = checkpointing ? (forward - head) * (layers - 1) / layers : 0.0;
      CHECK(scenario_flops_per_step(scenario) == Approx(gpt.value()->flops_per_step() + recompute));
      const ForwardFlops fwd = scenario_forward_flops(scenario);
      CHECK(layers * fwd.block + fwd.head == Approx(forward));
      CHECK(fwd.head == Approx(head));
    }
  }
}

TEST_CASE("the engine model follows the decoder's Llama-family layout byte for byte") {
  for (bool checkpointing : {false, true}) {
    for (const auto& [kv_heads, head_dim, tied, position] :
         {std::tuple{2, 24, false, spec::PositionKind::kRotary}, std::tuple{4, 16, true, spec::PositionKind::kRotary},
          std::tuple{1, 10, false, spec::PositionKind::kLearned}}) {
      INFO("kv_heads " << kv_heads << " head_dim " << head_dim << " checkpointing " << checkpointing);
      spec::Scenario scenario = small_scenario(checkpointing);
      spec::ModelShape& s = scenario.shape;
      s.heads = 4, s.kv_heads = kv_heads, s.head_dim = head_dim, s.ffn_hidden = 172;
      s.norm = spec::NormKind::kRmsNorm, s.norm_bias = false, s.mlp = spec::MlpKind::kGated;
      s.position = position, s.tied_embeddings = tied;
      s.qkv_bias = true, s.attn_out_bias = s.mlp_bias = false;
      auto device = device::make_cpu_device({});
      model::GptConfig config;
      config.shape = s;
      config.batch = scenario.batch;
      config.seq = scenario.seq;
      config.activation_checkpointing = checkpointing;
      auto gpt = model::Gpt::create(config, *device);
      REQUIRE(gpt.is_ok());
      CHECK(model_activation_bytes(scenario, 4) == static_cast<double>(gpt.value()->activation_bytes()));
      const model::ParamTable& table = gpt.value()->params();
      const std::vector<std::int64_t> numels = parameter_numels(s);
      REQUIRE(numels.size() == static_cast<std::size_t>(table.size()));
      for (model::ParamId id = 0; id < table.size(); ++id) {
        CHECK(numels[static_cast<std::size_t>(id)] == static_cast<std::int64_t>(table[id].numel));
      }
      const ForwardFlops fwd = scenario_forward_flops(scenario);
      CHECK(static_cast<double>(s.layers) * fwd.block + fwd.head == Approx(gpt.value()->flops_per_step() / 3.0));
    }
  }
}

TEST_CASE("engine model: parameters and optimizer on NVMe, budgets resolved as the engine resolves them") {
  spec::Scenario s = small_scenario(true);
  s.precision = DType::kBF16;
  s.zero.stage = 3;
  s.zero.params = spec::Tier::kNvme;
  s.zero.grads = spec::Tier::kCpu;
  s.zero.optimizer = spec::Tier::kNvme;
  s.zero.nvme_paths = {"/tmp"};
  s.zero.persistence_threshold = 100;
  EngineHardware hw;
  hw.compute_flops = 1e10;
  hw.memory_bandwidth = 1e10;
  hw.host_device_bandwidth = 5e9;
  hw.nvme_read_bandwidth = 1e9;
  hw.nvme_write_bandwidth = 5e8;
  const EnginePrediction p = predict_engine(s, hw);
  // Parameters: wte 8192, wpe 1024, per layer 49,984 (ln 64+64, qkv 12,288+192, proj 4,096+64,
  // ln 64+64, fc 16,384+256, proj 16,384+64), final norm 128: 109,312 elements.
  const double elements = 109312;
  // Offloaded (more than 100 elements): wte, wpe, and per layer qkv w+b, proj w, fc w+b, proj w
  // = 8192 + 1024 + 2 * (12,288 + 192 + 4,096 + 16,384 + 256 + 16,384) = 108,416 elements, 2 B each.
  const double offloaded = 108416 * 2.0;
  // max_live: min(max(offloaded, 2 x largest), max(4 x largest, 256 MiB)) = offloaded (216,832 B);
  // prefetch: twice that.
  CHECK(p.max_live_bytes == 216832);
  CHECK(p.prefetch_bytes == 2 * 216832);
  // Traffic: twice the offloaded parameters less what is live at the turn (all of them) = once.
  CHECK(p.host_to_device_bytes == Approx(offloaded));
  CHECK(p.device_to_host_bytes == Approx(elements * 2));
  // NVMe: 12 B/element of optimizer states in (the parameters' new values all stay in host staging:
  // prefetch_bytes exceeds them, so none is read back); updated params and the states out.
  CHECK(p.nvme_read_bytes == Approx(12 * elements));
  CHECK(p.nvme_write_bytes == Approx(2 * elements + 12 * elements));
  CHECK(p.nvme_peak_bytes == Approx(2 * elements + 12 * elements));
  // No host budget: sub-groups of min(16 Mi, ceil(109,312 / 8) = 13,664) elements, at least the
  // largest parameter (16,384): whole parameters packed in table order up to 16,384 elements.
  // Packed: [wte, wpe, ln1] 9,344 | [qkv w+b] 12,480 | [proj, ln2] 4,288 | [fc w] 16,384 | [fc b] 256 |
  // [proj w] 16,384 | [proj b, layer 1's ln1, qkv w+b] 12,672 | 4,288 | 16,384 | 256 | 16,384 |
  // [proj b, final norm] 192: 12 sub-groups.
  CHECK(p.sub_groups == 12);
  // The three pipeline sets take the last three sub-groups (the backward pass finishes them first)
  // before the first update: 256 + 16,384 + 192 = 16,832 elements of 109,312.
  const double ahead = 16832 / elements;
  CHECK(p.optimizer_read_ahead == Approx(ahead));
  // The optimizer after the backward pass: the step needs the norm first (grad_clip 1.0), so every
  // update waits for it; the reads that did not fit the sets follow the updates, each into a set
  // whose write must finish first: that share (1 - 16,832 / 109,312) of the reads, 12 E / 1e9, and of
  // the writes, (12 + 2) E / 5e8, is exposed (CPU Adam, 28 E / 1e10, is less). The other writes go on
  // into the next forward pass; all of the step's NVMe work, 40 E / 1e9, must still fit the step.
  const auto expected_optimizer = [&](const EnginePrediction& q, double nvme_scale) {
    const double nvme_step = nvme_scale * 40.0 * elements / 1e9;
    const double fb = q.step.forward.seconds + q.step.backward.seconds;
    return std::max(nvme_step, fb + (1 - ahead) * nvme_step) - fb;
  };
  CHECK(p.step.optimizer.seconds == Approx(expected_optimizer(p, 1.0)));
  CHECK(p.step.optimizer.seconds > 0.8 * (1 - ahead) * 40.0 * elements / 1e9);
  CHECK(p.step.optimizer.bottleneck == 6);  // NVMe
  CHECK(p.step.schedule == Schedule::kZinf);
  // Reads and writes at once at 2e9 B/s (both counted): the drive takes max(reads 12 E / 1e9, writes
  // 14 E / 5e8 = 28 E / 1e9, both 26 E / 2e9) = 28 E / 1e9 for the 40 E / 1e9 they take one after the
  // other, so every second of the optimizer's NVMe work scales by 0.7.
  EngineHardware mixed = hw;
  mixed.nvme_mixed_bandwidth = 2e9;
  const EnginePrediction faster = predict_engine(s, mixed);
  CHECK(faster.step.optimizer.seconds == Approx(expected_optimizer(faster, 0.7)));
  // A drive slower with both at once (0.5e9): 26 E / 0.5e9 = 52 E / 1e9, 1.3 times longer.
  mixed.nvme_mixed_bandwidth = 0.5e9;
  const EnginePrediction slower = predict_engine(s, mixed);
  CHECK(slower.step.optimizer.seconds == Approx(expected_optimizer(slower, 1.3)));
  CHECK(slower.step.optimizer.seconds > faster.step.optimizer.seconds);
  s.zero.overlap_optimizer = false;
  CHECK(predict_engine(s, hw).step.schedule == Schedule::kDeepSpeed);
}

TEST_CASE("engine model on the CPU backend: copies and fp32 views of half-precision parameters take the cores") {
  spec::Scenario s = small_scenario(true);
  s.precision = DType::kBF16;
  s.zero.stage = 3;
  s.zero.params = spec::Tier::kCpu;
  s.zero.grads = spec::Tier::kCpu;
  s.zero.optimizer = spec::Tier::kCpu;
  s.zero.persistence_threshold = 100;
  EngineHardware hw;
  hw.compute_flops = 1e10;
  hw.memory_bandwidth = 2e10;
  hw.host_device_bandwidth = 5e9;
  hw.compute_on_host = true;
  const EnginePrediction p = predict_engine(s, hw);
  // 2 layers x 64 hidden, batch 2 x seq 16 = 32 tokens. Per block: matmuls 32 x (4·64² + 2·64·256)
  // = 1,572,864 MACs, attention 2·16²·64 = 32,768 MACs: 3,211,264 FLOPs. Head 32 x 128 x 64 MACs =
  // 524,288 FLOPs.
  const ForwardFlops fwd = scenario_forward_flops(s);
  CHECK(fwd.block == 3211264.0);
  CHECK(fwd.head == 524288.0);
  const double forward_flops = 2 * 3211264.0 + 524288.0;
  // Step: 3 forwards and the recompute of block 0 only.
  CHECK(scenario_flops_per_step(s) == Approx(3 * forward_flops + 3211264.0));
  // 109,312 elements, 108,416 offloaded (see above), all live at the turn: fetched once, in the
  // forward pass; 49,984 elements per block.
  const double elements = 109312, offloaded = 108416 * 2.0, block = 49984;
  CHECK(block_elements(s.shape) == block);
  // Forward on the cores: FLOPs, the parameters' copies and one fp32 view of every parameter
  // (2 + 4 bytes per element at memory bandwidth).
  const double forward = forward_flops / 1e10 + offloaded / 5e9 + elements * 6 / 2e10;
  CHECK(p.step.forward.seconds == Approx(forward));
  CHECK(p.step.forward.bottleneck == 0);
  // Backward: 2 forwards and the recompute, the gradients' copies down (2 bytes per element), the
  // views of every parameter again and of block 0's for its recompute.
  const double backward = (2 * forward_flops + 3211264.0) / 1e10 + elements * 2 / 5e9 + (elements + block) * 6 / 2e10;
  CHECK(p.step.backward.seconds == Approx(backward));
  CHECK(p.conversion_seconds == Approx((2 * elements + block) * 6 / 2e10));
  // The block's other kernels measured (1 ms forward, 2 ms backward per block): the block's
  // matmuls only at the matmul rate (attention, 2·2·16²·64 = 65,536 FLOPs per block, is among the
  // kernels), plus the kernels of 2 blocks forward; 2 blocks backward and block 0's recompute.
  CHECK(fwd.attention == 65536.0);
  EngineHardware measured = hw;
  measured.block_kernel_forward_seconds = 1e-3;
  measured.block_kernel_backward_seconds = 2e-3;
  const EnginePrediction k = predict_engine(s, measured);
  const double matmuls = 3211264.0 - 65536.0;
  CHECK(k.step.forward.seconds ==
        Approx((2 * matmuls + 524288.0) / 1e10 + 2 * 1e-3 + offloaded / 5e9 + elements * 6 / 2e10));
  CHECK(k.step.backward.seconds == Approx((2 * (2 * matmuls + 524288.0) + matmuls) / 1e10 + 1e-3 + 2 * 2e-3 +
                                          elements * 2 / 5e9 + (elements + block) * 6 / 2e10));
  CHECK(k.compute_seconds == Approx((3 * (2 * matmuls + 524288.0) + matmuls) / 1e10 + 3 * 1e-3 + 2 * 2e-3));
  // After the backward pass, every step: the global norm, one pass over the bf16 gradients in host
  // memory (2 bytes per element), on the cores. Without clipping it is followed only by the last
  // sub-group's update (the others were stepped during the backward pass); with clipping by every
  // update. The optimizer's work is the norm and the updates (all on the cores).
  const double norm = elements * 2 / 2e10;
  s.optimizer.grad_clip = 0;
  const EnginePrediction overlapped = predict_engine(s, hw);
  REQUIRE(overlapped.sub_groups > 1);
  CHECK(overlapped.step.overlapped);
  CHECK(overlapped.step.optimizer_work_seconds > norm);
  CHECK(overlapped.step.optimizer.seconds ==
        Approx(norm + (overlapped.step.optimizer_work_seconds - norm) / overlapped.sub_groups));
  s.optimizer.grad_clip = 1.0;
  const EnginePrediction clipped = predict_engine(s, hw);
  CHECK_FALSE(clipped.step.overlapped);
  CHECK(clipped.step.optimizer.seconds == Approx(clipped.step.optimizer_work_seconds));
  CHECK(clipped.step.optimizer_work_seconds == Approx(overlapped.step.optimizer_work_seconds));
  // fp32 parameters need no views; on a GPU the copies run beside the kernels, over PCIe.
  s.precision = DType::kF32;
  CHECK(predict_engine(s, hw).conversion_seconds == 0.0);
  s.precision = DType::kBF16;
  hw.compute_on_host = false;
  const EnginePrediction gpu = predict_engine(s, hw);
  CHECK(gpu.conversion_seconds == 0.0);
  CHECK(gpu.step.forward.seconds == Approx(std::max(forward_flops / 1e10, offloaded / 5e9)));
}

}  // namespace
}  // namespace zinf::planner
