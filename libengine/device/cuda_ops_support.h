// Helpers shared by CudaOps' translation units (cuda_ops.cpp: lifetime, memory, copies, the
// optimizer, matmuls and the loss; cuda_ops_layers.cpp: norms, activations, positions, embeddings
// and attention). Internal to libengine/device: not part of the device interface.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/adam.h"
#include "kernels/cuda_launch.h"
#include "libengine/core/check.h"
#include "libengine/core/dtype.h"
#include "libengine/device/cuda_check.h"
#include "libengine/tensor/tensor.h"

// Launches kernels::cuda::<launcher>(args...) and keeps a failure, naming the launcher. Used inside
// CudaOps' member functions (it calls report()), with `k` naming kernels::cuda.
#define ZINF_LAUNCH(launcher, ...) report(ZINF_CUDA_LAUNCH_STATUS(#launcher, k::launcher(__VA_ARGS__)))

namespace zinf::device::cuda_ops_detail {

inline std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

inline kernels::cuda::Elem elem_of(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return kernels::cuda::Elem::kF32;
    case DType::kBF16:
      return kernels::cuda::Elem::kBF16;
    case DType::kF16:
      return kernels::cuda::Elem::kF16;
  }
  ZINF_CHECK(false, "cuda ops: unknown dtype");
  return kernels::cuda::Elem::kF32;
}

inline kernels::HalfFormat half_format(DType dtype) {
  return dtype == DType::kF16 ? kernels::HalfFormat::kF16 : kernels::HalfFormat::kBF16;
}

// Activation tensors may be [B,T,C] or [R,C]: cols is the last dimension, rows every other one
// multiplied out.
inline std::int64_t cols(const Tensor& t) {
  ZINF_CHECK(t.shape().rank() >= 1, "tensor has no dimensions");
  return t.dim(t.shape().rank() - 1);
}
inline std::int64_t rows(const Tensor& t) {
  const std::int64_t c = cols(t);
  return c == 0 ? 0 : t.numel() / c;
}

}  // namespace zinf::device::cuda_ops_detail
