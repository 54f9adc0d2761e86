// ExtentAllocator against a reference model: random allocate/free/grow sequences must give exactly
// the first-fit offsets a plain interval list computes, never overlap, stay aligned, account
// used_bytes, and coalesce back to one free range. Freeing what is not allocated must abort.
#include "libengine/io/extent_allocator.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "tests/catch.h"

namespace zinf::io {
namespace {

// The reference: allocated ranges (offset -> rounded length) and a first-fit search over the gaps.
struct Reference {
  std::uint64_t capacity = 0;
  std::map<std::uint64_t, std::uint64_t> allocated;

  std::optional<std::uint64_t> first_fit(std::uint64_t size) const {
    std::uint64_t cursor = 0;
    for (const auto& [offset, length] : allocated) {
      if (offset - cursor >= size) return cursor;
      cursor = offset + length;
    }
    if (capacity - cursor >= size) return cursor;
    return std::nullopt;
  }
  std::uint64_t largest_gap() const {
    std::uint64_t cursor = 0;
    std::uint64_t largest = 0;
    for (const auto& [offset, length] : allocated) {
      largest = std::max(largest, offset - cursor);
      cursor = offset + length;
    }
    return std::max(largest, capacity - cursor);
  }
  std::uint64_t used() const {
    std::uint64_t sum = 0;
    for (const auto& [offset, length] : allocated) sum += length;
    return sum;
  }
};

// Runs `body` in a child process and reports whether it aborted (a failed ZINF_CHECK).
bool aborts(const std::function<void()>& body) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The check's message is expected; keep it, and Catch's report of the signal, out of the log.
    std::signal(SIGABRT, SIG_DFL);
    const int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd >= 0) {
      ::dup2(null_fd, STDOUT_FILENO);
      ::dup2(null_fd, STDERR_FILENO);
    }
    body();
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

TEST_CASE("extent allocator: first fit, alignment and coalescing on a small example", "[allocator]") {
  ExtentAllocator alloc(16 * 4096 + 100, 4096);  // capacity rounds down to the alignment
  CHECK(alloc.capacity_bytes() == 16 * 4096);
  CHECK(alloc.alignment_bytes() == 4096);
  CHECK(alloc.round_up(1) == 4096);
  CHECK(alloc.round_up(4096) == 4096);
  CHECK(alloc.round_up(0) == 0);

  const auto a = alloc.allocate(1);         // [0, 4K)
  const auto b = alloc.allocate(2 * 4096);  // [4K, 12K)
  const auto c = alloc.allocate(4097);      // [12K, 20K)
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  REQUIRE(c.has_value());
  CHECK(*a == 0);
  CHECK(*b == 4096);
  CHECK(*c == 3 * 4096);
  CHECK(alloc.used_bytes() == 5 * 4096);
  CHECK(alloc.largest_free_bytes() == 11 * 4096);

  alloc.free(*b, 2 * 4096);
  CHECK(alloc.allocate(3 * 4096) == 5 * 4096);  // the 2-block hole is too small: first fit skips it
  CHECK(alloc.allocate(4096) == 4096);          // and the next small request fills it
  alloc.free(4096, 4096);
  alloc.free(*a, 1);
  alloc.free(*c, 4097);
  alloc.free(5 * 4096, 3 * 4096);
  CHECK(alloc.used_bytes() == 0);
  CHECK(alloc.largest_free_bytes() == 16 * 4096);  // everything coalesced back into one range
}

TEST_CASE("extent allocator: zero bytes, exhaustion and requests larger than the capacity", "[allocator]") {
  ExtentAllocator alloc(8 * 512, 512);
  CHECK(alloc.allocate(0) == 0u);
  CHECK(alloc.used_bytes() == 0);
  alloc.free(0, 0);
  CHECK(alloc.allocate(8 * 512 + 1) == std::nullopt);
  CHECK(alloc.allocate(UINT64_MAX) == std::nullopt);  // must not overflow in round_up
  CHECK(alloc.allocate(8 * 512) == 0u);
  CHECK(alloc.allocate(1) == std::nullopt);
  CHECK(alloc.largest_free_bytes() == 0);

  ExtentAllocator empty(100, 4096);
  CHECK(empty.capacity_bytes() == 0);
  CHECK(empty.allocate(1) == std::nullopt);
  CHECK(empty.largest_free_bytes() == 0);
}

TEST_CASE("extent allocator: grow extends a free tail or adds a new range", "[allocator]") {
  ExtentAllocator alloc(4 * 4096, 4096);
  CHECK(alloc.allocate(4 * 4096) == 0u);
  alloc.grow(6 * 4096 + 5);  // rounded down
  CHECK(alloc.capacity_bytes() == 6 * 4096);
  CHECK(alloc.largest_free_bytes() == 2 * 4096);
  alloc.grow(8 * 4096);  // the free tail [4, 6) is extended, not split
  CHECK(alloc.largest_free_bytes() == 4 * 4096);
  CHECK(alloc.allocate(4 * 4096) == 4u * 4096);
  alloc.grow(3 * 4096);  // shrinking is a no-op
  CHECK(alloc.capacity_bytes() == 8 * 4096);
  alloc.free(0, 4 * 4096);
  alloc.free(4 * 4096, 4 * 4096);
  CHECK(alloc.largest_free_bytes() == 8 * 4096);
  CHECK(alloc.used_bytes() == 0);
}

TEST_CASE("extent allocator: random sequences match the first-fit reference", "[allocator]") {
  std::mt19937_64 rng(1234);
  for (const std::uint64_t alignment : {1ull, 512ull, 4096ull}) {
    ExtentAllocator alloc(1000 * alignment, alignment);
    Reference ref{alloc.capacity_bytes(), {}};
    std::vector<std::pair<std::uint64_t, std::uint64_t>> live;  // offset, bytes as asked
    for (int step = 0; step < 20'000; ++step) {
      const unsigned action = rng() % 100;
      if (action < 55 || live.empty()) {
        // Mostly small requests, a few large ones, to fragment and then fill the file.
        const std::uint64_t bytes = (rng() % 10 == 0) ? rng() % (200 * alignment) : rng() % (12 * alignment) + 1;
        const std::uint64_t size = alloc.round_up(bytes);
        const auto expected = bytes == 0 ? std::optional<std::uint64_t>(0) : ref.first_fit(size);
        const auto got = alloc.allocate(bytes);
        INFO("step " << step << " alignment " << alignment << " bytes " << bytes);
        REQUIRE(got == expected);
        if (got && bytes > 0) {
          REQUIRE(*got % alignment == 0);
          REQUIRE(*got + size <= alloc.capacity_bytes());
          ref.allocated.emplace(*got, size);
          live.emplace_back(*got, bytes);
        }
      } else if (action < 98) {
        const std::size_t index = rng() % live.size();
        const auto [offset, bytes] = live[index];
        live[index] = live.back();
        live.pop_back();
        alloc.free(offset, bytes);
        ref.allocated.erase(offset);
      } else {
        const std::uint64_t grown = alloc.capacity_bytes() + rng() % (50 * alignment);
        alloc.grow(grown);
        ref.capacity = alloc.capacity_bytes();
        REQUIRE(ref.capacity == grown - grown % alignment);
      }
      REQUIRE(alloc.used_bytes() == ref.used());
      REQUIRE(alloc.largest_free_bytes() == ref.largest_gap());
    }
    // No two live ranges overlap.
    std::uint64_t end_of_previous = 0;
    for (const auto& [offset, length] : ref.allocated) {
      REQUIRE(offset >= end_of_previous);
      end_of_previous = offset + length;
    }
    for (const auto& [offset, bytes] : live) alloc.free(offset, bytes);
    CHECK(alloc.used_bytes() == 0);
    CHECK(alloc.largest_free_bytes() == alloc.capacity_bytes());
    CHECK(alloc.allocate(alloc.capacity_bytes()) == 0u);
  }
}

TEST_CASE("extent allocator: freeing what is not allocated is a bug", "[allocator]") {
  const auto with_one_extent = [] {
    ExtentAllocator alloc(16 * 4096, 4096);
    (void)alloc.allocate(4 * 4096);  // [0, 16K) allocated, [16K, 64K) free
    return alloc;
  };
  CHECK(aborts([&] { with_one_extent().free(8 * 4096, 4096); }));       // entirely free
  CHECK(aborts([&] { with_one_extent().free(2 * 4096, 4 * 4096); }));   // runs into the free range
  CHECK(aborts([&] { with_one_extent().free(100, 4096); }));            // unaligned
  CHECK(aborts([&] { with_one_extent().free(15 * 4096, 2 * 4096); }));  // beyond the capacity
  CHECK(aborts([&] {
    auto alloc = with_one_extent();
    alloc.free(0, 4 * 4096);
    alloc.free(0, 4 * 4096);  // twice
  }));
  CHECK_FALSE(aborts([&] { with_one_extent().free(0, 4 * 4096); }));
}

}  // namespace
}  // namespace zinf::io
