// Shape checks the backends' Ops share (device/cpu_ops.cpp, device/cuda_ops.cpp), so that both
// refuse the same malformed calls with the same message. Internal to device/; a failed check is a
// bug in the caller (ZINF_CHECK), as ops.h says.
#pragma once

#include <cstdint>

#include "libengine/core/check.h"
#include "libengine/tensor/tensor.h"

namespace zinf::device {

// Checks qkv [B,T,3C], out [B,T,C] and lse [B,NH,T] against each other; returns NH.
inline std::int64_t attention_heads(const Tensor& out, const Tensor& lse, const Tensor& qkv) {
  ZINF_CHECK(out.shape().rank() == 3 && qkv.shape().rank() == 3 && lse.shape().rank() == 3,
             "attention: out/qkv/lse are not rank 3");
  ZINF_CHECK(qkv.dim(0) == out.dim(0) && qkv.dim(1) == out.dim(1) && qkv.dim(2) == 3 * out.dim(2),
             "attention: qkv is not [B,T,3C] for out [B,T,C]");
  ZINF_CHECK(lse.dim(0) == out.dim(0) && lse.dim(2) == out.dim(1), "attention: lse is not [B,NH,T]");
  const std::int64_t heads = lse.dim(1);
  ZINF_CHECK(heads >= 1 && out.dim(2) % heads == 0, "attention: NH does not divide C");
  return heads;
}

}  // namespace zinf::device
