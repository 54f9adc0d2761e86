// CpuOps: shape checks, then the zinf::kernels::cpu call. Activation tensors may be [B,T,C] or
// [R,C]; "rows" is every dimension but the last, multiplied out.
#include "libengine/device/cpu_ops.h"

#include <algorithm>
#include <cstring>

#include "kernels/adam.h"
#include "kernels/attention.h"
#include "kernels/convert.h"
#include "kernels/copy.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/gqa.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/residual.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "libengine/core/check.h"
#include "libengine/device/ops_checks.h"

namespace zinf::device {
namespace {

namespace k = zinf::kernels::cpu;

std::size_t cols(const Tensor& t) {
  ZINF_CHECK(t.shape().rank() >= 1, "tensor has no dimensions");
  return static_cast<std::size_t>(t.dim(t.shape().rank() - 1));
}
std::size_t rows(const Tensor& t) {
  const std::size_t c = cols(t);
  return c == 0 ? 0 : static_cast<std::size_t>(t.numel()) / c;
}
std::size_t n(const Tensor& t) { return static_cast<std::size_t>(t.numel()); }

}  // namespace

void CpuOps::zero(Tensor t) { kernels::cpu::zero_bytes(t.data(), t.bytes()); }

namespace {

kernels::HalfFormat half_format(DType dtype) {
  return dtype == DType::kF16 ? kernels::HalfFormat::kF16 : kernels::HalfFormat::kBF16;
}

// Conversions of large tensors are split into chunks over OpenMP threads (the convert kernels are
// single-threaded by contract); 64 Ki elements per chunk keeps small tensors on one thread.
constexpr std::int64_t kConvertChunk = 64 * 1024;

// dst = src with the element type converted; dtypes differ. bf16 <-> fp16 goes through fp32 one
// chunk at a time (exact widening, then one rounding), as the CUDA kernel does.
void convert(Tensor dst, Tensor src) {
  const std::int64_t total = src.numel();
  const std::int64_t chunks = (total + kConvertChunk - 1) / kConvertChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t begin = c * kConvertChunk;
    const auto count = static_cast<std::size_t>(std::min(kConvertChunk, total - begin));
    if (src.dtype() == DType::kF32) {
      kernels::cpu::f32_to_half(half_format(dst.dtype()), src.f32() + begin, dst.half() + begin, count);
    } else if (dst.dtype() == DType::kF32) {
      kernels::cpu::half_to_f32(half_format(src.dtype()), src.half() + begin, dst.f32() + begin, count);
    } else {
      constexpr std::size_t kPiece = 2048;  // a stack buffer small enough for any thread's stack
      float wide[kPiece];
      for (std::size_t done = 0; done < count; done += kPiece) {
        const std::size_t piece = std::min(kPiece, count - done);
        const auto at = static_cast<std::size_t>(begin) + done;
        kernels::cpu::half_to_f32(half_format(src.dtype()), src.half() + at, wide, piece);
        kernels::cpu::f32_to_half(half_format(dst.dtype()), wide, dst.half() + at, piece);
      }
    }
  }
}

}  // namespace

void CpuOps::copy(Tensor dst, Tensor src) {
  ZINF_CHECK(dst.numel() == src.numel(), "copy: element counts differ");
  if (dst.dtype() != src.dtype()) {
    convert(dst, src);
    return;
  }
  kernels::cpu::copy_bytes(dst.data(), src.data(), dst.bytes());
}

double CpuOps::sum_squares(std::span<const Tensor> tensors) {
  double sum = 0;
  for (const Tensor& t : tensors) {
    sum += t.dtype() == DType::kF32 ? k::sum_squares(t.f32(), n(t))
                                    : k::sum_squares(t.half(), half_format(t.dtype()), n(t));
  }
  return sum;
}

void CpuOps::adam_step(const kernels::AdamHyper& hyper, Tensor master, Tensor exp_avg, Tensor exp_avg_sq, Tensor grad,
                       const Tensor* param_half) {
  ZINF_CHECK(
      exp_avg.numel() == master.numel() && exp_avg_sq.numel() == master.numel() && grad.numel() == master.numel(),
      "adam_step: master, exp_avg, exp_avg_sq and grad differ in size");
  ZINF_CHECK(param_half == nullptr || (param_half->numel() == master.numel() && param_half->dtype() != DType::kF32),
             "adam_step: param_half is not a bf16/fp16 tensor of master's size");
  kernels::AdamSlice slice;
  slice.param = master.f32();
  slice.exp_avg = exp_avg.f32();
  slice.exp_avg_sq = exp_avg_sq.f32();
  slice.n = n(master);
  if (param_half != nullptr) {
    slice.param_half = param_half->half();
    slice.param_half_format = half_format(param_half->dtype());
  }
  if (grad.dtype() == DType::kF32) {
    k::adam_step(hyper, slice, grad.f32());
  } else {
    k::adam_step(hyper, slice, grad.half(), half_format(grad.dtype()));
  }
}

