// MemoryTier: the byte accounting of one memory tier (the compute device's memory, CPU memory, NVMe),
// with an optional hard budget. Every allocation zinf makes on a tier reserves its bytes here first,
// so "current, peak, capacity" per tier is exact and a request beyond the budget fails with a Status
// that names the tier, the request, what it was for, the budget and what is already in use — the
// memory wall, real on any machine.
// It counts bytes; it does not own memory (DeviceBuffer and the tier owners do). Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "libengine/core/status.h"

namespace zinf::memory {

struct TierUsage {
  std::uint64_t current_bytes = 0;
  std::uint64_t peak_bytes = 0;
  std::uint64_t capacity_bytes = 0;  // 0: no budget
};

class MemoryTier {
 public:
  // capacity_bytes 0 means unbounded (still counted).
  MemoryTier(std::string name, std::uint64_t capacity_bytes);
  MemoryTier(const MemoryTier&) = delete;
  MemoryTier& operator=(const MemoryTier&) = delete;

  // Counts `bytes` against the budget, or fails (nothing counted) with
  //   "out of memory on the device tier: 64.0 MiB for block 3 activations does not fit
  //    (1.95 GiB of the 2.00 GiB budget in use)".
  Status reserve(std::uint64_t bytes, std::string_view what);
  // Returns bytes from an earlier successful reserve().
  void release(std::uint64_t bytes);

  TierUsage usage() const;
  // Starts a new peak window at the current usage (e.g. after setup, to report the training peak).
  void reset_peak();
  const std::string& name() const { return name_; }
  std::uint64_t capacity_bytes() const { return capacity_bytes_; }

 private:
  std::string name_;
  std::uint64_t capacity_bytes_;
  std::atomic<std::uint64_t> current_bytes_{0};
  std::atomic<std::uint64_t> peak_bytes_{0};
};

}  // namespace zinf::memory
