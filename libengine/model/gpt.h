// Gpt: the GPT-2-like decoder-only language model zinf trains — token + learned position embedding,
// L pre-LN blocks (causal multi-head attention, GELU MLP), a final LayerNorm and a linear head over
// the vocabulary (tied to `wte` or its own `head.weight`), mean cross-entropy loss.
//
// It sees parameters only through ParamSource/GradSink (param_source.h), one module at a time:
// acquire → use → release in the forward pass and again in the backward pass, grad_buffer → add →
// commit once per parameter per call. It never knows whether they come from a resident copy or a
// ZeRO-3 gather from NVMe. Activations and workspace live on the Device, all allocated in create()
// against the device's budget; a step allocates nothing. With activation checkpointing only the
// L+1 block inputs and one block's internal activations are kept; the backward pass recomputes
// each block's forward from its input (the last block's are still there and are not recomputed).
// With offload_checkpoints the block inputs live in host memory instead, copied out and back on the
// transfer streams ahead of their use (CheckpointStore), bit-identical to keeping them on the device.
// Every kernel runs through device.ops(), so the same code runs on any backend.
//
// Precision: activations and the parameters it reads are in config.compute_dtype (fp32, or bf16/fp16
// on CUDA), parameter gradients fp32; loss_scale only scales the gradient for the caller's fp16 loss
// scaling. Profiler ranges "forward" and "backward" mark the two passes (device.push_range).
// What it is not: a general module system, an optimizer, or an autograd engine.
// Not implemented (validate() rejects them): RMSNorm, rotary positions, gated MLPs, grouped-query
// attention (kv_heads != heads), head_dim != hidden / heads. Any ffn_hidden is supported.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "libengine/core/status.h"
#include "libengine/device/device.h"
#include "libengine/model/block.h"
#include "libengine/model/checkpoint_store.h"
#include "libengine/model/embedding.h"
#include "libengine/model/layer_norm.h"
#include "libengine/model/linear.h"
#include "libengine/model/param_source.h"
#include "libengine/model/param_table.h"
#include "libengine/model/tiled_linear.h"
#include "libengine/spec/model_shape.h"

namespace zinf::model {

struct GptConfig {
  spec::ModelShape shape;
  std::int64_t batch = 1;                 // B
  std::int64_t seq = 0;                   // T, 1..shape.max_positions
  bool activation_checkpointing = false;  // keep block inputs only; recompute each block's forward in backward
  // Block inputs in host memory (CheckpointStore); needs activation_checkpointing.
  bool offload_checkpoints = false;
  std::int64_t tiling = 1;  // TiledLinear split of the MLP linears (and the untied head)
  // Per-operator tiles (spec/operator_tiling.h); when set it replaces `tiling`.
  std::optional<spec::OperatorTiling> operator_tiling;
  // Element type of the activations and of the parameters the model reads (the ParamSource must
  // hand them out in it): fp32 on every device, bf16/fp16 where the device's Ops support it (CUDA).
  // Parameter gradients, LayerNorm statistics and the attention log-sum-exp stay fp32.
  DType compute_dtype = DType::kF32;
};

// Field-named errors: "model.heads: 7 does not divide hidden 1024", "seq: 0 is not in 1..1024".
Status validate(const GptConfig& config);
// The tiles each operator is split into: operator_tiling, or `tiling` for the MLP linears and the
// untied head (the tied head is never tiled).
spec::OperatorTiling tiles_of(const GptConfig& config);

class Gpt {
 public:
  // Builds the parameter table and allocates every activation/workspace buffer on `device`
  // (budgeted; an OutOfMemory Status names what did not fit, e.g. "activations of block 3").
  // The device outlives the Gpt.
  static Result<std::unique_ptr<Gpt>> create(const GptConfig& config, device::Device& device);

  const ParamTable& params() const { return table_; }
  const GptConfig& config() const { return config_; }

  // tokens/targets: B*T int32 in host memory, values < vocab (checked: InvalidArgument naming the
  // index and value). Forward + backward; adds every parameter's gradient into GradSink buffers
  // (grad_buffer → commit once per param per call, after its last contribution), with the loss
  // gradient multiplied by loss_scale. Returns the mean cross-entropy (unscaled).
  // Deterministic: the same inputs give the same bits, with or without checkpointing.
  // On failure (a source or sink error) the gradients of this call are incomplete.
  Result<double> forward_backward(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets,
                                  ParamSource& params, GradSink& grads, float loss_scale = 1.0f);
  // The mean cross-entropy only (no gradients).
  Result<double> forward(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets,
                         ParamSource& params);

  // Bytes create() allocated on the device for activations, workspace and token ids.
  std::uint64_t activation_bytes() const { return activation_bytes_; }
  // Where the block inputs live and what their copies moved.
  const CheckpointStore& checkpoints() const { return *checkpoints_; }
  // Model FLOPs of one forward+backward (2 per MAC, ×3 for fwd+bwd, of every matmul incl. the head,
  // plus causal attention's QKᵀ and PV counted causally (halved)), without checkpoint recompute.
  double flops_per_step() const;

 private:
  Gpt(const GptConfig& config, device::Device& device);
  Status allocate();
  Status upload(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets);
  Status run_forward(ParamSource& params, bool for_backward);
  const BlockActivations& activations_of(std::int64_t block) const;

  GptConfig config_;
  device::Device& device_;
  ParamTable table_;
  Embedding embedding_;
  std::vector<Block> blocks_;
  LayerNorm lnf_;
  std::optional<TiledLinear> head_;  // untied: owns head.weight (or its tiles); tied: reads wte's tiles

  std::vector<device::DeviceBuffer> buffers_;
  std::uint64_t activation_bytes_ = 0;
  std::int32_t* tokens_ = nullptr;                // [B*T] on the device
  std::int32_t* targets_ = nullptr;               // [B*T] on the device
  std::unique_ptr<CheckpointStore> checkpoints_;  // L+1 block inputs [B,T,C]; the last feeds lnf
  std::vector<BlockActivations> acts_;            // L, or 1 with checkpointing
  Tensor lnf_out_, lnf_mean_, lnf_rstd_;
  Tensor logits_;  // [B,T,V]; overwritten by its gradient in the backward pass
  Tensor dres_;    // [B,T,C] the residual stream's gradient
  BlockScratch scratch_;
};

}  // namespace zinf::model
