// SwapStore end to end on the real file system: round trips of every size through both engines,
// many tickets in flight, striping, ordering, injected faults (each must become a clear Status with
// no crash, no staging buffer left in use and no file left behind), ENOSPC, checksums, buffered
// fallback and the free-space check (cleanup after a signal: swap_store_signal_test.cpp).
#include "libengine/io/swap_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "libengine/io/fault_injecting_engine.h"
#include "libengine/io/io_engine.h"
#include "tests/catch.h"
#include "tests/ramfs_child.h"
#include "tests/temp_dir.h"
#include "tests/unit/io/gate_engine.h"

namespace zinf::io {
namespace {

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = 1024 * 1024;

// A byte buffer whose data() is `misalign` bytes past a 4096-byte boundary, so tests choose between
// the zero-copy path (0) and the staging path (anything else).
class TestBuffer {
 public:
  TestBuffer(std::size_t size, std::size_t misalign) : storage_(size + 4096 + misalign), size_(size) {
    const auto base = reinterpret_cast<std::uintptr_t>(storage_.data());
    offset_ = (4096 - base % 4096) % 4096 + misalign;
  }
  std::byte* data() { return storage_.data() + offset_; }
  std::span<std::byte> span() { return {data(), size_}; }
  std::span<const std::byte> cspan() const { return {storage_.data() + offset_, size_}; }
  std::size_t size() const { return size_; }
  void fill(std::uint64_t seed) {
    std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    std::byte* p = data();
    for (std::size_t i = 0; i < size_; i += 8) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      std::memcpy(p + i, &x, std::min<std::size_t>(8, size_ - i));
    }
  }
  bool same_as(const TestBuffer& other) const {
    return size_ == other.size_ && std::memcmp(cspan().data(), other.cspan().data(), size_) == 0;
  }

 private:
  std::vector<std::byte> storage_;
  std::size_t size_;
  std::size_t offset_ = 0;
};

bool directory_is_empty(const std::string& path) { return std::filesystem::is_empty(std::filesystem::path(path)); }

std::size_t open_fd_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

SwapStoreOptions options_for(std::vector<std::string> paths, std::uint64_t planned_bytes, std::uint64_t block_bytes,
                             unsigned queue_depth) {
  SwapStoreOptions options;
  options.paths = std::move(paths);
  options.planned_bytes = planned_bytes;
  options.block_bytes = block_bytes;
  options.queue_depth = queue_depth;
  return options;
}

std::unique_ptr<SwapStore> open_store(SwapStoreOptions options) {
  Result<std::unique_ptr<SwapStore>> store = SwapStore::open(std::move(options));
  INFO((store.is_ok() ? std::string() : store.status().message()));
  REQUIRE(store.is_ok());
  return std::move(store).value();
}

// A store over a FaultInjectingEngine wrapping `inner`; `faults` stays valid while the store lives.
std::unique_ptr<SwapStore> open_faulty_store(SwapStoreOptions options, EngineKind inner,
                                             FaultInjectingEngine*& faults) {
  Result<std::unique_ptr<IoEngine>> engine = make_io_engine(inner, options.queue_depth);
  REQUIRE(engine.is_ok());
  auto wrapper = std::make_unique<FaultInjectingEngine>(std::move(engine).value());
  faults = wrapper.get();
  Result<std::unique_ptr<SwapStore>> store = SwapStore::open(std::move(options), std::move(wrapper));
  INFO((store.is_ok() ? std::string() : store.status().message()));
  REQUIRE(store.is_ok());
  return std::move(store).value();
}

// Which engines exist on this machine (io_uring may be disabled by the kernel or a sandbox).
std::vector<EngineKind> available_engines() {
  std::vector<EngineKind> kinds{EngineKind::kPosix};
  if (make_io_engine(EngineKind::kUring, 4).is_ok()) kinds.push_back(EngineKind::kUring);
  return kinds;
}

}  // namespace

