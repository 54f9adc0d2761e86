// Activation layout: every buffer the GPT model (libengine/model/gpt.cpp) carves on the device for
// its activations, workspace and token ids, as tensor shapes and dtypes — the one description the
// model carves from (Block::carve_activations / carve_scratch take these shapes) and the planner,
// the scenario's "does one layer fit" check and the sizing agreement test count bytes from.
//
// Per block (model/block.cpp): ln1 out, the norm statistics (LayerNorm: mean and rstd, RMSNorm:
// rstd; fp32), the q|k|v projection [B,T,(NH+2·KV)·hd] (as the attention left it), the attention output
// [B,T,NH·hd], the attention log-sum-exp [B,NH,T] (fp32), mid, ln2 out and statistics, the MLP's
// fc (the up projection when gated), gate (gated only) and act [B,T,F]. The backward scratch: dln,
// the wide and mid gradients (max of the attention's and the MLP's widths) and dgate (gated). Grouped-
// query attention needs no expanded K/V: the attention kernel reads the packed q|k|v directly.
// Model: token and target ids (int32), the block inputs (CheckpointStore: L+1 on the device, or a
// ring of 3 device slots with the rest in host memory when offloaded), one block's activations with
// checkpointing or every block's without, the final norm, rotary tables (fp32 cos/sin [T, rd/2] and
// a zero table [T,C] in the learned positions' place), the logits [B,T,V], dres and the scratch.
// Every tensor starts on a 64-byte boundary (model/tensor_carver.h).
//
// Pure arithmetic on a ModelShape; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "libengine/spec/model_shape.h"

namespace zinf::sizing {

// TensorCarver's alignment: every carved tensor is rounded up to this many bytes.
inline constexpr std::uint64_t kCarveAlignBytes = 64;
// CheckpointStore::kDeviceSlots: device slots of the block-input ring when it is offloaded.
inline constexpr std::int64_t kCheckpointDeviceSlots = 3;

// One carved tensor: up to 3 dimensions, in the compute dtype or fp32. rank 0: not carved.
struct ActivationTensor {
  std::array<std::int64_t, 3> dims{};
  int rank = 0;
  bool fp32 = false;
  bool present() const { return rank > 0; }
  std::int64_t numel() const;
  // Bytes it takes in a carved buffer (64-byte aligned); 0 when not present.
  std::uint64_t carved_bytes(std::size_t compute_dtype_bytes) const;
};

struct BlockActivationLayout {
  ActivationTensor ln1_out, ln1_mean, ln1_rstd, qkv, attn, lse, mid, ln2_out, ln2_mean, ln2_rstd, fc, gate, act;
  std::uint64_t bytes(std::size_t compute_dtype_bytes) const;
};

struct BlockScratchLayout {
  ActivationTensor dln, dwide, dmid, dgate;
  std::uint64_t bytes(std::size_t compute_dtype_bytes) const;
};

// Widths of the attention's q|k|v projection and of its output (heads · head_dim).
std::int64_t qkv_width(const spec::ModelShape& shape);
std::int64_t core_width(const spec::ModelShape& shape);

BlockActivationLayout block_activation_layout(const spec::ModelShape& shape, std::int64_t batch, std::int64_t seq);
BlockScratchLayout block_scratch_layout(const spec::ModelShape& shape, std::int64_t batch, std::int64_t seq);

// How the model runs: what decides its activation bytes beside the shape.
struct ActivationRun {
  std::int64_t batch = 1;  // rows per rank
  std::int64_t seq = 1;
  bool checkpointing = false;
  bool offload_checkpoints = false;  // block inputs in host memory (needs checkpointing)
  std::size_t compute_dtype_bytes = 4;
};

// The model's activation buffers, each as the model allocates it (bytes, 64-byte aligned tensors).
struct ActivationBytes {
  std::uint64_t ids = 0;               // token and target ids
  std::uint64_t block_inputs = 0;      // the checkpoint store's device slots
  std::uint64_t host_checkpoints = 0;  // the checkpoint store's host slots (offloaded; host tier)
  std::uint64_t blocks = 0;            // one block's activations (checkpointing) or every block's
  std::uint64_t final_norm = 0;
  std::uint64_t rotary = 0;
  std::uint64_t logits = 0;
  std::uint64_t workspace = 0;  // dres and the backward scratch
  // What the model takes from the device budget (Gpt::activation_bytes()).
  std::uint64_t device_total() const { return ids + block_inputs + blocks + final_norm + rotary + logits + workspace; }
};
ActivationBytes activation_bytes(const spec::ModelShape& shape, const ActivationRun& run);

// One block's activations and its backward scratch for `batch` × `seq` tokens: the per-layer part
// of the device memory a model needs whatever its depth.
std::uint64_t one_block_activation_bytes(const spec::ModelShape& shape, std::int64_t batch, std::int64_t seq,
                                         std::size_t compute_dtype_bytes);

}  // namespace zinf::sizing
