#include "libengine/zero/buffer_pool.h"

#include <algorithm>

#include <fmt/format.h>

#include "libengine/core/units.h"

namespace zinf::zero {
namespace {

std::string bytes_text(std::uint64_t bytes) { return format_bytes(static_cast<double>(bytes)); }

}  // namespace

BufferPool::BufferPool(device::Device& device, Memory memory, std::uint64_t cap_bytes, std::string budget_field)
    : device_(device), memory_(memory), cap_bytes_(cap_bytes), budget_field_(std::move(budget_field)) {}

BufferPool::~BufferPool() { trim(); }

bool BufferPool::ready(Idle& idle) {
  if (idle.reusable && idle.reusable->query()) idle.reusable.reset();
  return idle.reusable == nullptr;
}

bool BufferPool::can_take(std::size_t bytes) {
  for (Idle& idle : idle_) {
    if (idle.buffer.bytes() == bytes && ready(idle)) return true;
  }
  return in_use_bytes_ + bytes <= cap_bytes_;
}

bool BufferPool::make_room(std::size_t bytes) {
  if (in_use_bytes_ + bytes > cap_bytes_) return false;
  while (!idle_.empty() && owned_bytes() + bytes > cap_bytes_) {
    Idle& oldest = idle_.front();
    // A failed wait is the stream's error, reported by its synchronize(); the buffer is not used
    // by work that can still run either way.
    if (oldest.reusable) (void)oldest.reusable->synchronize();
    idle_bytes_ -= oldest.buffer.bytes();
    idle_.erase(idle_.begin());
  }
  return true;
}

Result<device::DeviceBuffer> BufferPool::take(std::size_t bytes, std::string_view what) {
  for (auto it = idle_.begin(); it != idle_.end(); ++it) {
    if (it->buffer.bytes() == bytes && ready(*it)) {
      device::DeviceBuffer buffer = std::move(it->buffer);
      idle_.erase(it);
      idle_bytes_ -= bytes;
      in_use_bytes_ += bytes;
      return buffer;
    }
  }
  if (!make_room(bytes)) {
    return Status::out_of_memory(fmt::format("{}: {} for {} does not fit ({} of the {} budget in use); raise {}",
                                             budget_field_, bytes_text(bytes), what, bytes_text(in_use_bytes_),
                                             bytes_text(cap_bytes_), budget_field_));
  }
  Result<device::DeviceBuffer> fresh =
      memory_ == Memory::kDevice ? device_.allocate(bytes, what) : device_.allocate_host(bytes, what);
  if (!fresh.is_ok() && fresh.status().code() == ErrorCode::kOutOfMemory && !idle_.empty()) {
    trim();  // idle buffers of other sizes hold tier memory this one needs
    fresh = memory_ == Memory::kDevice ? device_.allocate(bytes, what) : device_.allocate_host(bytes, what);
  }
  if (!fresh.is_ok()) return fresh.status();
  in_use_bytes_ += bytes;
  peak_owned_bytes_ = std::max(peak_owned_bytes_, owned_bytes());
  return fresh;
}

void BufferPool::give(device::DeviceBuffer buffer, device::Stream& stream) {
  if (buffer.empty()) return;
  std::unique_ptr<device::Event> reusable = device_.create_event();
  stream.record(*reusable);
  in_use_bytes_ -= buffer.bytes();
  idle_bytes_ += buffer.bytes();
  idle_.push_back({std::move(buffer), std::move(reusable)});
}

void BufferPool::give_now(device::DeviceBuffer buffer) {
  if (buffer.empty()) return;
  in_use_bytes_ -= buffer.bytes();
  idle_bytes_ += buffer.bytes();
  idle_.push_back({std::move(buffer), nullptr});
}

void BufferPool::trim() {
  for (Idle& idle : idle_) {
    if (idle.reusable) (void)idle.reusable->synchronize();
  }
  idle_.clear();
  idle_bytes_ = 0;
}

}  // namespace zinf::zero