TEST_CASE("SwapStore round-trips tensors of every size, aligned or not, through both engines", "[swap_store]") {
  for (EngineKind kind : available_engines()) {
    DYNAMIC_SECTION("engine " << engine_kind_name(kind)) {
      testing::TempDir dir;
      SwapStoreOptions options = options_for({dir.path()}, 256 * kMiB, 1 * kMiB, 16);
      options.engine = kind;
      options.fall_back_to_posix = false;
      std::unique_ptr<SwapStore> store = open_store(options);
      CHECK(store->engine_name() == engine_kind_name(kind));

      // Unaligned tails, sizes around the alignment and block boundaries, and one of hundreds of MiB.
      const std::vector<std::size_t> sizes = {
          1, 7, 4095, 4096, 4097, 65537, kMiB - 1, kMiB, kMiB + 1, 3 * kMiB + 513, 17 * kMiB + 5, 200 * kMiB + 123};
      std::vector<TestBuffer> out;
      std::vector<TestBuffer> in;
      std::vector<Ticket> written;
      std::mt19937 rng(42);
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        const std::size_t misalign = (i % 3 == 0) ? 0 : rng() % 64 + 1;
        out.emplace_back(sizes[i], misalign);
        out.back().fill(i + 1);
        in.emplace_back(sizes[i], (misalign + 5) % 64);
      }
      for (TestBuffer& b : out) {
        Result<Ticket> t = store->write(b.cspan());
        REQUIRE(t.is_ok());
        written.push_back(*t);
      }
      for (const Ticket& t : written) REQUIRE(store->wait(t).is_ok());
      std::vector<Ticket> reads;
      for (std::size_t i = 0; i < written.size(); ++i) {
        Result<Ticket> t = store->read(written[i], in[i].span());
        REQUIRE(t.is_ok());
        reads.push_back(*t);
      }
      for (std::size_t i = 0; i < reads.size(); ++i) {
        INFO("size " << sizes[i]);
        REQUIRE(store->wait(reads[i]).is_ok());
        CHECK(in[i].same_as(out[i]));
      }
      const SwapStoreStats stats = store->stats();
      const std::uint64_t total = std::accumulate(sizes.begin(), sizes.end(), std::uint64_t{0});
      CHECK(stats.bytes_written == total);
      CHECK(stats.bytes_read == total);
      CHECK(stats.staged_ops > 0);  // the unaligned buffers and tails went through staging
      CHECK(stats.staging_in_use == 0);
      CHECK(stats.extents_live == sizes.size());
      CHECK(directory_is_empty(dir.path()));  // the swap file has no name
    }
  }
}

TEST_CASE("SwapStore keeps hundreds of tickets in flight and stripes them over three paths", "[swap_store]") {
  testing::TempDir a, b, c;
  std::unique_ptr<SwapStore> store = open_store(options_for({a.path(), b.path(), c.path()}, 64 * kMiB, 64 * kKiB, 32));
  std::mt19937 rng(7);
  const std::size_t count = 400;
  std::vector<TestBuffer> out;
  std::vector<TestBuffer> in;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t size = rng() % (300 * kKiB) + 1;
    out.emplace_back(size, i % 2 == 0 ? 0 : 3);
    out.back().fill(1000 + i);
    in.emplace_back(size, 0);
  }
  std::vector<Ticket> written;
  for (TestBuffer& buffer : out) {
    Result<Ticket> t = store->write(buffer.cspan());
    REQUIRE(t.is_ok());
    written.push_back(*t);
  }
  // Reads are issued before the writes are waited for: per-extent ordering makes them see the data.
  std::vector<std::size_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<Ticket> reads(count);
  for (std::size_t i : order) {
    Result<Ticket> t = store->read(written[i], in[i].span());
    REQUIRE(t.is_ok());
    reads[i] = *t;
  }
  for (const Ticket& t : written) REQUIRE(store->wait(t).is_ok());
  for (std::size_t i : order) {
    REQUIRE(store->wait(reads[i]).is_ok());
    REQUIRE(in[i].same_as(out[i]));
  }
  const std::vector<SwapPathInfo> paths = store->paths();
  REQUIRE(paths.size() == 3);
  for (const SwapPathInfo& p : paths) CHECK(p.used_bytes > 0);
  CHECK(store->stats().staging_in_use == 0);
}

