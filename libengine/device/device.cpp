#include "libengine/device/device.h"

#include <utility>

namespace zinf::device {

std::string_view device_kind_name(DeviceKind kind) { return kind == DeviceKind::kCpu ? "cpu" : "cuda"; }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      free_fn_(std::move(other.free_fn_)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    free_fn_ = std::move(other.free_fn_);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { reset(); }

void DeviceBuffer::reset() {
  if (data_ != nullptr && free_fn_) free_fn_(data_, bytes_);
  data_ = nullptr;
  bytes_ = 0;
}

Result<OwnedTensor> allocate_tensor(Device& device, DType dtype, Shape shape, std::string_view what) {
  const std::size_t bytes = static_cast<std::size_t>(shape.numel()) * dtype_size_bytes(dtype);
  ZINF_ASSIGN_OR_RETURN(DeviceBuffer buffer, device.allocate(bytes, what));
  Tensor tensor(buffer.data(), dtype, shape, &device);
  return OwnedTensor{std::move(buffer), tensor};
}

}  // namespace zinf::device
