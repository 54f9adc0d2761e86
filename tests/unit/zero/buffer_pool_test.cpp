// BufferPool (zero/buffer_pool.h) on the CPU backend: returned buffers come back by exact size once
// their stream has passed, everything owned counts against the cap, and a take the cap refuses names
// the budget field — while a tier that refuses first is reported as the tier's error.
#include <atomic>
#include <memory>
#include <string>

#include "libengine/device/cpu_device.h"
#include "libengine/zero/buffer_pool.h"
#include "tests/catch.h"

namespace zinf::zero {
namespace {

constexpr std::size_t kKiB = 1024;

TEST_CASE("buffer pool: a returned buffer is handed out again for the same size, not reallocated") {
  auto device = device::make_cpu_device({});
  BufferPool pool(*device, BufferPool::Memory::kDevice, 4 * kKiB, "scenario.zero.max_live_bytes");
  device::DeviceBuffer first = pool.take(kKiB, "a").value();
  void* const address = first.data();
  CHECK(pool.in_use_bytes() == kKiB);
  pool.give_now(std::move(first));
  CHECK(pool.in_use_bytes() == 0);
  CHECK(pool.owned_bytes() == kKiB);  // idle, still owned
  device::DeviceBuffer again = pool.take(kKiB, "a").value();
  CHECK(again.data() == address);
  CHECK(pool.peak_owned_bytes() == kKiB);

  // Returned on a stream: reusable once the stream has passed the work enqueued before give().
  device::Stream& stream = device->stream(device::StreamRole::kHostToDevice);
  std::atomic<bool> ran{false};
  stream.enqueue([&ran]() -> Status {
    ran = true;
    return Status::ok();
  });
  pool.give(std::move(again), stream);
  REQUIRE(stream.synchronize().is_ok());
  CHECK(ran);
  CHECK(pool.can_take(kKiB));
  device::DeviceBuffer third = pool.take(kKiB, "a").value();
  CHECK(third.data() == address);
  CHECK(pool.owned_bytes() == kKiB);
  pool.give_now(std::move(third));
}

TEST_CASE("buffer pool: exhaustion at the cap names the budget field, and idle buffers of other sizes make room") {
  auto device = device::make_cpu_device({});
  BufferPool pool(*device, BufferPool::Memory::kHost, 2 * kKiB, "scenario.zero.prefetch_bytes");
  device::DeviceBuffer a = pool.take(kKiB, "a").value();
  device::DeviceBuffer b = pool.take(kKiB, "b").value();
  CHECK(pool.in_use_bytes() == 2 * kKiB);
  CHECK(pool.fits(0));
  CHECK_FALSE(pool.fits(1));
  CHECK_FALSE(pool.can_take(1));
  Result<device::DeviceBuffer> refused = pool.take(1, "NVMe read of c");
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == ErrorCode::kOutOfMemory);
  const std::string& message = refused.status().message();
  INFO(message);
  CHECK(message.find("scenario.zero.prefetch_bytes") == 0);
  CHECK(message.find("NVMe read of c") != std::string::npos);
  CHECK(message.find("raise scenario.zero.prefetch_bytes") != std::string::npos);
  CHECK(pool.in_use_bytes() == 2 * kKiB);  // the refusal took nothing

  // Both returned (idle): a 2 KiB buffer fits only by dropping them — oldest first.
  pool.give_now(std::move(a));
  pool.give_now(std::move(b));
  CHECK(pool.owned_bytes() == 2 * kKiB);
  CHECK(pool.fits(2 * kKiB));
  CHECK(pool.can_take(2 * kKiB));
  device::DeviceBuffer whole = pool.take(2 * kKiB, "whole").value();
  CHECK(pool.owned_bytes() == 2 * kKiB);
  CHECK(pool.in_use_bytes() == 2 * kKiB);
  CHECK(pool.peak_owned_bytes() == 2 * kKiB);  // never more than the cap
  pool.give_now(std::move(whole));
  pool.trim();
  CHECK(pool.owned_bytes() == 0);
}

TEST_CASE("buffer pool: a tier that refuses before the cap is the tier's error") {
  device::CpuDeviceOptions options;
  options.memory_budget_bytes = kKiB;
  auto device = device::make_cpu_device(options);
  BufferPool pool(*device, BufferPool::Memory::kDevice, 8 * kKiB, "scenario.zero.max_live_bytes");
  Result<device::DeviceBuffer> refused = pool.take(2 * kKiB, "gathered w");
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == ErrorCode::kOutOfMemory);
  INFO(refused.status().message());
  CHECK(refused.status().message().find("raise scenario.zero.max_live_bytes") == std::string::npos);
  CHECK(pool.in_use_bytes() == 0);
  CHECK(pool.owned_bytes() == 0);
}

}  // namespace
}  // namespace zinf::zero