TEST_CASE("SwapStore stripes one extent's blocks round-robin over the paths", "[swap_store]") {
  testing::TempDir a, b, c;
  std::unique_ptr<SwapStore> store = open_store(options_for({a.path(), b.path(), c.path()}, 0, 64 * kKiB, 8));
  TestBuffer out(10 * 64 * kKiB, 0);
  out.fill(3);
  Result<Ticket> t = store->write(out.cspan());
  REQUIRE(t.is_ok());
  REQUIRE(store->wait(*t).is_ok());
  // Extent 1 starts on path 1 % 3: blocks 0,3,6,9 there and three on each of the others.
  const std::vector<SwapPathInfo> paths = store->paths();
  CHECK(paths[0].used_bytes == 3 * 64 * kKiB);
  CHECK(paths[1].used_bytes == 4 * 64 * kKiB);
  CHECK(paths[2].used_bytes == 3 * 64 * kKiB);
  TestBuffer in(out.size(), 0);
  Result<Ticket> r = store->read(*t, in.span());
  REQUIRE(r.is_ok());
  REQUIRE(store->wait(*r).is_ok());
  CHECK(in.same_as(out));
}

TEST_CASE("SwapStore runs the operations of one extent in issue order", "[swap_store]") {
  testing::TempDir dir;
  std::unique_ptr<SwapStore> store = open_store(options_for({dir.path()}, 32 * kMiB, 256 * kKiB, 8));
  TestBuffer first(5 * kMiB + 3, 0), second(5 * kMiB + 3, 1), back1(5 * kMiB + 3, 0), back2(5 * kMiB + 3, 0);
  first.fill(1);
  second.fill(2);
  // write, read, rewrite, read — all issued before any is waited for.
  Result<Ticket> w = store->write(first.cspan());
  REQUIRE(w.is_ok());
  Result<Ticket> r1 = store->read(*w, back1.span());
  Result<Ticket> w2 = store->rewrite(*w, second.cspan());
  Result<Ticket> r2 = store->read(*w, back2.span());
  REQUIRE((r1.is_ok() && w2.is_ok() && r2.is_ok()));
  CHECK(store->wait(*r2).is_ok());
  CHECK(store->wait(*w).is_ok());
  CHECK(store->wait(*r1).is_ok());
  CHECK(store->wait(*w2).is_ok());
  CHECK(back1.same_as(first));
  CHECK(back2.same_as(second));
}

