// CudaOps (see cuda_ops.h), the layers' kernels: LayerNorm, RMSNorm, SwiGLU, RoPE, the GQA K/V
// expansion and reduction, GELU, residuals, embeddings and attention — shape and dtype checks,
// then the kernels::cuda launch on the compute stream (cuda_ops.cpp has the rest of the ops).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "kernels/attention.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/gqa.h"
#include "kernels/layernorm.h"
#include "kernels/residual.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "libengine/core/check.h"
#include "libengine/device/cuda_check.h"
#include "libengine/device/cuda_device.h"
#include "libengine/device/cuda_ops.h"
#include "libengine/device/cuda_ops_support.h"
#include "libengine/device/ops_checks.h"

namespace zinf::device {
namespace {

namespace k = zinf::kernels::cuda;
using cuda_ops_detail::cols;
using cuda_ops_detail::elem_of;
using cuda_ops_detail::rows;
using k::Elem;

// Checks qkv [B,T,(NH+2NKV) hd], out [B,T,C], lse [B,NH,T] against each other and ops.h's dtypes;
// returns NH and NKV.
AttentionHeads check_attention(const Tensor& out, const Tensor& lse, const Tensor& qkv) {
  const AttentionHeads heads = attention_heads(out, lse, qkv);
  ZINF_CHECK(out.dtype() == qkv.dtype(), "attention: out and qkv differ in dtype (both are the compute dtype)");
  ZINF_CHECK(lse.dtype() == DType::kF32, "attention: lse is not fp32");
  return heads;
}

}  // namespace

void CudaOps::layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight, Tensor bias,
                                float eps) {
  const std::int64_t c = cols(inp);
  const std::int64_t r = rows(inp);
  ZINF_CHECK(out.shape() == inp.shape(), "layernorm_forward: out's shape is not inp's");
  ZINF_CHECK(mean.numel() == r && rstd.numel() == r, "layernorm_forward: mean/rstd are not [R]");
  ZINF_CHECK(weight.numel() == c && bias.numel() == c, "layernorm_forward: weight/bias are not [C]");
  ZINF_CHECK(out.dtype() == inp.dtype() && weight.dtype() == inp.dtype() && bias.dtype() == inp.dtype(),
             "layernorm_forward: out, inp, weight and bias differ in dtype (all are the compute dtype)");
  ZINF_CHECK(mean.dtype() == DType::kF32 && rstd.dtype() == DType::kF32, "layernorm_forward: mean/rstd are not fp32");
  if (r == 0 || !activate()) return;
  ZINF_LAUNCH(layernorm_forward, elem_of(inp.dtype()), out.data(), mean.f32(), rstd.f32(), inp.data(), weight.data(),
              bias.data(), r, c, eps, stream());
}

void CudaOps::layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight,
                                 Tensor mean, Tensor rstd) {
  const std::int64_t c = cols(inp);
  const std::int64_t r = rows(inp);
  ZINF_CHECK(dinp.shape() == inp.shape() && dout.shape() == inp.shape(),
             "layernorm_backward: dinp/dout's shape is not inp's");
  ZINF_CHECK(mean.numel() == r && rstd.numel() == r, "layernorm_backward: mean/rstd are not [R]");
  ZINF_CHECK(weight.numel() == c && dweight.numel() == c && dbias.numel() == c,
             "layernorm_backward: weight/dweight/dbias are not [C]");
  ZINF_CHECK(dinp.dtype() == inp.dtype() && dout.dtype() == inp.dtype() && weight.dtype() == inp.dtype(),
             "layernorm_backward: dinp, dout, inp and weight differ in dtype (all are the compute dtype)");
  ZINF_CHECK(dweight.dtype() == DType::kF32 && dbias.dtype() == DType::kF32 && mean.dtype() == DType::kF32 &&
                 rstd.dtype() == DType::kF32,
             "layernorm_backward: dweight/dbias/mean/rstd are not fp32");
  if (r == 0 || !activate() || !ensure_scratch(k::layernorm_backward_scratch_bytes(r, c))) return;
  ZINF_LAUNCH(layernorm_backward, elem_of(inp.dtype()), dinp.data(), dweight.f32(), dbias.f32(), dout.data(),
              inp.data(), weight.data(), mean.f32(), rstd.f32(), r, c, scratch_.data(), scratch_.bytes(), stream());
}

