// CheckpointStore: where the GPT model keeps its L+1 block inputs (the activation checkpoints of
// activation checkpointing, inputs_[L] feeding the final LayerNorm) — in device memory, or in host
// memory (pinned on CUDA, counted on the host tier) with only a small ring of device slots.
//
// Offloaded (only when L+1 > K = kDeviceSlots), checkpoint i lives in device slot i % K. In the
// forward pass the checkpoint is copied device→host on the device-to-host stream as soon as the op
// that wrote it is enqueued, overlapping the next blocks' forward; the compute stream waits for
// that copy only before the slot is overwritten, K-1 blocks later. The last K checkpoints are never
// overwritten and stay on the device. In the backward pass, once the last user of checkpoint j is
// enqueued (block j's backward, or the final LayerNorm's for j = L), checkpoint j-K is copied
// host→device into the slot j just freed, on the host-to-device stream — K-1 blocks ahead of its
// recompute — and the compute stream waits for that copy only right before the recompute.
// Events order the three streams; the host thread never waits for a copy on CUDA (on the CPU
// backend the compute stream is the host thread, which waits only for a copy not yet done).
//
// The bytes copied are exactly the bytes saved, so the backward pass recomputes from the same
// values as with in-device checkpoints: losses and gradients are bit-identical.
// What it is not: a general activation cache or a prefetcher of parameters (zero/ does that).
// Not thread-safe: the training loop's thread drives it (the streams do the copies).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "libengine/core/dtype.h"
#include "libengine/core/status.h"
#include "libengine/device/device.h"
#include "libengine/spec/sizing/activation_layout.h"
#include "libengine/tensor/tensor.h"

namespace zinf::model {

// Bytes the checkpoint copies moved, cumulative since the store was created.
struct CheckpointTraffic {
  std::uint64_t to_host_bytes = 0;    // device → host (forward pass)
  std::uint64_t to_device_bytes = 0;  // host → device (ahead of the backward recompute)
  CheckpointTraffic operator-(const CheckpointTraffic& other) const {
    return {to_host_bytes - other.to_host_bytes, to_device_bytes - other.to_device_bytes};
  }
};

class CheckpointStore {
 public:
  // Device slots of the ring when offloaded: the slot being written, the one being read and one
  // whose copy is in flight, so every copy has a whole block's compute to hide behind.
  static constexpr std::int64_t kDeviceSlots = sizing::kCheckpointDeviceSlots;

  // `count` checkpoints of `shape` in `dtype`. offload == false: all on the device (one buffer named
  // "block inputs"). offload == true: the ring on the device and count - K host slots. OutOfMemory
  // names the tier and what did not fit. The device outlives the store.
  static Result<std::unique_ptr<CheckpointStore>> create(device::Device& device, DType dtype, Shape shape,
                                                         std::int64_t count, bool offload);
  ~CheckpointStore();
  CheckpointStore(const CheckpointStore&) = delete;
  CheckpointStore& operator=(const CheckpointStore&) = delete;

  // The device tensor that holds checkpoint `index` now (offloaded: its ring slot).
  Tensor at(std::int64_t index) const;

  // Forward pass. Before enqueueing the op that writes checkpoint `index`: the compute stream waits
  // until the slot's previous occupant has reached host memory.
  void before_write(std::int64_t index);
  // After enqueueing the op that wrote checkpoint `index`. `for_backward`: a backward pass follows,
  // so a checkpoint whose slot will be overwritten is copied to host memory (a forward-only pass
  // copies nothing).
  void written(std::int64_t index, bool for_backward);

  // Backward pass. Before enqueueing the first op that reads checkpoint `index` (the recompute):
  // the compute stream waits for its copy back.
  void before_read(std::int64_t index);
  // After enqueueing the last op that reads checkpoint `index`: its slot is free, so the copy back
  // of checkpoint index - K into it starts.
  void released(std::int64_t index);

  bool offloaded() const { return offload_; }
  std::int64_t count() const { return count_; }
  std::int64_t device_slots() const { return slots_; }
  std::int64_t host_checkpoints() const { return offload_ ? count_ - slots_ : 0; }
  std::uint64_t checkpoint_bytes() const { return checkpoint_bytes_; }
  std::uint64_t device_bytes() const { return device_buffer_.bytes(); }
  std::uint64_t host_bytes() const { return host_buffer_.bytes(); }
  const CheckpointTraffic& traffic() const { return traffic_; }

 private:
  CheckpointStore(device::Device& device, DType dtype, Shape shape, std::int64_t count, bool offload);
  std::int64_t slot_of(std::int64_t index) const { return offload_ ? index % slots_ : index; }
  // Offloaded checkpoints are the ones whose slot a later checkpoint overwrites.
  bool goes_to_host(std::int64_t index) const { return offload_ && index + slots_ < count_; }
  void* host_slot(std::int64_t index) const;

  device::Device& device_;
  DType dtype_;
  Shape shape_;
  std::int64_t count_;
  bool offload_;
  std::int64_t slots_;
  std::uint64_t checkpoint_bytes_;
  std::uint64_t slot_stride_bytes_;
  device::DeviceBuffer device_buffer_;
  device::DeviceBuffer host_buffer_;
  // Per checkpoint: reached host memory / reached the device / its last backward reader is done.
  std::vector<std::unique_ptr<device::Event>> to_host_done_, to_device_done_, readers_done_;
  std::vector<bool> copied_to_host_;  // this forward pass copied it (so a write must wait for it)
  std::vector<bool> copying_back_;    // this backward pass copies it back (so a read must wait)
  CheckpointTraffic traffic_;
};

}  // namespace zinf::model
