#include "libengine/tensor/tensor.h"

#include <fmt/format.h>

namespace zinf {

Shape::Shape(std::initializer_list<std::int64_t> dims) {
  ZINF_CHECK(dims.size() <= kMaxRank, "shape has more than 4 dimensions");
  for (std::int64_t d : dims) {
    ZINF_CHECK(d >= 0, "negative dimension");
    dims_[static_cast<std::size_t>(rank_++)] = d;
  }
}

std::int64_t Shape::operator[](int axis) const {
  ZINF_CHECK(axis >= 0 && axis < rank_, "axis out of range");
  return dims_[static_cast<std::size_t>(axis)];
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<std::size_t>(i)];
  return n;
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[static_cast<std::size_t>(i)] != other.dims_[static_cast<std::size_t>(i)]) return false;
  }
  return true;
}

std::string Shape::to_string() const {
  std::string out = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(dims_[static_cast<std::size_t>(i)]);
  }
  return out + "]";
}

Tensor Tensor::view(Shape shape) const {
  ZINF_CHECK(shape.numel() == numel(), "view changes the element count");
  return Tensor(data_, dtype_, shape, device_);
}

Tensor Tensor::slice(std::int64_t begin, std::int64_t end) const {
  ZINF_CHECK(shape_.rank() >= 1 && 0 <= begin && begin <= end && end <= shape_[0], "slice out of range");
  const std::int64_t row = shape_[0] == 0 ? 0 : numel() / shape_[0];
  Shape shape = shape_;
  // Rebuild with the new leading dimension.
  switch (shape_.rank()) {
    case 1:
      shape = Shape{end - begin};
      break;
    case 2:
      shape = Shape{end - begin, shape_[1]};
      break;
    case 3:
      shape = Shape{end - begin, shape_[1], shape_[2]};
      break;
    default:
      shape = Shape{end - begin, shape_[1], shape_[2], shape_[3]};
      break;
  }
  auto* base = static_cast<std::byte*>(data_);
  return Tensor(base == nullptr ? nullptr : base + static_cast<std::size_t>(begin * row) * dtype_size_bytes(dtype_),
                dtype_, shape, device_);
}

}  // namespace zinf
