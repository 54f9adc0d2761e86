// TensorCarver: lays tensors out one after another in a single block of memory, each starting on a
// 64-byte boundary. The model sizes a buffer by carving with a null base (counting only), then
// allocates that many bytes once and carves again over the real memory — one allocation per
// buffer, none per step. take() hands out tensors of the carver's element type (the model's compute
// dtype: activations), take_f32() fp32 ones (statistics such as LayerNorm's mean/rstd and the
// attention log-sum-exp, fp32 whatever the compute dtype). It does not own memory and does not
// check a capacity: the caller allocates bytes() of a counting pass with the same sequence of calls.
#pragma once

#include <cstddef>
#include <cstdint>

#include "libengine/core/dtype.h"
#include "libengine/spec/sizing/activation_layout.h"
#include "libengine/tensor/tensor.h"

namespace zinf::model {

class TensorCarver {
 public:
  // base == nullptr: count only (the tensors handed out have no data).
  explicit TensorCarver(void* base, DType dtype = DType::kF32, device::Device* device = nullptr)
      : base_(static_cast<std::byte*>(base)), dtype_(dtype), device_(device) {}

  Tensor take(Shape shape) { return take_as(shape, dtype_); }
  Tensor take_f32(Shape shape) { return take_as(shape, DType::kF32); }
  // A tensor of the activation layout (spec/sizing/activation_layout.h), in its dtype; an empty
  // Tensor (nothing carved) when the layout has none.
  Tensor take_layout(const sizing::ActivationTensor& t) {
    if (!t.present()) return Tensor();
    const Shape shape = t.rank == 1   ? Shape{t.dims[0]}
                        : t.rank == 2 ? Shape{t.dims[0], t.dims[1]}
                                      : Shape{t.dims[0], t.dims[1], t.dims[2]};
    return take_as(shape, t.fp32 ? DType::kF32 : dtype_);
  }

  std::uint64_t bytes() const { return used_bytes_; }

 private:
  Tensor take_as(Shape shape, DType dtype) {
    std::byte* data = base_ == nullptr ? nullptr : base_ + used_bytes_;
    // Round every tensor up to 64 bytes so the next one starts aligned (SIMD loads, GPU vector loads).
    const auto bytes = static_cast<std::uint64_t>(shape.numel()) * dtype_size_bytes(dtype);
    used_bytes_ += (bytes + 63) / 64 * 64;
    return Tensor(data, dtype, shape, device_);
  }

  std::byte* base_;
  DType dtype_;
  device::Device* device_;
  std::uint64_t used_bytes_ = 0;
};

}  // namespace zinf::model
