// StagingPool: the sizing rule, argument errors that name the values, acquire/release accounting
// and peak, iovecs for registration, and concurrent use from several threads.
#include "libengine/memory/staging_pool.h"

#include <atomic>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "tests/catch.h"

namespace zinf::memory {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

TEST_CASE("staging pool: recommended size follows queue depth, largest transfer and budget") {
  // Queue depth bounds the count when transfers are large.
  CHECK(StagingPool::recommended_bytes(1024 * kMiB, kMiB, 32, 0) == 32 * kMiB);
  // A transfer of 3.5 blocks can use at most 4 buffers.
  CHECK(StagingPool::recommended_bytes(3 * kMiB + kMiB / 2, kMiB, 32, 0) == 4 * kMiB);
  CHECK(StagingPool::recommended_bytes(4 * kMiB, kMiB, 32, 0) == 4 * kMiB);
  // Small or no transfers still get one buffer.
  CHECK(StagingPool::recommended_bytes(100, kMiB, 32, 0) == kMiB);
  CHECK(StagingPool::recommended_bytes(0, kMiB, 32, 0) == kMiB);
  CHECK(StagingPool::recommended_bytes(1024 * kMiB, kMiB, 0, 0) == kMiB);
  // The budget caps the count, but never below one buffer.
  CHECK(StagingPool::recommended_bytes(1024 * kMiB, kMiB, 32, 8 * kMiB + 5) == 8 * kMiB);
  CHECK(StagingPool::recommended_bytes(1024 * kMiB, kMiB, 32, kMiB / 2) == kMiB);
  CHECK(StagingPool::recommended_bytes(1024 * kMiB, kMiB, 32, 64 * kMiB) == 32 * kMiB);
}

TEST_CASE("staging pool: bad sizes are refused with the values named") {
  const auto message = [](std::uint64_t total, std::uint64_t buffer, std::uint64_t alignment) {
    auto pool = StagingPool::create(total, buffer, alignment);
    REQUIRE_FALSE(pool.is_ok());
    CHECK(pool.status().code() == ErrorCode::kInvalidArgument);
    return pool.status().message();
  };
  CHECK_THAT(message(kMiB, 4 * kMiB, 4096), Catch::Contains("smaller than one buffer") &&
                                                Catch::Contains("1048576 bytes") && Catch::Contains("4194304 bytes"));
  CHECK_THAT(message(4 * kMiB, 1000, 4096),
             Catch::Contains("buffer size") && Catch::Contains("1000 bytes") && Catch::Contains("alignment 4096"));
  CHECK_THAT(message(4 * kMiB + 1, kMiB, 4096), Catch::Contains("total size") && Catch::Contains("4194305 bytes"));
  CHECK_THAT(message(4 * kMiB, kMiB, 3000), Catch::Contains("alignment 3000 bytes is not a power of two"));
  CHECK_THAT(message(4 * kMiB, 0, 4096), Catch::Contains("buffer size is 0"));
}

TEST_CASE("staging pool: buffers are aligned, distinct and indexed") {
  // 5.5 buffers' worth: the remainder is not used.
  auto created = StagingPool::create(5 * 64 * 1024 + 32 * 1024, 64 * 1024, 4096);
  REQUIRE(created.is_ok());
  StagingPool& pool = **created;
  CHECK(pool.buffer_count() == 5);
  CHECK(pool.buffer_bytes() == 64 * 1024);
  CHECK(pool.total_bytes() == 5 * 64 * 1024);

  const std::vector<iovec> iovecs = pool.iovecs();
  REQUIRE(iovecs.size() == 5);
  std::vector<StagingPool::Buffer> taken;
  for (int i = 0; i < 5; ++i) {
    const auto buffer = pool.try_acquire();
    REQUIRE(buffer.has_value());
    CHECK(reinterpret_cast<std::uintptr_t>(buffer->data) % 4096 == 0);
    REQUIRE(buffer->index >= 0);
    REQUIRE(buffer->index < 5);
    CHECK(iovecs[static_cast<std::size_t>(buffer->index)].iov_base == buffer->data);
    CHECK(iovecs[static_cast<std::size_t>(buffer->index)].iov_len == 64 * 1024);
    taken.push_back(*buffer);
  }
  std::set<int> indices;
  for (const auto& b : taken) indices.insert(b.index);
  CHECK(indices.size() == 5);
  CHECK(pool.in_use() == 5);
  CHECK_FALSE(pool.try_acquire().has_value());  // all in use

  pool.release(taken[2].index);
  CHECK(pool.in_use() == 4);
  const auto again = pool.try_acquire();
  REQUIRE(again.has_value());
  CHECK(again->index == taken[2].index);
  CHECK(again->data == taken[2].data);
  for (const auto& b : taken) pool.release(b.index);
  CHECK(pool.in_use() == 0);
  CHECK(pool.peak_in_use() == 5);
}

TEST_CASE("staging pool: alignment 1 (buffered files) still gives usable buffers") {
  auto created = StagingPool::create(3000, 1000, 1);
  REQUIRE(created.is_ok());
  CHECK((*created)->buffer_count() == 3);
  const auto buffer = (*created)->try_acquire();
  REQUIRE(buffer.has_value());
  buffer->data[999] = std::byte{1};
  (*created)->release(buffer->index);
}

TEST_CASE("staging pool: concurrent acquire and release never hand out one buffer twice") {
  auto created = StagingPool::create(4 * 4096, 4096, 4096);
  REQUIRE(created.is_ok());
  StagingPool& pool = **created;
  std::vector<std::atomic<int>> owners(pool.buffer_count());
  std::atomic<bool> conflict{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&pool, &owners, &conflict, t] {
      for (int i = 0; i < 5000; ++i) {
        const auto buffer = pool.try_acquire();
        if (!buffer) continue;
        auto& owner = owners[static_cast<std::size_t>(buffer->index)];
        int expected = 0;
        if (!owner.compare_exchange_strong(expected, t + 1)) conflict = true;
        owner.store(0);
        pool.release(buffer->index);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK_FALSE(conflict.load());
  CHECK(pool.in_use() == 0);
  CHECK(pool.peak_in_use() >= 1);
  CHECK(pool.peak_in_use() <= 4);
}

}  // namespace
}  // namespace zinf::memory
