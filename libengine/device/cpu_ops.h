// CpuOps: the CPU backend of Ops. Each method checks the tensors' shapes against each other and
// forwards to the matching zinf::kernels::cpu function (OpenMP-threaded kernels, OpenBLAS GEMMs),
// running inline on the calling thread. It holds no state and allocates nothing. Activations are
// fp32 only (supports_compute_dtype); bf16/fp16 appear only in copy() conversions and the
// optimizer's gradients and half parameter copies.
#pragma once

#include "libengine/device/ops.h"

namespace zinf::device {

class CpuOps final : public Ops {
 public:
  bool supports_compute_dtype(DType dtype) const override { return dtype == DType::kF32; }
  void zero(Tensor t) override;
  void copy(Tensor dst, Tensor src) override;
  double sum_squares(std::span<const Tensor> tensors) override;
  void adam_step(const kernels::AdamHyper& hyper, Tensor master, Tensor exp_avg, Tensor exp_avg_sq, Tensor grad,
                 const Tensor* param_half) override;
  void matmul_forward(Tensor out, std::int64_t out_col_begin, Tensor inp, Tensor weight, const Tensor* bias) override;
  void matmul_backward(Tensor dinp, GradMode dinp_mode, Tensor dweight, Tensor* dbias, Tensor dout,
                       std::int64_t dout_col_begin, Tensor inp, Tensor weight) override;
  void layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight, Tensor bias,
                         float eps) override;
  void layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight,
                          Tensor mean, Tensor rstd) override;
  void rmsnorm_forward(Tensor out, Tensor rstd, Tensor inp, Tensor weight, float eps) override;
  void rmsnorm_backward(Tensor dinp, Tensor dweight, Tensor dout, Tensor inp, Tensor weight, Tensor rstd) override;
  void swiglu_forward(Tensor out, Tensor gate, Tensor up) override;
  void swiglu_backward(Tensor dgate, Tensor dup, Tensor dout, Tensor gate, Tensor up) override;
  void rope_forward(Tensor out, Tensor inp, Tensor cos, Tensor sin, const RopeHeads& heads) override;
  void rope_backward(Tensor dinp, Tensor dout, Tensor cos, Tensor sin, const RopeHeads& heads) override;
  void gqa_expand(Tensor full, Tensor packed, std::int64_t heads, std::int64_t kv_heads) override;
  void gqa_reduce(Tensor dpacked, Tensor dfull, std::int64_t heads, std::int64_t kv_heads) override;
  void gelu_forward(Tensor out, Tensor inp) override;
  void gelu_backward(Tensor dinp, Tensor inp, Tensor dout) override;
  void residual_forward(Tensor out, Tensor a, Tensor b) override;
  void residual_backward(Tensor da, Tensor db, Tensor dout) override;
  void embedding_forward_rows(Tensor out, std::span<const std::int32_t> tokens, Tensor wte_rows, std::int64_t row_begin,
                              Tensor wpe) override;
  void embedding_backward_rows(Tensor dwte_rows, std::int64_t row_begin, Tensor dwpe, Tensor dout,
                               std::span<const std::int32_t> tokens, std::int64_t vocab) override;
  void attention_forward(Tensor out, Tensor lse, Tensor qkv) override;
  void attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse) override;
  // RoPE fused into the attention kernel's Q/K load: qkv is left unrotated (measured faster than
  // the separate pass, docs/performance.md).
  void attention_forward_rope(Tensor out, Tensor lse, Tensor qkv, Tensor cos, Tensor sin,
                              const RopeHeads& heads) override;
  void attention_backward_rope(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse, Tensor cos, Tensor sin,
                               const RopeHeads& heads) override;
  double cross_entropy_forward(Tensor logits, std::span<const std::int32_t> targets) override;
  void cross_entropy_backward(Tensor dlogits, Tensor logits, std::span<const std::int32_t> targets,
                              float dloss) override;
  double cross_entropy_forward_backward(Tensor dlogits, Tensor logits, std::span<const std::int32_t> targets,
                                        float dloss) override;
};

}  // namespace zinf::device
