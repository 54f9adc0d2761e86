// Gpt: the decoder-only language model zinf trains — one class for GPT-2 and the Llama family
// (Llama, Mistral, Qwen2, TinyLlama), the ModelShape choosing per option:
//   token embedding (+ learned position table `wpe` for GPT-2; none with rotary positions),
//   L pre-norm blocks  mid = x + attn(norm1(x)),  out = mid + mlp(norm2(mid)),
//   a final norm and a linear head over the vocabulary (tied to `wte` or its own `head.weight`),
//   mean cross-entropy loss.
// Options: norm LayerNorm (with bias) or RMSNorm (eps from the shape); MLP GELU or gated SwiGLU (any
// ffn_hidden); positions learned or rotary (HF rotate_half; rope_theta, linear/llama3 scaling,
// partial_rotary_factor); attention with kv_heads <= heads (GQA/MQA) and any head_dim; q/k/v
// biases and output/MLP biases each on or off; tied or untied head.
//
// Parameter layout (zinf names; HF transformers' Llama/Mistral/Qwen2 names beside them). Every HF
// tensor is a whole zinf parameter or a block of its rows; with `tiling` > 1 a tiled weight is the
// row-concatenation of its `.tile{k}` parameters (TiledLinear), in order:
//   wte [V,C]                              model.embed_tokens.weight
//   blocks.{i}.ln1.weight [C]              model.layers.{i}.input_layernorm.weight
//   blocks.{i}.attn.qkv.weight [Q,C]       rows [0, NH·hd)            self_attn.q_proj.weight
//     Q = (NH + 2·NKV)·hd                  rows [NH·hd, (NH+NKV)·hd)  self_attn.k_proj.weight
//                                          rows [(NH+NKV)·hd, Q)      self_attn.v_proj.weight
//   blocks.{i}.attn.qkv.bias [Q]           the same row ranges of q/k/v_proj.bias (Qwen2)
//   blocks.{i}.attn.proj.weight [C,NH·hd]  self_attn.o_proj.weight
//   blocks.{i}.ln2.weight [C]              model.layers.{i}.post_attention_layernorm.weight
//   blocks.{i}.mlp.gate.weight [F,C]       mlp.gate_proj.weight
//   blocks.{i}.mlp.fc.weight [F,C]         mlp.up_proj.weight
//   blocks.{i}.mlp.proj.weight [C,F]       mlp.down_proj.weight
//   lnf.weight [C]                         model.norm.weight
//   head.weight [V,C] (untied only)        lm_head.weight
// Within q/k rows each head's hd rows are in HF's order (rotate_half pairs dimension j with
// j + rd/2), so no permutation is needed. GPT-2 has the same names plus the biases, the LayerNorm
// biases and `wpe`, with qkv = [q | k | v] of C rows each (HF GPT-2's c_attn, transposed).
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
// Not implemented (validate() rejects them): LayerNorm without bias, GPT-NeoX's parallel residual
// (its configs plan but do not train).
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
  // Model FLOPs of one forward+backward (2 per MAC, ×3 for fwd+bwd, of every matmul incl. the head
  // and the gate projection, plus causal attention's QKᵀ and PV counted causally (halved)), without
  // checkpoint recompute.
  double flops_per_step() const;

 private:
  Gpt(const GptConfig& config, device::Device& device);
  Status allocate();
  // Carves the rotary cos/sin tables and the zero position table and fills them (waits for the
  // copies). `carve` is allocate()'s carving helper.
  template <typename Carve>
  Status upload_rotary_tables(const Carve& carve);
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
  Tensor lnf_out_, lnf_mean_, lnf_rstd_;          // lnf_mean_ empty with RMSNorm
  Tensor zero_positions_;                         // [T,C] zeros in wpe's place (rotary positions only)
  Tensor logits_;                                 // [B,T,V]; overwritten by its gradient in the backward pass
  Tensor dres_;                                   // [B,T,C] the residual stream's gradient
  BlockScratch scratch_;
};

}  // namespace zinf::model