void CudaOps::rmsnorm_forward(Tensor out, Tensor rstd, Tensor inp, Tensor weight, float eps) {
  const std::int64_t c = cols(inp);
  const std::int64_t r = rows(inp);
  ZINF_CHECK(out.shape() == inp.shape(), "rmsnorm_forward: out's shape is not inp's");
  ZINF_CHECK(rstd.numel() == r && weight.numel() == c, "rmsnorm_forward: rstd is not [R] or weight not [C]");
  ZINF_CHECK(out.dtype() == inp.dtype() && weight.dtype() == inp.dtype() && rstd.dtype() == DType::kF32,
             "rmsnorm_forward: out, inp, weight are not one compute dtype, or rstd is not fp32");
  if (r == 0 || !activate()) return;
  ZINF_LAUNCH(rmsnorm_forward, elem_of(inp.dtype()), out.data(), rstd.f32(), inp.data(), weight.data(), r, c, eps,
              stream());
}

void CudaOps::rmsnorm_backward(Tensor dinp, Tensor dweight, Tensor dout, Tensor inp, Tensor weight, Tensor rstd) {
  const std::int64_t c = cols(inp);
  const std::int64_t r = rows(inp);
  ZINF_CHECK(dinp.shape() == inp.shape() && dout.shape() == inp.shape(),
             "rmsnorm_backward: dinp/dout's shape is not inp's");
  ZINF_CHECK(rstd.numel() == r && weight.numel() == c && dweight.numel() == c,
             "rmsnorm_backward: rstd is not [R] or weight/dweight not [C]");
  ZINF_CHECK(dinp.dtype() == inp.dtype() && dout.dtype() == inp.dtype() && weight.dtype() == inp.dtype() &&
                 dweight.dtype() == DType::kF32 && rstd.dtype() == DType::kF32,
             "rmsnorm_backward: dinp, dout, inp, weight are not one compute dtype, or dweight/rstd not fp32");
  if (r == 0 || !activate() || !ensure_scratch(k::rmsnorm_backward_scratch_bytes(r, c))) return;
  ZINF_LAUNCH(rmsnorm_backward, elem_of(inp.dtype()), dinp.data(), dweight.f32(), dout.data(), inp.data(),
              weight.data(), rstd.f32(), r, c, scratch_.data(), scratch_.bytes(), stream());
}

