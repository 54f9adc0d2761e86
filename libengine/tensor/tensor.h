// Tensor: a non-owning, typed, contiguous view over memory that something else owns (a DeviceBuffer,
// a tier allocation, a caller's array). Copying a Tensor copies the view, never the data.
// It records which device the memory lives on so that code can refuse to hand CUDA memory to a CPU
// kernel. Shapes have at most four dimensions (the model needs [B,T,C], [B,NH,T] and [OC,C]).
// What it is not: an autograd node, a strided view, or an owner.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "libengine/core/check.h"
#include "libengine/core/dtype.h"

namespace zinf {

namespace device {
class Device;
}

class Shape {
 public:
  static constexpr int kMaxRank = 4;
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims);

  int rank() const { return rank_; }
  std::int64_t operator[](int axis) const;
  std::int64_t numel() const;
  bool operator==(const Shape& other) const;
  std::string to_string() const;  // "[4, 256, 1024]"

 private:
  std::array<std::int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: no data
  Tensor(void* data, DType dtype, Shape shape, device::Device* device = nullptr)
      : data_(data), dtype_(dtype), shape_(shape), device_(device) {}

  bool defined() const { return data_ != nullptr || shape_.numel() == 0; }
  void* data() const { return data_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::int64_t dim(int axis) const { return shape_[axis]; }
  std::int64_t numel() const { return shape_.numel(); }
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size_bytes(dtype_); }
  device::Device* device() const { return device_; }

  // Typed access; the dtype must match (checked).
  float* f32() const {
    ZINF_CHECK(dtype_ == DType::kF32, "tensor is not fp32");
    return static_cast<float*>(data_);
  }
  std::uint16_t* half() const {
    ZINF_CHECK(dtype_ != DType::kF32, "tensor is not bf16/fp16");
    return static_cast<std::uint16_t*>(data_);
  }

  // The same memory seen with another shape of the same element count.
  Tensor view(Shape shape) const;
  // Rows [begin, end) of the first dimension.
  Tensor slice(std::int64_t begin, std::int64_t end) const;

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Shape shape_;
  device::Device* device_ = nullptr;
};

}  // namespace zinf