void CpuOps::matmul_forward(Tensor out, std::int64_t out_col_begin, Tensor inp, Tensor weight, const Tensor* bias) {
  ZINF_CHECK(weight.shape().rank() == 2, "matmul_forward: weight is not [OC,C]");
  const auto oc = static_cast<std::size_t>(weight.dim(0));
  const auto c = static_cast<std::size_t>(weight.dim(1));
  ZINF_CHECK(cols(inp) == c, "matmul_forward: inp's last dimension is not weight's C");
  ZINF_CHECK(rows(out) == rows(inp), "matmul_forward: out and inp have different row counts");
  ZINF_CHECK(out_col_begin >= 0 && static_cast<std::size_t>(out_col_begin) + oc <= cols(out),
             "matmul_forward: the column block [out_col_begin, +OC) is outside out");
  ZINF_CHECK(bias == nullptr || (bias->shape().rank() == 1 && n(*bias) == oc), "matmul_forward: bias is not [OC]");
  k::matmul_forward_strided(out.f32() + out_col_begin, cols(out), inp.f32(), weight.f32(),
                            bias == nullptr ? nullptr : bias->f32(), rows(inp), c, oc);
}

void CpuOps::matmul_backward(Tensor dinp, GradMode dinp_mode, Tensor dweight, Tensor* dbias, Tensor dout,
                             std::int64_t dout_col_begin, Tensor inp, Tensor weight) {
  ZINF_CHECK(weight.shape().rank() == 2, "matmul_backward: weight is not [OC,C]");
  const auto oc = static_cast<std::size_t>(weight.dim(0));
  const auto c = static_cast<std::size_t>(weight.dim(1));
  ZINF_CHECK(dweight.shape() == weight.shape(), "matmul_backward: dweight's shape is not weight's");
  ZINF_CHECK(cols(inp) == c && cols(dinp) == c, "matmul_backward: inp/dinp's last dimension is not weight's C");
  ZINF_CHECK(rows(dinp) == rows(inp) && rows(dout) == rows(inp), "matmul_backward: row counts differ");
  ZINF_CHECK(dout_col_begin >= 0 && static_cast<std::size_t>(dout_col_begin) + oc <= cols(dout),
             "matmul_backward: the column block [dout_col_begin, +OC) is outside dout");
  ZINF_CHECK(dbias == nullptr || (dbias->shape().rank() == 1 && n(*dbias) == oc), "matmul_backward: dbias is not [OC]");
  k::matmul_backward_strided(dinp.f32(), dinp_mode == GradMode::kAccumulate, dweight.f32(),
                             dbias == nullptr ? nullptr : dbias->f32(), dout.f32() + dout_col_begin, cols(dout),
                             inp.f32(), weight.f32(), rows(inp), c, oc);
}

void CpuOps::layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight, Tensor bias,
                               float eps) {
  const std::size_t c = cols(inp), r = rows(inp);
  ZINF_CHECK(out.shape() == inp.shape(), "layernorm_forward: out's shape is not inp's");
  ZINF_CHECK(n(mean) == r && n(rstd) == r, "layernorm_forward: mean/rstd are not [R]");
  ZINF_CHECK(n(weight) == c && n(bias) == c, "layernorm_forward: weight/bias are not [C]");
  k::layernorm_forward(out.f32(), mean.f32(), rstd.f32(), inp.f32(), weight.f32(), bias.f32(), r, c, eps);
}

void CpuOps::layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight,
                                Tensor mean, Tensor rstd) {
  const std::size_t c = cols(inp), r = rows(inp);
  ZINF_CHECK(dinp.shape() == inp.shape() && dout.shape() == inp.shape(),
             "layernorm_backward: dinp/dout's shape is not inp's");
  ZINF_CHECK(n(mean) == r && n(rstd) == r, "layernorm_backward: mean/rstd are not [R]");
  ZINF_CHECK(n(weight) == c && n(dweight) == c && n(dbias) == c,
             "layernorm_backward: weight/dweight/dbias are not [C]");
  k::layernorm_backward(dinp.f32(), dweight.f32(), dbias.f32(), dout.f32(), inp.f32(), weight.f32(), mean.f32(),
                        rstd.f32(), r, c);
}

