// Block: one pre-norm decoder block (GPT-2's and Llama's wiring),
//   mid = x + attn(ln1(x));   out = mid + mlp(ln2(mid)),
// with parameters `blocks.{i}.ln1|attn|ln2|mlp.*` in group i + 1; the norm, MLP, position and
// attention kinds are the ModelShape's (see Gpt). The block owns no memory: its
// saved forward activations (BlockActivations) and the backward workspace shared by all blocks
// (BlockScratch) are carved by the model from buffers it preallocates, which is what lets the model
// keep every block's activations or, with activation checkpointing, only one block's (recomputed
// in the backward pass from the block's saved input).
// The residual stream's gradient passes through a block in place: backward() receives d(out) in
// `dres` and leaves d(x) there, so no residual kernel or extra buffer is needed.
#pragma once

#include <cstdint>

#include "libengine/core/status.h"
#include "libengine/device/ops.h"
#include "libengine/model/attention.h"
#include "libengine/model/layer_norm.h"
#include "libengine/model/mlp.h"
#include "libengine/model/param_source.h"
#include "libengine/model/param_table.h"
#include "libengine/model/tensor_carver.h"
#include "libengine/spec/model_shape.h"
#include "libengine/spec/operator_tiling.h"

namespace zinf::model {

// One block's forward activations that its backward pass reads. R = B*T, F = the MLP width,
// Q = (NH + 2 NKV) hd the q|k|v width, A = NH hd the attention core's width (3C and C for GPT-2).
struct BlockActivations {
  Tensor ln1_out, ln1_mean, ln1_rstd;  // [B,T,C], [R] (LayerNorm only, else empty), [R]
  Tensor qkv;                          // [B,T,Q], q and k rotated with rotary positions
  Tensor attn;                         // [B,T,A] attention core output
  Tensor lse;                          // [B,NH,T]
  Tensor mid;                          // [B,T,C] x + attn(ln1(x))
  Tensor ln2_out, ln2_mean, ln2_rstd;  // [B,T,C], [R] (LayerNorm only), [R]
  Tensor fc;                           // [B,T,F] pre-activation (the up projection when gated)
  Tensor gate;                         // [B,T,F] gate projection (gated MLP only, else empty)
  Tensor act;                          // [B,T,F] gelu(fc) or silu(gate) * fc
};

// Workspace reused by every block one after another: the backward pass's.
struct BlockScratch {
  Tensor dln;               // [B,T,C] gradient at a norm's output
  Tensor dwide;             // R*max(Q, F) elements: dqkv, then d(fc)
  Tensor dmid;              // R*max(A, F) elements: d(attn), then d(act)
  Tensor dgate;             // [B,T,F] d(gate) (gated MLP only, else empty)
  AttentionWork attention;  // rotary tables (set by the model)
};

class Block {
 public:
  // index: the block's position (0-based); shape must pass Gpt's validate().
  Block(ParamTable& table, std::int64_t index, const spec::ModelShape& shape, const spec::OperatorTiling& tiling);

  // Lays out one block's activations / the scratch for batch B and sequence T (see TensorCarver);
  // the scratch's rotary tables are the model's to set.
  static BlockActivations carve_activations(TensorCarver& carver, const spec::ModelShape& shape, std::int64_t batch,
                                            std::int64_t seq);
  static BlockScratch carve_scratch(TensorCarver& carver, const spec::ModelShape& shape, std::int64_t batch,
                                    std::int64_t seq);

  // Saves acts for x [B,T,C]; writes out [B,T,C] unless `out` has no data (a recompute for the
  // backward pass, which needs the activations but not the block's output).
  Status forward(device::Ops& ops, ParamSource& params, Tensor x, const BlockActivations& acts,
                 const BlockScratch& scratch, Tensor out) const;
  // dres: d(out) on entry, d(x) on return. acts: this block's forward activations for x.
  Status backward(device::Ops& ops, ParamSource& params, GradSink& grads, Tensor x, const BlockActivations& acts,
                  const BlockScratch& scratch, Tensor dres) const;

 private:
  LayerNorm ln1_;
  Attention attn_;
  LayerNorm ln2_;
  Mlp mlp_;
};

}  // namespace zinf::model
