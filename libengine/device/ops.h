// Ops: the compute seam. Every kernel the model runs goes through one Ops object, which a Device
// hands out (Device::ops()), so the model is the same code on the CPU backend (device/cpu_ops) and
// on the CUDA backend (device/cuda_ops): a backend plugs in by implementing this interface over its
// own kernels.
//
// Tensor-level, over memory on the Ops' device, shaped as the comment beside each argument says.
// Element types: activations, activation gradients and the parameters the model reads share one
// element type, the model's compute dtype — fp32 on every backend, and bf16/fp16 where
// supports_compute_dtype() says so (CUDA). Always fp32 whatever the compute dtype: parameter
// gradients (dweight, dbias, dwte, dwpe), the LayerNorm statistics (mean, rstd) and the attention
// log-sum-exp (lse); arithmetic accumulates in fp32 everywhere. The methods check shapes and
// element types (ZINF_CHECK: a mismatch is a bug in the caller, not a run-time condition) and then
// run the kernel; the formulas, the accumulate (+=) versus overwrite (=) rules and the determinism
// guarantees are those of kernels/<op>.h.
// What it is not: an allocator for the caller (outputs are caller-owned), or an autograd engine.
//
// Dimension legend: B batch, T sequence, C channels, OC output channels, R rows (B*T), NH heads,
// V vocabulary, maxT position-table length, N elements.
//
// Ordering: work runs in order on the device's compute stream — inline on the calling thread on
// the CPU backend (results are ready when the call returns), asynchronously on CUDA. Methods that
// return a value to the host (cross_entropy_forward, sum_squares) wait for it. A kernel launch that
// fails is reported through the Status of the next Stream/Device synchronize() (a value-returning
// method returns NaN then). Thread-safety: one host thread drives an Ops object at a time.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/adam.h"
#include "libengine/core/dtype.h"
#include "libengine/tensor/tensor.h"

namespace zinf::device {

// How a gradient output receives its value: added to what it holds (+=) or written over it (=).
enum class GradMode { kAccumulate, kOverwrite };

// Which part of each row a rotary embedding turns (kernels/rope.h): the first `heads` heads of the
// row, each head_dim wide, of which the first rotary_dim dimensions rotate (even, <= head_dim).
struct RopeHeads {
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t rotary_dim = 0;
};

class Ops {
 public:
  virtual ~Ops() = default;

  // Whether activations may be `dtype` (fp32 always is).
  virtual bool supports_compute_dtype(DType dtype) const = 0;

  // t = 0.
  virtual void zero(Tensor t) = 0;
  // dst = src (same element count; shapes may differ), converting the element type when the two
  // differ (fp32/bf16/fp16, kernels/convert.h's rounding, the same bits on every backend).
  virtual void copy(Tensor dst, Tensor src) = 0;

  // The optimizer's two kernels (kernels/adam.h), so that model states on any device are updated
  // where they live.
  // Sum over every element of every tensor of x*x (any element type), accumulated in fp64 tensor
  // by tensor in order; inf/NaN propagate. Waits for the result.
  virtual double sum_squares(std::span<const Tensor> tensors) = 0;
  // One fused Adam/AdamW step over a flat slice: master, exp_avg, exp_avg_sq fp32 [N] updated in
  // place; grad [N] fp32, bf16 or fp16; param_half nullptr or [N] bf16/fp16, written with the
  // updated parameters rounded.
  virtual void adam_step(const kernels::AdamHyper& hyper, Tensor master, Tensor exp_avg, Tensor exp_avg_sq, Tensor grad,
                         const Tensor* param_half) = 0;

  // Linear layer (nn.Linear layout). Writes columns [out_col_begin, out_col_begin + OC) of
  // out [R, OUT_WIDTH] = inp [R,C] · weight [OC,C]ᵀ + bias [OC]; bias may be nullptr. The column
  // offset lets a weight split into tiles along the output features write its slice of a wider
  // output (model/tiled_linear.h); a plain layer passes 0 with OUT_WIDTH == OC.
  virtual void matmul_forward(Tensor out, std::int64_t out_col_begin, Tensor inp, Tensor weight,
                              const Tensor* bias) = 0;
  // Gradients of matmul_forward for columns [dout_col_begin, +OC) of dout [R, OUT_WIDTH]:
  // dinp [R,C] (dinp_mode) dout·weight, dweight [OC,C] += doutᵀ·inp, dbias [OC] += row sums of
  // dout (dbias may be nullptr: no bias).
  virtual void matmul_backward(Tensor dinp, GradMode dinp_mode, Tensor dweight, Tensor* dbias, Tensor dout,
                               std::int64_t dout_col_begin, Tensor inp, Tensor weight) = 0;