void CpuOps::rmsnorm_forward(Tensor out, Tensor rstd, Tensor inp, Tensor weight, float eps) {
  const std::size_t c = cols(inp), r = rows(inp);
  ZINF_CHECK(out.shape() == inp.shape(), "rmsnorm_forward: out's shape is not inp's");
  ZINF_CHECK(n(rstd) == r, "rmsnorm_forward: rstd is not [R]");
  ZINF_CHECK(n(weight) == c, "rmsnorm_forward: weight is not [C]");
  k::rmsnorm_forward(out.f32(), rstd.f32(), inp.f32(), weight.f32(), r, c, eps);
}

void CpuOps::rmsnorm_backward(Tensor dinp, Tensor dweight, Tensor dout, Tensor inp, Tensor weight, Tensor rstd) {
  const std::size_t c = cols(inp), r = rows(inp);
  ZINF_CHECK(dinp.shape() == inp.shape() && dout.shape() == inp.shape(),
             "rmsnorm_backward: dinp/dout's shape is not inp's");
  ZINF_CHECK(n(rstd) == r, "rmsnorm_backward: rstd is not [R]");
  ZINF_CHECK(n(weight) == c && n(dweight) == c, "rmsnorm_backward: weight/dweight are not [C]");
  k::rmsnorm_backward(dinp.f32(), dweight.f32(), dout.f32(), inp.f32(), weight.f32(), rstd.f32(), r, c);
}

void CpuOps::swiglu_forward(Tensor out, Tensor gate, Tensor up) {
  ZINF_CHECK(out.numel() == gate.numel() && up.numel() == gate.numel(), "swiglu_forward: tensors differ in size");
  k::swiglu_forward(out.f32(), gate.f32(), up.f32(), n(gate));
}

void CpuOps::swiglu_backward(Tensor dgate, Tensor dup, Tensor dout, Tensor gate, Tensor up) {
  ZINF_CHECK(dgate.numel() == gate.numel() && dup.numel() == gate.numel() && dout.numel() == gate.numel() &&
                 up.numel() == gate.numel(),
             "swiglu_backward: tensors differ in size");
  k::swiglu_backward(dgate.f32(), dup.f32(), dout.f32(), gate.f32(), up.f32(), n(gate));
}

namespace {
k::RopeShape rope_shape(const Tensor& inp, const RopeHeads& h) {
  return {.batch = static_cast<std::size_t>(inp.dim(0)),
          .seq_len = static_cast<std::size_t>(inp.dim(1)),
          .row_stride = static_cast<std::size_t>(inp.dim(2)),
          .heads = static_cast<std::size_t>(h.heads),
          .head_dim = static_cast<std::size_t>(h.head_dim),
          .rotary_dim = static_cast<std::size_t>(h.rotary_dim),
          .pos_offset = 0};
}
kernels::GqaShape gqa_shape(const Tensor& full, std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim) {
  return {.rows = rows(full),
          .heads = static_cast<std::size_t>(heads),
          .kv_heads = static_cast<std::size_t>(kv_heads),
          .head_dim = static_cast<std::size_t>(head_dim)};
}
}  // namespace

void CpuOps::rope_forward(Tensor out, Tensor inp, Tensor cos, Tensor sin, const RopeHeads& heads) {
  check_rope(out, inp, cos, sin, heads);
  k::rope_forward(out.f32(), inp.f32(), cos.f32(), sin.f32(), rope_shape(inp, heads));
}

void CpuOps::rope_backward(Tensor dinp, Tensor dout, Tensor cos, Tensor sin, const RopeHeads& heads) {
  check_rope(dinp, dout, cos, sin, heads);
  k::rope_backward(dinp.f32(), dout.f32(), cos.f32(), sin.f32(), rope_shape(dout, heads));
}

void CpuOps::gqa_expand(Tensor full, Tensor packed, std::int64_t heads, std::int64_t kv_heads) {
  const std::int64_t head_dim = gqa_head_dim(full, packed, heads, kv_heads);
  k::gqa_expand(full.f32(), packed.f32(), gqa_shape(full, heads, kv_heads, head_dim));
}