void CudaOps::swiglu_forward(Tensor out, Tensor gate, Tensor up) {
  ZINF_CHECK(out.numel() == gate.numel() && up.numel() == gate.numel(), "swiglu_forward: tensors differ in size");
  ZINF_CHECK(out.dtype() == gate.dtype() && up.dtype() == gate.dtype(), "swiglu_forward: tensors differ in dtype");
  if (gate.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(swiglu_forward, elem_of(gate.dtype()), out.data(), gate.data(), up.data(), gate.numel(), stream());
}

void CudaOps::swiglu_backward(Tensor dgate, Tensor dup, Tensor dout, Tensor gate, Tensor up) {
  ZINF_CHECK(dgate.numel() == gate.numel() && dup.numel() == gate.numel() && dout.numel() == gate.numel() &&
                 up.numel() == gate.numel(),
             "swiglu_backward: tensors differ in size");
  ZINF_CHECK(dgate.dtype() == gate.dtype() && dup.dtype() == gate.dtype() && dout.dtype() == gate.dtype() &&
                 up.dtype() == gate.dtype(),
             "swiglu_backward: tensors differ in dtype");
  if (gate.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(swiglu_backward, elem_of(gate.dtype()), dgate.data(), dup.data(), dout.data(), gate.data(), up.data(),
              gate.numel(), stream());
}

namespace {
kernels::cpu::RopeShape rope_shape(const Tensor& inp, const RopeHeads& h) {
  return {.batch = static_cast<std::size_t>(inp.dim(0)),
          .seq_len = static_cast<std::size_t>(inp.dim(1)),
          .row_stride = static_cast<std::size_t>(inp.dim(2)),
          .heads = static_cast<std::size_t>(h.heads),
          .head_dim = static_cast<std::size_t>(h.head_dim),
          .rotary_dim = static_cast<std::size_t>(h.rotary_dim),
          .pos_offset = 0};
}
kernels::GqaShape gqa_shape(const Tensor& full, std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim) {
  return {.rows = static_cast<std::size_t>(rows(full)),
          .heads = static_cast<std::size_t>(heads),
          .kv_heads = static_cast<std::size_t>(kv_heads),
          .head_dim = static_cast<std::size_t>(head_dim)};
}
}  // namespace

void CudaOps::rope_forward(Tensor out, Tensor inp, Tensor cos, Tensor sin, const RopeHeads& heads) {
  check_rope(out, inp, cos, sin, heads);
  if (inp.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(rope_forward, elem_of(inp.dtype()), out.data(), inp.data(), cos.f32(), sin.f32(), rope_shape(inp, heads),
              stream());
}

void CudaOps::rope_backward(Tensor dinp, Tensor dout, Tensor cos, Tensor sin, const RopeHeads& heads) {
  check_rope(dinp, dout, cos, sin, heads);
  if (dout.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(rope_backward, elem_of(dout.dtype()), dinp.data(), dout.data(), cos.f32(), sin.f32(),
              rope_shape(dout, heads), stream());
}

void CudaOps::gqa_expand(Tensor full, Tensor packed, std::int64_t heads, std::int64_t kv_heads) {
  const std::int64_t head_dim = gqa_head_dim(full, packed, heads, kv_heads);
  if (full.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(gqa_expand, elem_of(full.dtype()), full.data(), packed.data(), gqa_shape(full, heads, kv_heads, head_dim),
              stream());
}

void CudaOps::gqa_reduce(Tensor dpacked, Tensor dfull, std::int64_t heads, std::int64_t kv_heads) {
  const std::int64_t head_dim = gqa_head_dim(dfull, dpacked, heads, kv_heads);
  if (dfull.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(gqa_reduce, elem_of(dfull.dtype()), dpacked.data(), dfull.data(),
              gqa_shape(dfull, heads, kv_heads, head_dim), stream());
}

void CudaOps::gelu_forward(Tensor out, Tensor inp) {
  ZINF_CHECK(out.numel() == inp.numel(), "gelu_forward: out and inp differ in size");
  ZINF_CHECK(out.dtype() == inp.dtype(), "gelu_forward: out and inp differ in dtype");
  if (inp.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(gelu_forward, elem_of(inp.dtype()), out.data(), inp.data(), inp.numel(), stream());
}

void CudaOps::gelu_backward(Tensor dinp, Tensor inp, Tensor dout) {
  ZINF_CHECK(dinp.numel() == inp.numel() && dout.numel() == inp.numel(), "gelu_backward: tensors differ in size");
  ZINF_CHECK(dinp.dtype() == inp.dtype() && dout.dtype() == inp.dtype(), "gelu_backward: tensors differ in dtype");
  if (inp.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(gelu_backward, elem_of(inp.dtype()), dinp.data(), inp.data(), dout.data(), inp.numel(), stream());
}

void CudaOps::residual_forward(Tensor out, Tensor a, Tensor b) {
  ZINF_CHECK(out.numel() == a.numel() && b.numel() == a.numel(), "residual_forward: tensors differ in size");
  ZINF_CHECK(out.dtype() == a.dtype() && b.dtype() == a.dtype(), "residual_forward: tensors differ in dtype");
  if (a.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(residual_forward, elem_of(a.dtype()), out.data(), a.data(), b.data(), a.numel(), stream());
}

void CudaOps::residual_backward(Tensor da, Tensor db, Tensor dout) {
  ZINF_CHECK(da.numel() == dout.numel() && db.numel() == dout.numel(), "residual_backward: tensors differ in size");
  ZINF_CHECK(da.dtype() == dout.dtype() && db.dtype() == dout.dtype(), "residual_backward: tensors differ in dtype");
  if (dout.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(residual_backward, elem_of(dout.dtype()), da.data(), db.data(), dout.data(), dout.numel(), stream());
}

void CudaOps::embedding_forward_rows(Tensor out, std::span<const std::int32_t> tokens, Tensor wte_rows,
                                     std::int64_t row_begin, Tensor wpe) {
  ZINF_CHECK(out.shape().rank() == 3, "embedding_forward_rows: out is not [B,T,C]");
  const std::int64_t b = out.dim(0);
  const std::int64_t t = out.dim(1);
  const std::int64_t c = cols(out);
  ZINF_CHECK(static_cast<std::int64_t>(tokens.size()) == b * t, "embedding_forward_rows: tokens are not B*T ids");
  ZINF_CHECK(cols(wte_rows) == c && cols(wpe) == c, "embedding_forward_rows: wte/wpe's last dimension is not C");
  ZINF_CHECK(rows(wpe) >= t && row_begin >= 0, "embedding_forward_rows: wpe has fewer than T positions");
  ZINF_CHECK(wte_rows.dtype() == out.dtype() && wpe.dtype() == out.dtype(),
             "embedding_forward_rows: out, wte and wpe differ in dtype (all are the compute dtype)");
  if (out.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(embedding_forward_rows, elem_of(out.dtype()), out.data(), tokens.data(), wte_rows.data(), row_begin,
              rows(wte_rows), wpe.data(), b, t, c, stream());
}

void CudaOps::embedding_backward_rows(Tensor dwte_rows, std::int64_t row_begin, Tensor dwpe, Tensor dout,
                                      std::span<const std::int32_t> tokens, std::int64_t vocab) {
  ZINF_CHECK(dout.shape().rank() == 3, "embedding_backward_rows: dout is not [B,T,C]");
  const std::int64_t b = dout.dim(0);
  const std::int64_t t = dout.dim(1);
  const std::int64_t c = cols(dout);
  ZINF_CHECK(static_cast<std::int64_t>(tokens.size()) == b * t, "embedding_backward_rows: tokens are not B*T ids");
  ZINF_CHECK(cols(dwte_rows) == c && dwte_rows.dtype() == DType::kF32,
             "embedding_backward_rows: dwte is not fp32 [rows,C]");
  ZINF_CHECK(row_begin >= 0 && row_begin + rows(dwte_rows) <= vocab,
             "embedding_backward_rows: the rows lie outside the vocabulary");
  const bool positions = dwpe.data() != nullptr;
  ZINF_CHECK(!positions || (cols(dwpe) == c && rows(dwpe) >= t && dwpe.dtype() == DType::kF32),
             "embedding_backward_rows: dwpe is not fp32 [>=T,C]");
  if (dout.numel() == 0 || !activate()) return;
  if (!ensure_scratch(k::embedding_backward_scratch_bytes(b, t, c, vocab))) return;
  ZINF_LAUNCH(embedding_backward_rows, elem_of(dout.dtype()), dwte_rows.f32(), row_begin, rows(dwte_rows),
              positions ? dwpe.f32() : nullptr, dout.data(), tokens.data(), b, t, c, vocab, scratch_.data(),
              scratch_.bytes(), stream());
}

// The CUDA attention kernels read grouped K/V heads in place from the packed qkv and sum each K/V
// head's gradient over its group inside the kernel (kernels/attention.h), so MHA, GQA and MQA take
// the same path: no expansion, no scratch beyond the kernel's own.
void CudaOps::attention_forward(Tensor out, Tensor lse, Tensor qkv) {
  const AttentionHeads h = check_attention(out, lse, qkv);
  if (out.numel() == 0 || !activate()) return;
  ZINF_LAUNCH(attention_forward, elem_of(qkv.dtype()), out.data(), lse.f32(), qkv.data(), out.dim(0), out.dim(1),
              cols(out), h.heads, h.kv_heads, stream());
}

void CudaOps::attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse) {
  const AttentionHeads h = check_attention(out, lse, qkv);
  ZINF_CHECK(dqkv.shape() == qkv.shape() && dout.shape() == out.shape(),
             "attention_backward: dqkv/dout's shape is not qkv/out's");
  ZINF_CHECK(dqkv.dtype() == qkv.dtype() && dout.dtype() == qkv.dtype(),
             "attention_backward: dqkv, dout and qkv differ in dtype (all are the compute dtype)");
  if (out.numel() == 0 || !activate()) return;
  const std::int64_t b = out.dim(0);
  const std::int64_t t = out.dim(1);
  const std::int64_t c = cols(out);
  if (!ensure_scratch(k::attention_backward_scratch_bytes(b, t, c, h.heads))) return;
  ZINF_LAUNCH(attention_backward, elem_of(qkv.dtype()), dqkv.data(), dout.data(), qkv.data(), out.data(), lse.f32(), b,
              t, c, h.heads, h.kv_heads, scratch_.data(), scratch_.bytes(), stream());
}

}  // namespace zinf::device