  // LayerNorm over the last dimension: out, inp [R,C]; mean, rstd [R] saved for backward;
  // weight, bias [C].
  virtual void layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight, Tensor bias,
                                 float eps) = 0;
  // dinp [R,C], dweight [C], dbias [C] all accumulated (+=).
  virtual void layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight,
                                  Tensor mean, Tensor rstd) = 0;

  // RMSNorm over the last dimension (kernels/rmsnorm.h): out, inp [R,C]; rstd [R] (fp32) saved for
  // backward; weight [C].
  virtual void rmsnorm_forward(Tensor out, Tensor rstd, Tensor inp, Tensor weight, float eps) = 0;
  // dinp [R,C] and dweight [C] accumulated (+=).
  virtual void rmsnorm_backward(Tensor dinp, Tensor dweight, Tensor dout, Tensor inp, Tensor weight, Tensor rstd) = 0;

  // Fused SwiGLU (kernels/swiglu.h) on [N]-element tensors: out = silu(gate) * up; out may be gate
  // or up.
  virtual void swiglu_forward(Tensor out, Tensor gate, Tensor up) = 0;
  // dgate += and dup += the two gradients; they overlap no input and not each other.
  virtual void swiglu_backward(Tensor dgate, Tensor dup, Tensor dout, Tensor gate, Tensor up) = 0;

  // Rotary position embedding (kernels/rope.h, HF's rotate_half layout) of the heads `heads` names
  // in every row of inp [B,T,S] at positions 0..T-1; cos, sin [P, rotary_dim/2] fp32 tables with
  // P >= T. Written (=), in place when out is inp; elements of a row outside the heads untouched
  // (and, out of place, not written).
  virtual void rope_forward(Tensor out, Tensor inp, Tensor cos, Tensor sin, const RopeHeads& heads) = 0;
  // The transpose rotation: dinp = R(-theta) dout, written (=), in place when dinp is dout.
  virtual void rope_backward(Tensor dinp, Tensor dout, Tensor cos, Tensor sin, const RopeHeads& heads) = 0;

  // Grouped-query attention's K/V sharing (kernels/gqa.h): packed [B,T,(NH+2NKV)hd] (the q|k|v
  // projection's output) to full [B,T,3 NH hd] (the attention kernel's input, one K/V per query
  // head), and the gradient back, each K/V head's gradient the sum over its group of query heads.
  // Both write (=). heads NH, kv_heads NKV (NH a multiple of it); hd is read from full's width.
  virtual void gqa_expand(Tensor full, Tensor packed, std::int64_t heads, std::int64_t kv_heads) = 0;
  virtual void gqa_reduce(Tensor dpacked, Tensor dfull, std::int64_t heads, std::int64_t kv_heads) = 0;

  // GELU (tanh approximation), elementwise on [N]-element tensors; out may be inp.
  virtual void gelu_forward(Tensor out, Tensor inp) = 0;
  // dinp += gelu'(inp) * dout; dinp overlaps neither input.
  virtual void gelu_backward(Tensor dinp, Tensor inp, Tensor dout) = 0;

  // out = a + b elementwise ([N] each); out may be a or b.
  virtual void residual_forward(Tensor out, Tensor a, Tensor b) = 0;
  // da += dout and db += dout.
  virtual void residual_backward(Tensor da, Tensor db, Tensor dout) = 0;

  // out [B,T,C] = wte [V,C][tokens] + wpe [maxT,C][t]. tokens: B*T int32 ids in this device's
  // memory, each < V (not checked here: the caller validates ids on the host). The whole table is
  // one tile of the _rows form below, from row 0: every backend's, the same bits.
  void embedding_forward(Tensor out, std::span<const std::int32_t> tokens, Tensor wte, Tensor wpe) {
    embedding_forward_rows(out, tokens, wte, 0, wpe);
  }
  // dwte [V,C] and dwpe [maxT,C] accumulated (+=) from dout [B,T,C].
  void embedding_backward(Tensor dwte, Tensor dwpe, Tensor dout, std::span<const std::int32_t> tokens) {
    // V: dwte's rows (its elements over its last dimension); a shape that is not [V,C] is the
    // _rows form's to refuse.
    const int rank = dwte.shape().rank();
    const std::int64_t width = rank >= 1 ? dwte.dim(rank - 1) : 0;
    embedding_backward_rows(dwte, 0, dwpe, dout, tokens, width == 0 ? 0 : dwte.numel() / width);
  }
  // The same over a token table tiled along the vocabulary (kernels/embedding.h): wte_rows [rows,C]
  // holds table rows [row_begin, row_begin + rows). The forward writes only the positions whose
  // token lies in that range (tiles covering [0, V) write each position once, with the whole-table
  // bits); the backward adds those positions into dwte_rows, and every position into dwpe unless
  // dwpe has no data. vocab: the whole table's V.
  virtual void embedding_forward_rows(Tensor out, std::span<const std::int32_t> tokens, Tensor wte_rows,
                                      std::int64_t row_begin, Tensor wpe) = 0;
  virtual void embedding_backward_rows(Tensor dwte_rows, std::int64_t row_begin, Tensor dwpe, Tensor dout,
                                       std::span<const std::int32_t> tokens, std::int64_t vocab) = 0;

  // Causal attention over the fused projection's packed qkv [B,T,(NH+2NKV) hd] (q heads, then k
  // heads, then v heads; query head h reads K/V head h / (NH/NKV)): out [B,T,C], lse [B,NH,T]. NH
  // is read from lse's shape, hd = C / NH (C need not be the model's hidden width), NKV from qkv's
  // width; NKV == NH is plain multi-head attention over [B,T,3C]. Both backends' kernels read the
  // groups in place (gqa_expand/gqa_reduce are the reference they are tested against).
  virtual void attention_forward(Tensor out, Tensor lse, Tensor qkv) = 0;
  // dqkv (qkv's shape) accumulated (+=), K/V heads' gradients summed over their group in a fixed
  // fp32 order (the CPU: gqa_reduce's; CUDA: query heads in increasing order into one fp32
  // accumulator, rounded once); out and lse are the forward pass's for this qkv.
  virtual void attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse) = 0;

  // The same attention with rotary positions: the q and k heads of the projection's output qkv
  // (`heads` names them: NH + NKV heads, their head_dim and rotary_dim; cos, sin as rope_forward's)
  // rotated, then attended. The default runs rope_forward on qkv in place, then attention_forward,
  // so qkv holds the rotated q and k afterwards; a backend may instead rotate q and k as its kernel
  // loads them and leave qkv unrotated (CpuOps does: kernels/attention.h's AttentionRope, the same
  // bits). Either way attention_backward_rope takes qkv exactly as this call left it.
  virtual void attention_forward_rope(Tensor out, Tensor lse, Tensor qkv, Tensor cos, Tensor sin,
                                      const RopeHeads& heads) {
    rope_forward(qkv, qkv, cos, sin, heads);
    attention_forward(out, lse, qkv);
  }
  // dqkv = the gradient with respect to the projection's output (unrotated q and k). Precondition:
  // dqkv holds zeros on entry (the default accumulates the attention's gradient into it and then
  // turns dqkv's q and k heads back in place with rope_backward).
  virtual void attention_backward_rope(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse, Tensor cos,
                                       Tensor sin, const RopeHeads& heads) {
    attention_backward(dqkv, dout, qkv, out, lse);
    rope_backward(dqkv, dqkv, cos, sin, heads);
  }

  // Mean cross-entropy of logits [R,V] against targets (R int32 ids < V, this device's memory).
  virtual double cross_entropy_forward(Tensor logits, std::span<const std::int32_t> targets) = 0;
  // dlogits [R,V] = dloss * d(mean loss)/dlogits, OVERWRITTEN; dlogits may be logits (in place).
  virtual void cross_entropy_backward(Tensor dlogits, Tensor logits, std::span<const std::int32_t> targets,
                                      float dloss) = 0;
  // cross_entropy_forward then cross_entropy_backward(dlogits, logits, targets, dloss): the mean
  // loss returned, dlogits overwritten (may be logits). A backend may fuse the two (CPU: one
  // softmax per row instead of three exps per logit) but must give the same loss and gradient.
  virtual double cross_entropy_forward_backward(Tensor dlogits, Tensor logits, std::span<const std::int32_t> targets,
                                                float dloss) {
    const double loss = cross_entropy_forward(logits, targets);
    cross_entropy_backward(dlogits, logits, targets, dloss);
    return loss;
  }
};

}  // namespace zinf::device
