#include "libengine/model/checkpoint_store.h"

#include <algorithm>

#include <fmt/format.h>

#include "libengine/core/check.h"

namespace zinf::model {

CheckpointStore::CheckpointStore(device::Device& device, DType dtype, Shape shape, std::int64_t count, bool offload)
    : device_(device),
      dtype_(dtype),
      shape_(shape),
      count_(count),
      offload_(offload && count > kDeviceSlots),
      slots_(offload_ ? kDeviceSlots : count),
      checkpoint_bytes_(static_cast<std::uint64_t>(shape.numel()) * dtype_size_bytes(dtype)),
      // 64-byte aligned slots, like every tensor the model carves.
      slot_stride_bytes_((checkpoint_bytes_ + 63) / 64 * 64) {}

Result<std::unique_ptr<CheckpointStore>> CheckpointStore::create(device::Device& device, DType dtype, Shape shape,
                                                                 std::int64_t count, bool offload) {
  ZINF_CHECK(count >= 1, "CheckpointStore: no checkpoints");
  std::unique_ptr<CheckpointStore> store(new CheckpointStore(device, dtype, shape, count, offload));
  const auto slots = static_cast<std::size_t>(store->slots_);
  ZINF_ASSIGN_OR_RETURN(store->device_buffer_,
                        device.allocate(slots * store->slot_stride_bytes_,
                                        store->offload_ ? "activation checkpoint slots" : "block inputs"));
  if (store->offload_) {
    const auto host = static_cast<std::size_t>(store->host_checkpoints());
    ZINF_ASSIGN_OR_RETURN(store->host_buffer_,
                          device.allocate_host(host * store->slot_stride_bytes_,
                                               fmt::format("{} activation checkpoints in host memory", host)));
    const auto n = static_cast<std::size_t>(count);
    for (auto* events : {&store->to_host_done_, &store->to_device_done_, &store->readers_done_}) {
      events->reserve(n);
      for (std::size_t i = 0; i < n; ++i) events->push_back(device.create_event());
    }
    store->copied_to_host_.assign(n, false);
    store->copying_back_.assign(n, false);
  }
  return store;
}

CheckpointStore::~CheckpointStore() {
  // A copy still in flight reads or writes the buffers freed below.
  for (auto* events : {&to_host_done_, &to_device_done_}) {
    for (const auto& event : *events) (void)event->synchronize();
  }
}

Tensor CheckpointStore::at(std::int64_t index) const {
  ZINF_CHECK(index >= 0 && index < count_, "CheckpointStore: checkpoint index out of range");
  auto* base = static_cast<std::byte*>(device_buffer_.data());
  return Tensor(base + static_cast<std::uint64_t>(slot_of(index)) * slot_stride_bytes_, dtype_, shape_, &device_);
}

void* CheckpointStore::host_slot(std::int64_t index) const {
  return static_cast<std::byte*>(host_buffer_.data()) + static_cast<std::uint64_t>(index) * slot_stride_bytes_;
}

void CheckpointStore::before_write(std::int64_t index) {
  if (!offload_ || index < slots_) return;
  const auto previous = static_cast<std::size_t>(index - slots_);
  if (!copied_to_host_[previous]) return;
  device_.stream(device::StreamRole::kCompute).wait(*to_host_done_[previous]);
  copied_to_host_[previous] = false;
}

void CheckpointStore::written(std::int64_t index, bool for_backward) {
  if (!for_backward || !goes_to_host(index)) return;
  const auto i = static_cast<std::size_t>(index);
  device::Stream& compute = device_.stream(device::StreamRole::kCompute);
  device::Stream& to_host = device_.stream(device::StreamRole::kDeviceToHost);
  // readers_done_ doubles as "written" here: the copy must start after the op that wrote it.
  compute.record(*readers_done_[i]);
  to_host.wait(*readers_done_[i]);
  device_.copy(host_slot(index), at(index).data(), checkpoint_bytes_, device::CopyKind::kDeviceToHost, to_host);
  to_host.record(*to_host_done_[i]);
  copied_to_host_[i] = true;
  traffic_.to_host_bytes += checkpoint_bytes_;
}

void CheckpointStore::before_read(std::int64_t index) {
  if (!offload_) return;
  const auto i = static_cast<std::size_t>(index);
  if (!copying_back_[i]) return;
  device_.stream(device::StreamRole::kCompute).wait(*to_device_done_[i]);
  copying_back_[i] = false;
}

void CheckpointStore::released(std::int64_t index) {
  if (!offload_ || index < slots_) return;
  const std::int64_t next = index - slots_;  // the checkpoint that goes into the freed slot
  if (!goes_to_host(next)) return;
  const auto i = static_cast<std::size_t>(index);
  const auto n = static_cast<std::size_t>(next);
  device::Stream& compute = device_.stream(device::StreamRole::kCompute);
  device::Stream& to_device = device_.stream(device::StreamRole::kHostToDevice);
  compute.record(*readers_done_[i]);
  to_device.wait(*readers_done_[i]);
  // The forward pass's copy of `next` to host memory is done: the compute stream waited for it
  // before overwriting its slot, and this copy waits for a later point of the compute stream.
  device_.copy(at(next).data(), host_slot(next), checkpoint_bytes_, device::CopyKind::kHostToDevice, to_device);
  to_device.record(*to_device_done_[n]);
  copying_back_[n] = true;
  traffic_.to_device_bytes += checkpoint_bytes_;
}

}  // namespace zinf::model
