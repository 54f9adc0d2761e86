#include "libengine/device/device.h"

#include <utility>

namespace zinf::device {

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

void Device::release_after(DeviceBuffer buffer, Stream& stream) {
  if (buffer.empty()) return;
  std::unique_ptr<Event> reached = create_event();
  stream.record(*reached);
  std::lock_guard lock(release_mutex_);
  pending_.push_back({std::move(reached), std::move(buffer)});
}

std::size_t Device::reclaim_released(bool wait) {
  std::vector<PendingRelease> done;
  {
    std::lock_guard lock(release_mutex_);
    if (pending_.empty()) return 0;
    if (wait) {
      done.swap(pending_);
    } else {
      std::vector<PendingRelease> keep;
      for (PendingRelease& p : pending_) (p.reached->query() ? done : keep).push_back(std::move(p));
      pending_.swap(keep);
    }
  }
  // Outside the lock: waiting, and the free functions, may take a while.
  for (PendingRelease& p : done) {
    // A failed wait is the stream's error, reported by its synchronize(); the memory is no longer
    // in use by work that can still run, so it is freed either way.
    (void)p.reached->synchronize();
  }
  return done.size();
}

std::size_t Device::pending_releases() const {
  std::lock_guard lock(release_mutex_);
  return pending_.size();
}

Result<OwnedTensor> allocate_tensor(Device& device, DType dtype, Shape shape, std::string_view what) {
  const std::size_t bytes = static_cast<std::size_t>(shape.numel()) * dtype_size_bytes(dtype);
  ZINF_ASSIGN_OR_RETURN(DeviceBuffer buffer, device.allocate(bytes, what));
  Tensor tensor(buffer.data(), dtype, shape, &device);
  return OwnedTensor{std::move(buffer), tensor};
}

}  // namespace zinf::device