TEST_CASE("SwapStore tickets: poll, one outcome per op, release and misuse", "[swap_store]") {
  testing::TempDir dir;
  std::unique_ptr<SwapStore> store = open_store(options_for({dir.path()}, 8 * kMiB, 64 * kKiB, 4));
  TestBuffer data(100000, 0);
  data.fill(9);
  Result<Ticket> w = store->write(data.cspan());
  REQUIRE(w.is_ok());
  std::optional<Status> outcome;
  for (int i = 0; i < 10000 && !outcome; ++i) {
    outcome = store->poll(*w);
    if (!outcome) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(outcome.has_value());
  CHECK(outcome->is_ok());
  // The outcome was handed out; asking again is a usage error, not a hang.
  const Status again = store->wait(*w);
  CHECK(again.code() == ErrorCode::kInvalidArgument);
  CHECK(again.message().find("already retired") != std::string::npos);

  REQUIRE(store->extent_bytes(*w).is_ok());
  CHECK(*store->extent_bytes(*w) == 100000);
  TestBuffer wrong(99999, 0);
  const Result<Ticket> bad_read = store->read(*w, wrong.span());
  REQUIRE_FALSE(bad_read.is_ok());
  CHECK(bad_read.status().message().find("holds 100000 bytes but the buffer has 99999") != std::string::npos);

  const std::uint64_t used = store->stats().used_bytes;
  CHECK(used >= 100000);
  REQUIRE(store->release(*w).is_ok());
  CHECK(store->stats().used_bytes == 0);
  CHECK(store->stats().extents_live == 0);
  TestBuffer in(100000, 0);
  const Result<Ticket> gone = store->read(*w, in.span());
  REQUIRE_FALSE(gone.is_ok());
  CHECK(gone.status().message().find("does not exist") != std::string::npos);

  // A zero-byte tensor is a valid extent.
  Result<Ticket> empty = store->write({});
  REQUIRE(empty.is_ok());
  CHECK(store->wait(*empty).is_ok());
  Result<Ticket> empty_read = store->read(*empty, {});
  REQUIRE(empty_read.is_ok());
  CHECK(store->wait(*empty_read).is_ok());
}

TEST_CASE("SwapStore refuses to release an extent with operations in flight", "[swap_store]") {
  testing::TempDir dir;
  SwapStoreOptions options = options_for({dir.path()}, 8 * kMiB, 64 * kKiB, 4);
  Result<std::unique_ptr<IoEngine>> inner = make_io_engine(EngineKind::kPosix, 4);
  REQUIRE(inner.is_ok());
  auto gate_owner = std::make_unique<testing::GateEngine>(std::move(inner).value(), false);
  testing::GateEngine* gate = gate_owner.get();
  Result<std::unique_ptr<SwapStore>> opened = SwapStore::open(options, std::move(gate_owner));
  REQUIRE(opened.is_ok());
  std::unique_ptr<SwapStore> store = std::move(opened).value();
  TestBuffer data(300000, 0);
  data.fill(4);
  Result<Ticket> w = store->write(data.cspan());
  REQUIRE(w.is_ok());
  CHECK_FALSE(store->poll(*w).has_value());
  const Status early = store->release(*w);
  CHECK(early.code() == ErrorCode::kInvalidArgument);
  CHECK(early.message().find("in flight") != std::string::npos);
  gate->open();
  CHECK(store->wait(*w).is_ok());
  CHECK(store->release(*w).is_ok());
}

TEST_CASE("SwapStore turns every injected fault into a clear Status and stays usable", "[swap_store][fault]") {
  for (EngineKind kind : available_engines()) {
    DYNAMIC_SECTION("engine " << engine_kind_name(kind)) {
      testing::TempDir dir;
      const std::size_t fds_before = open_fd_count();
      {
        FaultInjectingEngine* faults = nullptr;
        std::unique_ptr<SwapStore> store =
            open_faulty_store(options_for({dir.path()}, 16 * kMiB, 64 * kKiB, 8), kind, faults);
        std::vector<TestBuffer> out;
        for (int i = 0; i < 6; ++i) {
          out.emplace_back(256 * kKiB + static_cast<std::size_t>(i) * 1000, i % 2);
          out.back().fill(50 + static_cast<std::uint64_t>(i));
        }

        SECTION("EIO on one write fails only that tensor; rewriting it repairs the extent") {
          faults->add_rule(FaultRule{FaultRule::Kind::kError, 7, IoOpKind::kWrite, EIO, 0, false});
          std::vector<Ticket> written;
          for (TestBuffer& b : out) written.push_back(*store->write(b.cspan()));
          int failed = 0;
          std::size_t failed_index = 0;
          for (std::size_t i = 0; i < written.size(); ++i) {
            const Status s = store->wait(written[i]);
            if (s.is_ok()) continue;
            ++failed;
            failed_index = i;
            CHECK(s.code() == ErrorCode::kIoError);
            CHECK(s.message().find("Input/output error (EIO)") != std::string::npos);
            CHECK(s.message().find("swap file in " + dir.path()) != std::string::npos);
          }
          REQUIRE(failed == 1);
          TestBuffer back(out[failed_index].size(), 0);
          const Result<Ticket> bad = store->read(written[failed_index], back.span());
          REQUIRE(bad.is_ok());
          const Status bad_status = store->wait(*bad);
          CHECK(bad_status.code() == ErrorCode::kIoError);
          CHECK(bad_status.message().find("failed, so it holds no valid data") != std::string::npos);
          REQUIRE(store->wait(*store->rewrite(written[failed_index], out[failed_index].cspan())).is_ok());
          for (std::size_t i = 0; i < written.size(); ++i) {
            TestBuffer in(out[i].size(), 0);
            REQUIRE(store->wait(*store->read(written[i], in.span())).is_ok());
            CHECK(in.same_as(out[i]));
          }
          CHECK(store->stats().failed_tickets == 2);
        }
        SECTION("short transfers and EAGAIN are retried until the data is whole") {
          for (std::uint64_t n = 2; n < 40; n += 3) {
            faults->add_rule(FaultRule{FaultRule::Kind::kShort, n, std::nullopt, 0, 4096, false});
            faults->add_rule(FaultRule{FaultRule::Kind::kEagain, n + 1, std::nullopt, 0, 0, false});
          }
          std::vector<Ticket> written;
          for (TestBuffer& b : out) written.push_back(*store->write(b.cspan()));
          for (const Ticket& t : written) REQUIRE(store->wait(t).is_ok());
          for (std::size_t i = 0; i < written.size(); ++i) {
            TestBuffer in(out[i].size(), 1);
            REQUIRE(store->wait(*store->read(written[i], in.span())).is_ok());
            CHECK(in.same_as(out[i]));
          }
          const SwapStoreStats stats = store->stats();
          CHECK(stats.short_resubmits > 0);
          CHECK(stats.eagain_retries > 0);
          CHECK(faults->counters().shorts_fired > 0);
        }
        SECTION("ENOSPC from the disk: later writes fail, earlier extents stay readable") {
          std::vector<Ticket> early;
          for (std::size_t i = 0; i < 3; ++i) {
            early.push_back(*store->write(out[i].cspan()));
            REQUIRE(store->wait(early.back()).is_ok());
          }
          const std::uint64_t writes_so_far = faults->counters().writes_seen;
          faults->add_rule(FaultRule{FaultRule::Kind::kError, writes_so_far + 1, IoOpKind::kWrite, ENOSPC, 0, true});
          for (std::size_t i = 3; i < out.size(); ++i) {
            const Status s = store->wait(*store->write(out[i].cspan()));
            CHECK(s.code() == ErrorCode::kIoError);
            CHECK(s.message().find("No space left on device (ENOSPC)") != std::string::npos);
          }
          for (std::size_t i = 0; i < early.size(); ++i) {
            TestBuffer in(out[i].size(), 0);
            REQUIRE(store->wait(*store->read(early[i], in.span())).is_ok());
            CHECK(in.same_as(out[i]));
          }
        }
        SECTION("a failed read fails its ticket only") {
          Ticket w = *store->write(out[0].cspan());
          REQUIRE(store->wait(w).is_ok());
          faults->add_rule(
              FaultRule{FaultRule::Kind::kError, faults->counters().reads_seen + 2, IoOpKind::kRead, EIO, 0, false});
          TestBuffer in(out[0].size(), 0);
          const Status s = store->wait(*store->read(w, in.span()));
          CHECK(s.code() == ErrorCode::kIoError);
          CHECK(s.message().find("read of") != std::string::npos);
          REQUIRE(store->wait(*store->read(w, in.span())).is_ok());
          CHECK(in.same_as(out[0]));
        }
        CHECK(store->stats().staging_in_use == 0);
      }
      CHECK(open_fd_count() == fds_before);
      CHECK(directory_is_empty(dir.path()));
    }
  }
}

TEST_CASE("SwapStore detects a corrupted extent by its checksum", "[swap_store]") {
  testing::TempDir dir;
  SwapStoreOptions options = options_for({dir.path()}, 4 * kMiB, 64 * kKiB, 4);
  options.checksum = ChecksumKind::kCrc32c;
  std::unique_ptr<SwapStore> store = open_store(options);
  TestBuffer out(200 * kKiB, 0);
  out.fill(77);
  Ticket w = *store->write(out.cspan());
  REQUIRE(store->wait(w).is_ok());
  TestBuffer in(out.size(), 0);
  REQUIRE(store->wait(*store->read(w, in.span())).is_ok());
  CHECK(in.same_as(out));

  // Flip one byte of the extent (the first extent of a fresh store starts at offset 0) behind the
  // store's back, through the same file.
  const std::string reopen = store->paths().at(0).reopen_path;
  const int fd = ::open(reopen.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  std::byte b{};
  REQUIRE(::pread(fd, &b, 1, 12345) == 1);
  b = ~b;
  REQUIRE(::pwrite(fd, &b, 1, 12345) == 1);
  ::fsync(fd);
  ::close(fd);

  const Status s = store->wait(*store->read(w, in.span()));
  CHECK(s.code() == ErrorCode::kIoError);
  CHECK(s.message().find("checksum mismatch") != std::string::npos);
  CHECK(store->stats().checksum_failures == 1);
}

TEST_CASE("SwapStore checks free space before writing anything, and grows or stops at the plan", "[swap_store]") {
  testing::TempDir dir;
  SECTION("a plan larger than the disk fails at open") {
    const Result<std::unique_ptr<SwapStore>> store = SwapStore::open(options_for({dir.path()}, 1ull << 50, kMiB, 4));
    REQUIRE_FALSE(store.is_ok());
    CHECK(store.status().code() == ErrorCode::kInfeasible);
    CHECK(store.status().message().find("swap path '" + dir.path() + "'") != std::string::npos);
    CHECK(store.status().message().find("free") != std::string::npos);
    CHECK(directory_is_empty(dir.path()));
  }
  SECTION("growing beyond the plan") {
    std::unique_ptr<SwapStore> store = open_store(options_for({dir.path()}, kMiB, 256 * kKiB, 4));
    CHECK(store->stats().capacity_bytes == kMiB);
    TestBuffer out(5 * kMiB, 0);
    out.fill(5);
    REQUIRE(store->wait(*store->write(out.cspan())).is_ok());
    CHECK(store->stats().capacity_bytes >= 6 * kMiB);
  }
  SECTION("held to the plan") {
    SwapStoreOptions options = options_for({dir.path()}, kMiB, 256 * kKiB, 4);
    options.grow_beyond_plan = false;
    std::unique_ptr<SwapStore> store = open_store(options);
    TestBuffer small(512 * kKiB, 0), big(768 * kKiB, 0);
    small.fill(1);
    Ticket first = *store->write(small.cspan());
    REQUIRE(store->wait(first).is_ok());
    const Result<Ticket> full = store->write(big.cspan());
    REQUIRE_FALSE(full.is_ok());
    CHECK(full.status().code() == ErrorCode::kOutOfMemory);
    CHECK(full.status().message().find("is full") != std::string::npos);
    TestBuffer in(small.size(), 0);
    REQUIRE(store->wait(*store->read(first, in.span())).is_ok());
    CHECK(in.same_as(small));
  }
}

TEST_CASE("SwapStore validates its options with errors that say what is allowed", "[swap_store]") {
  testing::TempDir dir;
  struct Case {
    SwapStoreOptions options;
    std::string expected;
  };
  std::vector<Case> cases;
  cases.push_back({options_for({}, 0, kMiB, 4), "no path given"});
  cases.push_back({options_for({dir.path(), dir.path()}, 0, kMiB, 4), "given twice"});
  cases.push_back({options_for({dir.path()}, 0, 1000, 4), "1000 bytes is not a multiple of 4 KiB"});
  cases.push_back({options_for({dir.path()}, 0, kMiB, 0), "queue depth: 0 is not between 1 and 4096"});
  cases.push_back({options_for({dir.path() + "/missing"}, 0, kMiB, 4), "missing"});
  for (const Case& c : cases) {
    const Result<std::unique_ptr<SwapStore>> store = SwapStore::open(c.options);
    REQUIRE_FALSE(store.is_ok());
    INFO(store.status().message());
    CHECK(store.status().message().find(c.expected) != std::string::npos);
  }
}

TEST_CASE("SwapStore falls back to buffered I/O with one warning where O_DIRECT is refused", "[swap_store]") {
  if (!std::filesystem::is_directory("/dev/shm")) {
    WARN("no /dev/shm here; buffered fallback not exercised");
    return;
  }
  std::string shm_dir = "/dev/shm/zinf-test-XXXXXX";
  REQUIRE(::mkdtemp(shm_dir.data()) != nullptr);
  {
    std::vector<std::string> warnings;
    SwapStoreOptions options = options_for({shm_dir}, 4 * kMiB, 64 * kKiB, 4);
    options.on_warning = [&warnings](const std::string& w) { warnings.push_back(w); };
    std::unique_ptr<SwapStore> store = open_store(options);
    if (store->paths().at(0).direct) {
      WARN("/dev/shm accepted O_DIRECT on this kernel; the fallback is not exercised");
    } else {
      REQUIRE(warnings.size() == 1);
      CHECK(warnings[0].find("buffered") != std::string::npos);
      CHECK(store->describe().find("buffered") != std::string::npos);
    }
    TestBuffer out(333333, 1), in(333333, 2);
    out.fill(8);
    Ticket w = *store->write(out.cspan());
    REQUIRE(store->wait(w).is_ok());
    REQUIRE(store->wait(*store->read(w, in.span())).is_ok());
    CHECK(in.same_as(out));

    if (!store->paths().at(0).direct) {
      options.allow_buffered_fallback = false;
      const Result<std::unique_ptr<SwapStore>> strict = SwapStore::open(options);
      REQUIRE_FALSE(strict.is_ok());
      CHECK(strict.status().message().find("O_DIRECT") != std::string::npos);
    }
  }
  CHECK(directory_is_empty(shm_dir));
  std::filesystem::remove_all(shm_dir);
}

// ramfs refuses O_DIRECT on every kernel (tmpfs accepts it since Linux 6.6), but mounting it needs
// CAP_SYS_ADMIN: the check runs in a child with a private mount namespace and is skipped, with a
// warning, where that is not allowed.
TEST_CASE("SwapStore falls back to buffered I/O on a file system that refuses O_DIRECT (ramfs)", "[swap_store]") {
  testing::TempDir dir;
  const std::string mount_point = dir.path() + "/ramfs";
  const testing::RamfsChildResult child = testing::run_in_ramfs_child(mount_point, [&](int report) {
    const auto fail = [&](const std::string& why) {
      [[maybe_unused]] const ssize_t n = ::write(report, why.data(), why.size());
      ::_exit(1);
    };
    std::vector<std::string> warnings;
    SwapStoreOptions options = options_for({mount_point}, 2 * kMiB, 64 * kKiB, 4);
    options.on_warning = [&warnings](const std::string& w) { warnings.push_back(w); };
    {
      Result<std::unique_ptr<SwapStore>> store = SwapStore::open(options);
      if (!store.is_ok()) fail("open: " + store.status().message());
      if ((*store)->paths().at(0).direct) fail("ramfs accepted O_DIRECT");
      if (warnings.size() != 1 || warnings[0].find("buffered") == std::string::npos) fail("expected one warning");
      TestBuffer out(333333, 1), in(333333, 2);
      out.fill(8);
      Result<Ticket> w = (*store)->write(out.cspan());
      if (!w.is_ok() || !(*store)->wait(*w).is_ok()) fail("write failed");
      Result<Ticket> r = (*store)->read(*w, in.span());
      if (!r.is_ok() || !(*store)->wait(*r).is_ok()) fail("read failed");
      if (!in.same_as(out)) fail("data differs");
    }
    options.allow_buffered_fallback = false;
    const Result<std::unique_ptr<SwapStore>> strict = SwapStore::open(options);
    if (strict.is_ok() || strict.status().message().find("O_DIRECT") == std::string::npos) {
      fail("strict open should fail naming O_DIRECT");
    }
    if (!directory_is_empty(mount_point)) fail("files left in the mount");
    return 0;
  });
  if (!child.mounted) {
    WARN(
        "cannot mount ramfs here (needs CAP_SYS_ADMIN); buffered fallback checked only where /dev/shm refuses "
        "O_DIRECT");
    return;
  }
  INFO(child.report);
  CHECK(child.exit_code == 0);
}

}  // namespace zinf::io
