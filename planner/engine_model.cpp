#include "planner/engine_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "libengine/core/dtype.h"
#include "libengine/spec/optimizer_pipeline_shape.h"

namespace zinf::planner {
namespace {

using spec::Tier;

constexpr double kMiB = 1048576.0;
constexpr double kCarveAlign = 64.0;                  // TensorCarver rounds every tensor up to 64 bytes
constexpr double kAdamBytesPerElement = 28;           // CPU Adam: read master, m, v, grad; write master, m, v
constexpr double kOptimizerNvmeBytesPerElement = 12;  // master, m, v in fp32

double aligned(double bytes) { return std::ceil(bytes / kCarveAlign) * kCarveAlign; }

// Resource indices of schedule_model (bandwidth_model's Resource order).
constexpr std::size_t kCompute = 0;
constexpr std::size_t kHostToDevice = 2;
constexpr std::size_t kDeviceToHost = 3;
constexpr std::size_t kCpuMemory = 5;
constexpr std::size_t kNvme = 6;

}  // namespace

namespace {

// One block's parameters in the table's order (model/block.cpp): ln1, attention qkv and proj, ln2,
// the MLP's gate (gated only), fc and proj — each weight followed by its bias when it has one.
std::vector<std::int64_t> block_numels(const spec::ModelShape& s) {
  const std::int64_t c = s.hidden, f = s.ffn_hidden;
  const std::int64_t q = (s.heads + 2 * s.kv_heads) * s.head_dim, a = s.heads * s.head_dim;
  const bool norm_bias = s.norm == spec::NormKind::kLayerNorm;
  std::vector<std::int64_t> out;
  const auto add = [&](std::int64_t weight, bool has_bias, std::int64_t bias) {
    out.push_back(weight);
    if (has_bias) out.push_back(bias);
  };
  add(c, norm_bias, c);
  add(q * c, s.qkv_bias, q);
  add(c * a, s.attn_out_bias, c);
  add(c, norm_bias, c);
  if (s.mlp == spec::MlpKind::kGated) add(f * c, s.mlp_bias, f);
  add(f * c, s.mlp_bias, f);
  add(c * f, s.mlp_bias, c);
  return out;
}

}  // namespace

std::vector<std::int64_t> parameter_numels(const spec::ModelShape& shape) {
  const std::int64_t c = shape.hidden;
  std::vector<std::int64_t> out{shape.vocab * c};
  if (shape.position == spec::PositionKind::kLearned) out.push_back(shape.max_positions * c);
  const std::vector<std::int64_t> block = block_numels(shape);
  for (std::int64_t layer = 0; layer < shape.layers; ++layer) out.insert(out.end(), block.begin(), block.end());
  out.push_back(c);
  if (shape.norm == spec::NormKind::kLayerNorm) out.push_back(c);
  if (!shape.tied_embeddings) out.push_back(shape.vocab * c);
  return out;
}

double block_elements(const spec::ModelShape& shape) {
  if (shape.layers == 0) return 0.0;
  const std::vector<std::int64_t> block = block_numels(shape);
  return static_cast<double>(std::accumulate(block.begin(), block.end(), std::int64_t{0}));
}

double model_activation_bytes(const spec::Scenario& scenario, std::size_t compute_dtype_bytes) {
  const spec::ModelShape& s = scenario.shape;
  const double e = static_cast<double>(compute_dtype_bytes);
  const double r = static_cast<double>(scenario.batch * scenario.seq), t = static_cast<double>(scenario.seq);
  const double c = static_cast<double>(s.hidden), f = static_cast<double>(s.ffn_hidden);
  const double heads = static_cast<double>(s.heads), v = static_cast<double>(s.vocab);
  const double q = static_cast<double>((s.heads + 2 * s.kv_heads) * s.head_dim);
  const double a = static_cast<double>(s.heads * s.head_dim);
  const bool layer_norm = s.norm == spec::NormKind::kLayerNorm, gated = s.mlp == spec::MlpKind::kGated;
  // Norm statistics: rstd, and LayerNorm's mean.
  const double stats = (layer_norm ? 2.0 : 1.0) * aligned(r * 4);
  const double ids = 2.0 * r * 4.0;
  const double inputs = static_cast<double>(s.layers + 1) * aligned(r * c * e);
  // One block (model/block.cpp): ln1, qkv, attention, mid, ln2, fc, (gate,) act in the compute
  // dtype; norm statistics and the attention log-sum-exp in fp32.
  const double block = aligned(r * c * e) + stats + aligned(r * q * e) + aligned(r * a * e) + aligned(r * heads * 4) +
                       aligned(r * c * e) + aligned(r * c * e) + stats + (gated ? 3 : 2) * aligned(r * f * e);
  const double kept = scenario.activation_checkpointing ? 1.0 : static_cast<double>(s.layers);
  const double final_norm = aligned(r * c * e) + stats;
  // Rotary positions: the fp32 cos/sin tables [T, rd/2] and the zero table in wpe's place.
  const double rotary = s.position == spec::PositionKind::kRotary
                            ? 2 * aligned(t * static_cast<double>(spec::rotary_dim(s) / 2) * 4) + aligned(t * c * e)
                            : 0.0;
  const double logits = aligned(r * v * e);
  // dres, dln, dwide, dmid, (dgate,). Grouped K/V heads need no expanded copy: the CPU attention
  // kernel reads the packed q|k|v rows (the CUDA ops expand into their own kernel scratch).
  const double workspace = aligned(r * c * e) + aligned(r * c * e) + aligned(r * std::max(q, f) * e) +
                           aligned(r * std::max(a, f) * e) + (gated ? aligned(r * f * e) : 0.0);
  return ids + inputs + kept * block + final_norm + rotary + logits + workspace;
}

ForwardFlops scenario_forward_flops(const spec::Scenario& scenario) {
  const spec::ModelShape& s = scenario.shape;
  const double b = static_cast<double>(scenario.batch), t = static_cast<double>(scenario.seq);
  const double c = static_cast<double>(s.hidden), f = static_cast<double>(s.ffn_hidden);
  const double v = static_cast<double>(s.vocab);
  const double q = static_cast<double>((s.heads + 2 * s.kv_heads) * s.head_dim);
  const double a = static_cast<double>(s.heads * s.head_dim);
  const double mlp_matrices = s.mlp == spec::MlpKind::kGated ? 3.0 : 2.0;
  // 2 FLOPs per multiply-accumulate: the q|k|v projection C·Q, the attention output A·C, the MLP's
  // two or three C·F per token; QKᵀ and PV B·T²·A together (causal halves); the head V·C per token.
  const double attention = 2.0 * b * t * t * a;
  return {2.0 * b * t * (c * q + a * c + mlp_matrices * c * f) + attention, attention, 2.0 * b * t * v * c};
}

double scenario_flops_per_step(const spec::Scenario& scenario) {
  const ForwardFlops fwd = scenario_forward_flops(scenario);
  const double layers = static_cast<double>(scenario.shape.layers);
  const double forward = layers * fwd.block + fwd.head;
  // The recompute: every block but the last, whose activations are still there (gpt.cpp).
  const double recompute = scenario.activation_checkpointing ? std::max(0.0, layers - 1.0) * fwd.block : 0.0;
  return 3.0 * forward + recompute;
}

EnginePrediction predict_engine(const spec::Scenario& scenario, const EngineHardware& hw) {
  EnginePrediction out;
  const spec::ZeroConfig& zero = scenario.zero;
  const bool partitioned = zero.partitioned();
  const std::vector<std::int64_t> numels = parameter_numels(scenario.shape);
  double elements = 0;
  std::int64_t largest = 0;
  for (std::int64_t n : numels) {
    elements += static_cast<double>(n);
    largest = std::max(largest, n);
  }
  const bool mixed = scenario.precision != DType::kF32;
  const double half = static_cast<double>(dtype_size_bytes(scenario.precision));
  const std::size_t compute_bytes = hw.compute_on_host ? 4 : dtype_size_bytes(scenario.precision);
  const double storage = elements * half;
  const double largest_storage = static_cast<double>(largest) * half;
  const double largest_fp32 = static_cast<double>(largest) * 4.0;

  // Budgets, resolved as PartitionedStates::plan_and_allocate resolves them.
  const Tier params_tier = partitioned ? zero.params : Tier::kDevice;
  const Tier grads_tier = partitioned ? zero.grads : Tier::kDevice;
  const Tier optimizer_tier = partitioned ? zero.optimizer : Tier::kDevice;
  double offloaded = 0;
  double persistent = 0;
  for (std::int64_t n : numels) {
    if (n > zero.persistence_threshold) {
      offloaded += static_cast<double>(n) * half;
    } else {
      persistent += static_cast<double>(n) * half;
    }
  }
  if (params_tier == Tier::kDevice) persistent = 0;  // a device-tier parameter is its own copy
  out.max_live_bytes = zero.max_live_bytes;
  if (params_tier != Tier::kDevice && out.max_live_bytes == 0) {
    out.max_live_bytes = static_cast<std::uint64_t>(
        std::min(std::max(offloaded, 2 * largest_storage), std::max(4 * largest_storage, 256 * kMiB)));
  }
  out.prefetch_bytes = zero.prefetch_bytes;
  if (params_tier == Tier::kNvme && out.prefetch_bytes == 0) out.prefetch_bytes = 2 * out.max_live_bytes;

  // Device tier.
  out.activation_bytes = model_activation_bytes(scenario, compute_bytes);
  const auto add = [](std::vector<MemoryItem>& items, double& total, std::string what, double bytes) {
    if (bytes <= 0) return;
    items.push_back({std::move(what), bytes});
    total += bytes;
  };
  add(out.device_items, out.device_peak_bytes, "activations", out.activation_bytes);
  const auto on = [&](Tier tier, std::string what, double bytes) {
    if (tier == Tier::kDevice) add(out.device_items, out.device_peak_bytes, std::move(what), bytes);
    if (tier == Tier::kCpu) add(out.host_items, out.host_peak_bytes, std::move(what), bytes);
    if (tier == Tier::kNvme) add(out.nvme_items, out.nvme_peak_bytes, std::move(what), bytes);
  };
  if (!partitioned) {
    // ZeRO-0: params, fp32 grads, master (mixed), m, v on the device.
    on(Tier::kDevice, "params", storage);
    on(Tier::kDevice, "grads", elements * 4.0);
    if (mixed) on(Tier::kDevice, "master params", elements * 4.0);
    on(Tier::kDevice, "Adam m and v", elements * 8.0);
  } else {
    if (params_tier != Tier::kNvme) on(params_tier, "params", storage);
    on(grads_tier, "grads", storage);
    if (optimizer_tier != Tier::kNvme) on(optimizer_tier, "master params, Adam m and v", elements * 12.0);
    if (optimizer_tier == Tier::kCpu && mixed && params_tier != Tier::kCpu) {
      on(Tier::kCpu, "new params after the step", storage);
    }
    add(out.device_items, out.device_peak_bytes, "persistent params", persistent);
    if (params_tier != Tier::kDevice) {
      add(out.device_items, out.device_peak_bytes, "gathered params (max_live_bytes)",
          std::min(static_cast<double>(out.max_live_bytes), offloaded));
    }
    // Gradients leave the backward pass one block (or the largest parameter: the tied embedding)
    // at a time: its fp32 buffers and, mixed, their rounded copies travel to the host together. The
    // tied embedding, larger than a block, is committed last (the lookup's backward is the pass's
    // last operator) while the first block's gradients are still on their way to the host behind it.
    const double unit = std::max(block_elements(scenario.shape), static_cast<double>(largest));
    if (grads_tier != Tier::kDevice || mixed) {
      const double per_element = 4.0 + (mixed ? half : 0.0);
      const double behind = static_cast<double>(largest) > block_elements(scenario.shape)
                                ? block_elements(scenario.shape) * per_element
                                : 0.0;
      add(out.device_items, out.device_peak_bytes, "fp32 gradient buffers and their rounded copies",
          std::max(unit * per_element, largest_fp32) + behind);
    }
    // Half-precision parameters are handed to fp32 kernels as fp32 views, a block at a time.
    if (mixed && params_tier != Tier::kDevice && compute_bytes == 4) {
      add(out.device_items, out.device_peak_bytes, "fp32 views of gathered params", unit * 4.0);
    }
  }

  // Host tier: the optimizer pipeline and NVMe read staging; NVMe: what lives there.
  const bool host_optimizer_tier = partitioned && optimizer_tier != Tier::kDevice;
  // Of the new parameter values kept on the host for the next forward pass, the share copied into
  // staging (the rest is lent where Adam wrote it, PartitionedStates::finish_group): those in a
  // pipeline set a later sub-group of the step reuses (spread evenly here), and fp32 values, which
  // sit in a set's states.
  double kept_copied_share = 0.0;
  if (host_optimizer_tier) {
    // The engine's own cut (spec/optimizer_pipeline_shape.h) over its padded slices at one rank.
    std::vector<std::int64_t> slices;
    for (std::int64_t n : numels)
      slices.push_back((n + spec::kSliceAlignElements - 1) / spec::kSliceAlignElements * spec::kSliceAlignElements);
    spec::OptimizerPipelineInput input{slices, optimizer_tier, mixed ? dtype_size_bytes(scenario.precision) : 0};
    input.sub_group_size = zero.sub_group_size;
    if (scenario.zero.host_memory_bytes > 0) {
      const double capacity = static_cast<double>(scenario.zero.host_memory_bytes);
      const double slack = std::min(64 * kMiB, std::floor(capacity / 16));
      input.budgeted = true;
      input.host_left_bytes = static_cast<std::uint64_t>(
          std::max(0.0, capacity - (out.host_peak_bytes + static_cast<double>(out.prefetch_bytes) + slack)));
    }
    const spec::OptimizerPipelineShape shape = spec::shape_optimizer_pipeline(input);
    out.sub_groups = static_cast<std::int64_t>(shape.groups.size());
    if (optimizer_tier == Tier::kNvme && !shape.groups.empty()) {
      const auto count = static_cast<double>(shape.groups.size());
      kept_copied_share = mixed ? std::max(0.0, count - static_cast<double>(shape.buffers)) / count : 1.0;
    }
    add(out.host_items, out.host_peak_bytes, "optimizer pipeline", static_cast<double>(shape.host_bytes));
    if (optimizer_tier == Tier::kNvme && !shape.groups.empty()) {
      // Before the first update the buffers hold the first sub-groups of the overlapped order, the
      // last ones of the table (the backward pass finishes them first); the others are read after it.
      const std::size_t held = std::min(shape.buffers, shape.groups.size());
      double held_elements = 0;
      for (std::size_t g = shape.groups.size() - held; g < shape.groups.size(); ++g) {
        held_elements += static_cast<double>(shape.groups[g].flat_end - shape.groups[g].flat_begin);
      }
      out.optimizer_read_ahead = held_elements / static_cast<double>(shape.groups.back().flat_end);
    }
  }
  if (partitioned && optimizer_tier == Tier::kNvme) {
    add(out.nvme_items, out.nvme_peak_bytes, "master params, Adam m and v", elements * kOptimizerNvmeBytesPerElement);
  }
  if (partitioned && params_tier == Tier::kNvme) {
    add(out.nvme_items, out.nvme_peak_bytes, "params", storage);
    add(out.host_items, out.host_peak_bytes, "NVMe read staging (prefetch_bytes)",
        std::min(static_cast<double>(out.prefetch_bytes), offloaded));
  }

  // Traffic per step. Offloaded parameters: the forward pass and the backward pass each fetch them;
  // what is still live at the turn (max_live_bytes) is reused, as is the recompute's copy.
  // NVMe-resident parameters: the new values of the first prefetch_bytes the forward pass needs stay
  // in host staging when the optimizer writes them (ParamCoordinator::stage_published), so they are
  // not read back.
  double kept_on_host = 0;
  if (partitioned && params_tier != Tier::kDevice) {
    out.host_to_device_bytes = 2.0 * offloaded - std::min(static_cast<double>(out.max_live_bytes), offloaded);
    if (params_tier == Tier::kNvme) {
      kept_on_host = std::min(static_cast<double>(out.prefetch_bytes), offloaded);
      out.nvme_read_bytes += out.host_to_device_bytes - kept_on_host;
      out.nvme_write_bytes += storage;  // the updated parameters
    }
  }
  if (partitioned && grads_tier != Tier::kDevice) out.device_to_host_bytes = storage;
  if (partitioned && optimizer_tier == Tier::kNvme) {
    out.nvme_read_bytes += elements * kOptimizerNvmeBytesPerElement;
    out.nvme_write_bytes += elements * kOptimizerNvmeBytesPerElement;
  }

  // Time per phase and resource.
  const double flops = scenario_flops_per_step(scenario);
  const ForwardFlops fwd = scenario_forward_flops(scenario);
  const double forward_flops = static_cast<double>(scenario.shape.layers) * fwd.block + fwd.head;
  out.compute_seconds = flops / hw.compute_flops;
  PhaseLoads loads;
  loads.at(Phase::kForward)[kCompute] = forward_flops / hw.compute_flops;
  loads.at(Phase::kBackward)[kCompute] = (flops - forward_flops) / hw.compute_flops;
  if (hw.block_kernel_forward_seconds > 0 || hw.block_kernel_backward_seconds > 0) {
    // Attention is among the measured kernels: only the matmuls run at the matmul rate.
    const double layers = static_cast<double>(scenario.shape.layers);
    const double recomputed = scenario.activation_checkpointing ? std::max(0.0, layers - 1.0) : 0.0;
    const double attention_flops = (3.0 * layers + recomputed) * fwd.attention;
    const double forward_kernels = layers * hw.block_kernel_forward_seconds;
    const double backward_kernels =
        recomputed * hw.block_kernel_forward_seconds + layers * hw.block_kernel_backward_seconds;
    loads.at(Phase::kForward)[kCompute] += forward_kernels - layers * fwd.attention / hw.compute_flops;
    loads.at(Phase::kBackward)[kCompute] +=
        backward_kernels - (attention_flops - layers * fwd.attention) / hw.compute_flops;
    out.compute_seconds += forward_kernels + backward_kernels - attention_flops / hw.compute_flops;
  }
  // Parameter fetches: split between the passes as the fetches are (forward: all; backward: the rest).
  const double forward_fetch = std::min(out.host_to_device_bytes, offloaded);
  const double backward_fetch = out.host_to_device_bytes - forward_fetch;
  const double copy_bw = hw.host_device_bandwidth > 0 ? hw.host_device_bandwidth : hw.memory_bandwidth;
  // On the CPU backend a host<->device copy is a memcpy on the same cores as the kernels: it takes
  // them from the compute rather than running beside it.
  const std::size_t h2d = hw.compute_on_host ? kCompute : kHostToDevice;
  const std::size_t d2h = hw.compute_on_host ? kCompute : kDeviceToHost;
  loads.at(Phase::kForward)[h2d] += forward_fetch / copy_bw;
  loads.at(Phase::kBackward)[h2d] += backward_fetch / copy_bw;
  loads.at(Phase::kBackward)[d2h] += out.device_to_host_bytes / copy_bw;
  // fp32 kernels over half-precision parameters (the CPU backend): every acquire converts the
  // parameter into an fp32 view (2 bytes read, 4 written per element) — all of them in the forward
  // pass, all again in the backward pass plus the recomputed blocks' (every block but the last).
  if (partitioned && mixed && compute_bytes == 4) {
    const double layers = static_cast<double>(scenario.shape.layers);
    const double recomputed =
        scenario.activation_checkpointing ? std::max(0.0, layers - 1.0) * block_elements(scenario.shape) : 0.0;
    const double per_element = (half + 4.0) / hw.memory_bandwidth;
    out.conversion_seconds = (2.0 * elements + recomputed) * per_element;
    loads.at(Phase::kForward)[kCompute] += elements * per_element;
    loads.at(Phase::kBackward)[kCompute] += (elements + recomputed) * per_element;
  }
  if (partitioned && params_tier == Tier::kNvme && hw.nvme_read_bandwidth > 0) {
    loads.at(Phase::kForward)[kNvme] = (forward_fetch - kept_on_host) / hw.nvme_read_bandwidth;
    loads.at(Phase::kBackward)[kNvme] = backward_fetch / hw.nvme_read_bandwidth;
  }
  // The optimizer: Adam streams its states through memory (the device's or the host's cores).
  const bool host_optimizer = partitioned && optimizer_tier != Tier::kDevice;
  const std::size_t adam_resource = hw.compute_on_host || !host_optimizer ? kCompute : kCpuMemory;
  // Clipping and fp16 loss scaling need the global gradient norm before any update.
  const bool norm_first = scenario.optimizer.grad_clip > 0 || scenario.precision == DType::kF16;
  loads.at(Phase::kOptimizerUpdate)[adam_resource] += elements * kAdamBytesPerElement / hw.memory_bandwidth;
  if (host_optimizer) {
    // After the backward pass the gradients in host memory are read once more for the global norm
    // (every step: clipping and loss scaling wait for it, the report shows it). After the update:
    // the new values of the parameters kept on the host are copied into staging, where they are
    // not lent (kept_copied_share).
    loads.at(Phase::kGradientNorm)[adam_resource] += storage / hw.memory_bandwidth;
    loads.at(Phase::kOptimizerUpdate)[adam_resource] += 2.0 * kept_copied_share * kept_on_host / hw.memory_bandwidth;
  }
  if (partitioned && optimizer_tier == Tier::kNvme && hw.nvme_read_bandwidth > 0 && hw.nvme_write_bandwidth > 0) {
    loads.at(Phase::kOptimizerRead)[kNvme] += elements * kOptimizerNvmeBytesPerElement / hw.nvme_read_bandwidth;
    loads.at(Phase::kOptimizerWrite)[kNvme] += elements * kOptimizerNvmeBytesPerElement / hw.nvme_write_bandwidth;
  }
  if (partitioned && params_tier == Tier::kNvme && hw.nvme_write_bandwidth > 0) {
    loads.at(Phase::kOptimizerWrite)[kNvme] += storage / hw.nvme_write_bandwidth;
  }
  // The optimizer pipeline reads ahead while it writes behind: with both in flight the drive takes
  // max(the reads at the read rate, the writes at the write rate, both at the mixed rate), not the
  // two one after the other.
  double& read_seconds = loads.at(Phase::kOptimizerRead)[kNvme];
  double& write_seconds = loads.at(Phase::kOptimizerWrite)[kNvme];
  if (hw.nvme_mixed_bandwidth > 0 && read_seconds > 0 && write_seconds > 0) {
    const double bytes = read_seconds * hw.nvme_read_bandwidth + write_seconds * hw.nvme_write_bandwidth;
    const double together = std::max({read_seconds, write_seconds, bytes / hw.nvme_mixed_bandwidth});
    const double scale = together / (read_seconds + write_seconds);
    read_seconds *= scale;
    write_seconds *= scale;
  }
  ScheduleOptions options;
  options.schedule = zero.overlap_optimizer ? Schedule::kZinf : Schedule::kDeepSpeed;
  options.norm_before_step = norm_first;
  options.optimizer_on_host = host_optimizer;
  options.sub_groups = out.sub_groups > 0 ? static_cast<double>(out.sub_groups) : 8.0;
  options.read_ahead = out.optimizer_read_ahead;
  out.step = schedule_step(loads, options);
  return out;
}

}  // namespace zinf::planner
