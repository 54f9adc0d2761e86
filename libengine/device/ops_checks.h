// Shape checks the backends' Ops share (device/cpu_ops.cpp, device/cuda_ops.cpp), so that both
// refuse the same malformed calls with the same message. Internal to device/; a failed check is a
// bug in the caller (ZINF_CHECK), as ops.h says.
#pragma once

#include <cstdint>

#include "libengine/core/check.h"
#include "libengine/device/ops.h"
#include "libengine/tensor/tensor.h"

namespace zinf::device {

// An attention call's heads: NH query heads, NKV key/value heads.
struct AttentionHeads {
  std::int64_t heads;
  std::int64_t kv_heads;
};

// Checks qkv [B,T,(NH+2NKV) hd], out [B,T,C = NH hd] and lse [B,NH,T] against each other (NH from
// lse, hd = C / NH, NKV from qkv's width, NH a multiple of NKV); returns NH and NKV.
inline AttentionHeads attention_heads(const Tensor& out, const Tensor& lse, const Tensor& qkv) {
  ZINF_CHECK(out.shape().rank() == 3 && qkv.shape().rank() == 3 && lse.shape().rank() == 3,
             "attention: out/qkv/lse are not rank 3");
  ZINF_CHECK(qkv.dim(0) == out.dim(0) && qkv.dim(1) == out.dim(1), "attention: qkv is not [B,T,*] for out [B,T,C]");
  ZINF_CHECK(lse.dim(0) == out.dim(0) && lse.dim(2) == out.dim(1), "attention: lse is not [B,NH,T]");
  const std::int64_t heads = lse.dim(1);
  ZINF_CHECK(heads >= 1 && out.dim(2) % heads == 0, "attention: NH does not divide C");
  const std::int64_t head_dim = out.dim(2) / heads;
  const std::int64_t kv_width = qkv.dim(2) - out.dim(2);
  ZINF_CHECK(head_dim >= 1 && kv_width > 0 && kv_width % (2 * head_dim) == 0,
             "attention: qkv is not [B,T,(NH+2NKV) hd] for out [B,T,NH hd]");
  const std::int64_t kv_heads = kv_width / (2 * head_dim);
  ZINF_CHECK(heads % kv_heads == 0, "attention: NH is not a multiple of NKV");
  return {heads, kv_heads};
}

// Checks a rope call: inp, out [B,T,S] of one shape, the heads inside S, cos/sin fp32 [P,rd/2]
// with P >= T. Returns nothing; a mismatch is a bug.
inline void check_rope(const Tensor& out, const Tensor& inp, const Tensor& cos, const Tensor& sin, const RopeHeads& h) {
  ZINF_CHECK(inp.shape().rank() == 3 && out.shape() == inp.shape(), "rope: inp/out are not one [B,T,S] shape");
  ZINF_CHECK(out.dtype() == inp.dtype(), "rope: out and inp differ in dtype");
  ZINF_CHECK(h.heads >= 1 && h.head_dim >= 1 && h.rotary_dim >= 2 && h.rotary_dim % 2 == 0 &&
                 h.rotary_dim <= h.head_dim && h.heads * h.head_dim <= inp.dim(2),
             "rope: the heads do not fit the rows, or rotary_dim is not even in 2..head_dim");
  ZINF_CHECK(cos.dtype() == DType::kF32 && sin.dtype() == DType::kF32 && cos.shape() == sin.shape() &&
                 cos.shape().rank() == 2 && cos.dim(1) == h.rotary_dim / 2 && cos.dim(0) >= inp.dim(1),
             "rope: cos/sin are not fp32 [P >= T, rotary_dim/2]");
}

// Checks a gqa call: full [B,T,3 NH hd] and packed [B,T,(NH+2NKV) hd] of one dtype; returns hd.
inline std::int64_t gqa_head_dim(const Tensor& full, const Tensor& packed, std::int64_t heads, std::int64_t kv_heads) {
  ZINF_CHECK(heads >= 1 && kv_heads >= 1 && heads % kv_heads == 0, "gqa: heads is not a multiple of kv_heads");
  ZINF_CHECK(full.shape().rank() == 3 && packed.shape().rank() == 3 && full.dim(0) == packed.dim(0) &&
                 full.dim(1) == packed.dim(1),
             "gqa: full/packed are not [B,T,*] of one B and T");
  ZINF_CHECK(full.dim(2) % (3 * heads) == 0, "gqa: full is not [B,T,3 NH hd]");
  const std::int64_t head_dim = full.dim(2) / (3 * heads);
  ZINF_CHECK(packed.dim(2) == (heads + 2 * kv_heads) * head_dim, "gqa: packed is not [B,T,(NH+2NKV) hd]");
  ZINF_CHECK(full.dtype() == packed.dtype(), "gqa: full and packed differ in dtype");
  return head_dim;
}

}  // namespace zinf::device