void CpuOps::gqa_reduce(Tensor dpacked, Tensor dfull, std::int64_t heads, std::int64_t kv_heads) {
  const std::int64_t head_dim = gqa_head_dim(dfull, dpacked, heads, kv_heads);
  k::gqa_reduce(dpacked.f32(), dfull.f32(), gqa_shape(dfull, heads, kv_heads, head_dim));
}

void CpuOps::gelu_forward(Tensor out, Tensor inp) {
  ZINF_CHECK(out.numel() == inp.numel(), "gelu_forward: out and inp differ in size");
  k::gelu_forward(out.f32(), inp.f32(), n(inp));
}

void CpuOps::gelu_backward(Tensor dinp, Tensor inp, Tensor dout) {
  ZINF_CHECK(dinp.numel() == inp.numel() && dout.numel() == inp.numel(), "gelu_backward: tensors differ in size");
  k::gelu_backward(dinp.f32(), inp.f32(), dout.f32(), n(inp));
}

void CpuOps::residual_forward(Tensor out, Tensor a, Tensor b) {
  ZINF_CHECK(out.numel() == a.numel() && b.numel() == a.numel(), "residual_forward: tensors differ in size");
  k::residual_forward(out.f32(), a.f32(), b.f32(), n(a));
}

void CpuOps::residual_backward(Tensor da, Tensor db, Tensor dout) {
  ZINF_CHECK(da.numel() == dout.numel() && db.numel() == dout.numel(), "residual_backward: tensors differ in size");
  k::residual_backward(da.f32(), db.f32(), dout.f32(), n(dout));
}

void CpuOps::embedding_forward_rows(Tensor out, std::span<const std::int32_t> tokens, Tensor wte_rows,
                                    std::int64_t row_begin, Tensor wpe) {
  ZINF_CHECK(out.shape().rank() == 3, "embedding_forward_rows: out is not [B,T,C]");
  const auto b = static_cast<std::size_t>(out.dim(0)), t = static_cast<std::size_t>(out.dim(1)), c = cols(out);
  ZINF_CHECK(tokens.size() == b * t, "embedding_forward_rows: tokens are not B*T ids");
  ZINF_CHECK(cols(wte_rows) == c && cols(wpe) == c, "embedding_forward_rows: wte/wpe's last dimension is not C");
  ZINF_CHECK(rows(wpe) >= t && row_begin >= 0, "embedding_forward_rows: wpe has fewer than T positions");
  k::embedding_forward_rows(out.f32(), tokens.data(), wte_rows.f32(), static_cast<std::size_t>(row_begin),
                            rows(wte_rows), wpe.f32(), b, t, c);
}

void CpuOps::embedding_backward_rows(Tensor dwte_rows, std::int64_t row_begin, Tensor dwpe, Tensor dout,
                                     std::span<const std::int32_t> tokens, std::int64_t vocab) {
  ZINF_CHECK(dout.shape().rank() == 3, "embedding_backward_rows: dout is not [B,T,C]");
  const auto b = static_cast<std::size_t>(dout.dim(0)), t = static_cast<std::size_t>(dout.dim(1)), c = cols(dout);
  ZINF_CHECK(tokens.size() == b * t, "embedding_backward_rows: tokens are not B*T ids");
  ZINF_CHECK(cols(dwte_rows) == c, "embedding_backward_rows: dwte's last dimension is not C");
  ZINF_CHECK(row_begin >= 0 && row_begin + static_cast<std::int64_t>(rows(dwte_rows)) <= vocab,
             "embedding_backward_rows: the rows lie outside the vocabulary");
  const bool positions = dwpe.data() != nullptr;
  ZINF_CHECK(!positions || (cols(dwpe) == c && rows(dwpe) >= t), "embedding_backward_rows: dwpe is not [>=T,C]");
  k::embedding_backward_rows(dwte_rows.f32(), static_cast<std::size_t>(row_begin), rows(dwte_rows),
                             positions ? dwpe.f32() : nullptr, dout.f32(), tokens.data(), b, t, c);
}

void CpuOps::attention_forward(Tensor out, Tensor lse, Tensor qkv) {
  const AttentionHeads h = attention_heads(out, lse, qkv);
  k::attention_forward(out.f32(), lse.f32(), qkv.f32(), static_cast<std::size_t>(out.dim(0)),
                       static_cast<std::size_t>(out.dim(1)), cols(out), static_cast<std::size_t>(h.heads),
                       static_cast<std::size_t>(h.kv_heads));
}

