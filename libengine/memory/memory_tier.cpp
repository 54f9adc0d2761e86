#include "libengine/memory/memory_tier.h"

#include <fmt/format.h>

#include "libengine/core/check.h"
#include "libengine/core/units.h"

namespace zinf::memory {

MemoryTier::MemoryTier(std::string name, std::uint64_t capacity_bytes)
    : name_(std::move(name)), capacity_bytes_(capacity_bytes) {}

Status MemoryTier::reserve(std::uint64_t bytes, std::string_view what) {
  std::uint64_t current = current_bytes_.load(std::memory_order_relaxed);
  for (;;) {
    const std::uint64_t wanted = current + bytes;
    if (capacity_bytes_ != 0 && (wanted < current || wanted > capacity_bytes_)) {
      return Status::out_of_memory(
          fmt::format("out of memory on the {} tier: {} for {} does not fit ({} of the {} budget in use)", name_,
                      format_bytes(static_cast<double>(bytes)), what, format_bytes(static_cast<double>(current)),
                      format_bytes(static_cast<double>(capacity_bytes_))));
    }
    if (current_bytes_.compare_exchange_weak(current, wanted, std::memory_order_relaxed)) {
      std::uint64_t peak = peak_bytes_.load(std::memory_order_relaxed);
      while (wanted > peak && !peak_bytes_.compare_exchange_weak(peak, wanted, std::memory_order_relaxed)) {
      }
      return Status::ok();
    }
  }
}

void MemoryTier::release(std::uint64_t bytes) {
  const std::uint64_t before = current_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  ZINF_CHECK(before >= bytes, "tier released more bytes than it holds");
}

TierUsage MemoryTier::usage() const {
  return {current_bytes_.load(std::memory_order_relaxed), peak_bytes_.load(std::memory_order_relaxed), capacity_bytes_};
}

void MemoryTier::reset_peak() { peak_bytes_.store(current_bytes_.load(std::memory_order_relaxed)); }

}  // namespace zinf::memory
