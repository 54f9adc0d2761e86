// BufferPool: reusable device or host buffers under one byte cap, freed in stream order.
//
// The parameter coordinator and the gradient path need a buffer per gathered parameter, per NVMe
// read and per gradient in flight, every step, in the same sizes as the step before: allocating
// them anew each time would zero-fill and fault in fresh pages (CPU backend) or fragment the pool
// (CUDA). A BufferPool keeps returned buffers by exact size and hands them out again once the
// stream they were returned on has passed the work that used them. Everything it holds — in use
// or idle — counts against `cap_bytes` (the budget the configuration names, e.g.
// zero.max_live_bytes) as well as against the device's tier.
//
// Not thread-safe: one thread takes and gives (the training loop's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "libengine/core/status.h"
#include "libengine/device/device.h"

namespace zinf::zero {

class BufferPool {
 public:
  enum class Memory { kDevice, kHost };
  // `budget_field` names the configuration field of `cap_bytes` in errors ("zero.max_live_bytes").
  BufferPool(device::Device& device, Memory memory, std::uint64_t cap_bytes, std::string budget_field);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // Whether take(bytes) can succeed without waiting for a stream or failing: an idle buffer of
  // that size is ready, or the cap leaves room (idle buffers of other sizes count as room).
  bool can_take(std::size_t bytes);
  // True when `bytes` more fit the cap by the pool's accounting alone, whatever the streams have
  // done: a decision every rank makes alike at the same point of the same call sequence.
  bool fits(std::size_t bytes) const { return in_use_bytes_ + bytes <= cap_bytes_; }
  // A buffer of exactly `bytes` (contents unspecified): a ready idle one, or a new allocation
  // after dropping idle buffers to stay under the cap (waiting for their streams if need be).
  // OutOfMemory names `what`, the budget field and what is in use when the cap or the tier refuses.
  Result<device::DeviceBuffer> take(std::size_t bytes, std::string_view what);
  // Returns `buffer` (from take()) for reuse once `stream` has passed the work enqueued so far.
  void give(device::DeviceBuffer buffer, device::Stream& stream);
  // Returns `buffer` for reuse at once: no work in flight touches it.
  void give_now(device::DeviceBuffer buffer);
  // Frees every idle buffer (waiting for their streams).
  void trim();

  std::uint64_t in_use_bytes() const { return in_use_bytes_; }
  std::uint64_t owned_bytes() const { return in_use_bytes_ + idle_bytes_; }
  std::uint64_t peak_owned_bytes() const { return peak_owned_bytes_; }
  std::uint64_t cap_bytes() const { return cap_bytes_; }

 private:
  struct Idle {
    device::DeviceBuffer buffer;
    std::unique_ptr<device::Event> reusable;  // null: reusable now
  };
  bool ready(Idle& idle);
  // Drops idle buffers (oldest first) until `bytes` more fit under the cap; false when they cannot.
  bool make_room(std::size_t bytes);

  device::Device& device_;
  Memory memory_;
  std::uint64_t cap_bytes_;
  std::string budget_field_;
  std::vector<Idle> idle_;  // oldest first
  std::uint64_t in_use_bytes_ = 0;
  std::uint64_t idle_bytes_ = 0;
  std::uint64_t peak_owned_bytes_ = 0;
};

}  // namespace zinf::zero
