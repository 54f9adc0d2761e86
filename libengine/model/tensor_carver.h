// TensorCarver: lays fp32 tensors out one after another in a single block of memory, each starting
// on a 64-byte boundary. The model sizes a buffer by carving with a null base (counting only), then
// allocates that many bytes once and carves again over the real memory — one allocation per
// buffer, none per step. It does not own memory and does not check a capacity: the caller
// allocates bytes() of a counting pass with the same sequence of take() calls.
#pragma once

#include <cstddef>
#include <cstdint>

#include "libengine/tensor/tensor.h"

namespace zinf::model {

class TensorCarver {
 public:
  // base == nullptr: count only (the tensors handed out have no data).
  explicit TensorCarver(float* base, device::Device* device = nullptr) : base_(base), device_(device) {}

  Tensor take(Shape shape) {
    float* data = base_ == nullptr ? nullptr : base_ + used_floats_;
    // Round every tensor up to 16 floats so the next one starts 64-byte aligned (SIMD loads).
    const auto floats = static_cast<std::size_t>(shape.numel());
    used_floats_ += (floats + 15) / 16 * 16;
    return Tensor(data, DType::kF32, shape, device_);
  }

  std::uint64_t bytes() const { return static_cast<std::uint64_t>(used_floats_) * sizeof(float); }

 private:
  float* base_;
  device::Device* device_;
  std::size_t used_floats_ = 0;
};

}  // namespace zinf::model