void CpuOps::attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse) {
  const AttentionHeads h = attention_heads(out, lse, qkv);
  ZINF_CHECK(dqkv.shape() == qkv.shape() && dout.shape() == out.shape(),
             "attention_backward: dqkv/dout's shape is not qkv/out's");
  k::attention_backward(dqkv.f32(), dout.f32(), qkv.f32(), out.f32(), lse.f32(), static_cast<std::size_t>(out.dim(0)),
                        static_cast<std::size_t>(out.dim(1)), cols(out), static_cast<std::size_t>(h.heads),
                        static_cast<std::size_t>(h.kv_heads));
}

namespace {
// The fused rotation of an attention_*_rope call, after checking that `heads` names qkv's q and k
// heads at the attention's head size.
k::AttentionRope attention_rope(const Tensor& qkv, const Tensor& cos, const Tensor& sin, const RopeHeads& heads,
                                const AttentionHeads& h, std::int64_t head_dim) {
  check_rope(qkv, qkv, cos, sin, heads);
  ZINF_CHECK(heads.heads == h.heads + h.kv_heads && heads.head_dim == head_dim,
             "attention_rope: the rotated heads are not the attention's q and k heads");
  return {cos.f32(), sin.f32(), static_cast<std::size_t>(heads.rotary_dim), 0};
}
}  // namespace

void CpuOps::attention_forward_rope(Tensor out, Tensor lse, Tensor qkv, Tensor cos, Tensor sin,
                                    const RopeHeads& heads) {
  const AttentionHeads h = attention_heads(out, lse, qkv);
  const k::AttentionRope rope = attention_rope(qkv, cos, sin, heads, h, out.dim(2) / h.heads);
  k::attention_forward(out.f32(), lse.f32(), qkv.f32(), static_cast<std::size_t>(out.dim(0)),
                       static_cast<std::size_t>(out.dim(1)), cols(out), static_cast<std::size_t>(h.heads),
                       static_cast<std::size_t>(h.kv_heads), rope);
}

void CpuOps::attention_backward_rope(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse, Tensor cos,
                                     Tensor sin, const RopeHeads& heads) {
  const AttentionHeads h = attention_heads(out, lse, qkv);
  ZINF_CHECK(dqkv.shape() == qkv.shape() && dout.shape() == out.shape(),
             "attention_backward_rope: dqkv/dout's shape is not qkv/out's");
  const k::AttentionRope rope = attention_rope(qkv, cos, sin, heads, h, out.dim(2) / h.heads);
  k::attention_backward(dqkv.f32(), dout.f32(), qkv.f32(), out.f32(), lse.f32(), static_cast<std::size_t>(out.dim(0)),
                        static_cast<std::size_t>(out.dim(1)), cols(out), static_cast<std::size_t>(h.heads),
                        static_cast<std::size_t>(h.kv_heads), rope);
}

double CpuOps::cross_entropy_forward(Tensor logits, std::span<const std::int32_t> targets) {
  ZINF_CHECK(targets.size() == rows(logits), "cross_entropy_forward: targets are not R ids");
  return k::cross_entropy_forward(nullptr, logits.f32(), targets.data(), rows(logits), cols(logits));
}

void CpuOps::cross_entropy_backward(Tensor dlogits, Tensor logits, std::span<const std::int32_t> targets, float dloss) {
  ZINF_CHECK(dlogits.shape() == logits.shape(), "cross_entropy_backward: dlogits's shape is not logits's");
  ZINF_CHECK(targets.size() == rows(logits), "cross_entropy_backward: targets are not R ids");
  k::cross_entropy_backward(dlogits.f32(), logits.f32(), targets.data(), dloss, rows(logits), cols(logits));
}

double CpuOps::cross_entropy_forward_backward(Tensor dlogits, Tensor logits, std::span<const std::int32_t> targets,
                                              float dloss) {
  ZINF_CHECK(dlogits.shape() == logits.shape(), "cross_entropy_forward_backward: dlogits's shape is not logits's");
  ZINF_CHECK(targets.size() == rows(logits), "cross_entropy_forward_backward: targets are not R ids");
  return k::cross_entropy_forward_backward(dlogits.f32(), logits.f32(), targets.data(), dloss, rows(logits),
                                           cols(logits));
}

}  // namespace zinf::device
