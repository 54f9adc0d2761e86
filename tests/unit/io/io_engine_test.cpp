// Tests of the raw I/O engines (UringEngine, PosixEngine) through the IoEngine interface, on a real
// file in a TempDir: deep-queue round trips, raw short and error results, reap timeouts, wake()
// and registered buffers. Where io_uring is unavailable the uring half is skipped with a warning.
#include "libengine/io/io_engine.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "libengine/io/posix_engine.h"
#include "libengine/io/uring_engine.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::io {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using zinf::testing::TempDir;

constexpr std::size_t kAlignmentBytes = 4096;

struct FreeDeleter {
  void operator()(std::byte* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<std::byte[], FreeDeleter>;

// 4 KiB-aligned memory, as O_DIRECT needs.
AlignedBytes aligned_bytes(std::size_t bytes) {
  void* memory = nullptr;
  REQUIRE(::posix_memalign(&memory, kAlignmentBytes, bytes) == 0);
  return AlignedBytes(static_cast<std::byte*>(memory));
}

void fill_random(std::byte* data, std::size_t bytes, std::mt19937_64& rng) {
  for (std::size_t i = 0; i < bytes; i += sizeof(std::uint64_t)) {
    const std::uint64_t word = rng();
    std::memcpy(data + i, &word, std::min(sizeof word, bytes - i));
  }
}

// A file opened by the test: O_DIRECT where the file system allows it (not tmpfs), else buffered.
class TestFile {
 public:
  TestFile(const TempDir& dir, const std::string& name, int flags = O_RDWR | O_CREAT) {
    const std::string path = dir.path() + "/" + name;
    fd_ = ::open(path.c_str(), flags | O_DIRECT | O_CLOEXEC, 0600);
    if (fd_ < 0 && errno == EINVAL) fd_ = ::open(path.c_str(), flags | O_CLOEXEC, 0600);
    REQUIRE(fd_ >= 0);
  }
  ~TestFile() { ::close(fd_); }
  TestFile(const TestFile&) = delete;
  TestFile& operator=(const TestFile&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// The engine of `kind`, or null (with a warning) when io_uring is unavailable on this machine.
std::unique_ptr<IoEngine> make_engine(EngineKind kind, unsigned queue_depth) {
  Result<std::unique_ptr<IoEngine>> engine = make_io_engine(kind, queue_depth);
  if (!engine.is_ok() && kind == EngineKind::kUring) {
    WARN("skipping the io_uring engine: " << engine.status().message());
    return nullptr;
  }
  REQUIRE(engine.is_ok());
  return std::move(engine).value();
}

// Submits `ops` in random batches keeping the queue as full as its depth allows, reaps every
// result, and returns them by tag. Checks that each tag comes back once and in_flight() is exact.
std::map<std::uint64_t, std::int64_t> run_ops(IoEngine& engine, const std::vector<IoOp>& ops, std::mt19937_64& rng) {
  std::map<std::uint64_t, std::int64_t> results;
  std::size_t next = 0;
  unsigned expected_in_flight = 0;
  std::vector<IoResult> reaped;
  while (next < ops.size() || expected_in_flight > 0) {
    const std::size_t room = engine.queue_depth() - expected_in_flight;
    const std::size_t batch = std::min({room, ops.size() - next, static_cast<std::size_t>(1 + rng() % 8)});
    if (batch > 0) {
      REQUIRE(engine.submit(std::span<const IoOp>(ops).subspan(next, batch)).is_ok());
      next += batch;
      expected_in_flight += static_cast<unsigned>(batch);
    }
    REQUIRE(engine.in_flight() == expected_in_flight);
    reaped.clear();
    const Result<std::size_t> count = engine.reap(1, 10s, reaped);
    REQUIRE(count.is_ok());
    REQUIRE(*count == reaped.size());
    REQUIRE(*count >= 1);
    for (const IoResult& result : reaped) REQUIRE(results.emplace(result.tag, result.result).second);
    expected_in_flight -= static_cast<unsigned>(*count);
    REQUIRE(engine.in_flight() == expected_in_flight);
  }
  return results;
}

std::int64_t run_one(IoEngine& engine, const IoOp& op) {
  std::mt19937_64 rng(1);
  const auto results = run_ops(engine, {op}, rng);
  REQUIRE(results.count(op.tag) == 1);
  return results.at(op.tag);
}

TEST_CASE("engine kinds are named uring and posix", "[engine]") {
  CHECK(engine_kind_name(EngineKind::kUring) == "uring");
  CHECK(engine_kind_name(EngineKind::kPosix) == "posix");
  CHECK(*engine_kind_from_name("uring", "--engine") == EngineKind::kUring);
  CHECK(*engine_kind_from_name("posix", "--engine") == EngineKind::kPosix);
  const Result<EngineKind> bad = engine_kind_from_name("foo", "--engine");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == ErrorCode::kInvalidArgument);
  CHECK(bad.status().message() == "--engine: 'foo' is not one of uring, posix");
  CHECK(engine_kind_from_name("Uring", "scenario.io.engine").status().message() ==
        "scenario.io.engine: 'Uring' is not one of uring, posix");
}

TEST_CASE("make_io_engine rejects a zero queue depth", "[engine]") {
  for (const EngineKind kind : {EngineKind::kUring, EngineKind::kPosix}) {
    const auto engine = make_io_engine(kind, 0);
    REQUIRE_FALSE(engine.is_ok());
    CHECK(engine.status().code() == ErrorCode::kInvalidArgument);
  }
}

TEST_CASE("engines report their name and queue depth", "[engine]") {
  const EngineKind kind = GENERATE(EngineKind::kUring, EngineKind::kPosix);
  auto engine = make_engine(kind, 32);
  if (!engine) return;
  CHECK(engine->name() == engine_kind_name(kind));
  CHECK(engine->queue_depth() == 32);
  CHECK(engine->in_flight() == 0);
}

TEST_CASE("engines write and read back random data at many offsets with a deep queue", "[engine]") {
  const EngineKind kind = GENERATE(EngineKind::kUring, EngineKind::kPosix);
  INFO("engine " << engine_kind_name(kind));
  auto engine = make_engine(kind, 32);
  if (!engine) return;
  TempDir dir;
  TestFile file(dir, "data");
  const int fds[] = {file.fd()};
  REQUIRE(engine->register_files(fds).is_ok());

  // 256 extents of 4 KiB..1 MiB laid end to end, then visited in random order.
  std::mt19937_64 rng(42);
  constexpr std::size_t kOps = 256;
  std::vector<std::uint64_t> offsets;
  std::vector<std::uint32_t> lengths;
  std::uint64_t file_bytes = 0;
  for (std::size_t i = 0; i < kOps; ++i) {
    const auto length = static_cast<std::uint32_t>(kAlignmentBytes << (rng() % 9));
    offsets.push_back(file_bytes);
    lengths.push_back(length);
    file_bytes += length;
  }
  AlignedBytes written = aligned_bytes(file_bytes);
  AlignedBytes read_back = aligned_bytes(file_bytes);
  fill_random(written.get(), file_bytes, rng);
  std::memset(read_back.get(), 0, file_bytes);

  std::vector<std::size_t> order(kOps);
  for (std::size_t i = 0; i < kOps; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<IoOp> writes;
  std::vector<IoOp> reads;
  for (const std::size_t i : order) {
    writes.push_back(IoOp{IoOpKind::kWrite, 0, offsets[i], written.get() + offsets[i], lengths[i], -1, 1000 + i});
  }
  std::shuffle(order.begin(), order.end(), rng);
  for (const std::size_t i : order) {
    reads.push_back(IoOp{IoOpKind::kRead, 0, offsets[i], read_back.get() + offsets[i], lengths[i], -1, 5000 + i});
  }

  const auto write_results = run_ops(*engine, writes, rng);
  REQUIRE(write_results.size() == kOps);
  for (std::size_t i = 0; i < kOps; ++i) REQUIRE(write_results.at(1000 + i) == lengths[i]);

  const auto read_results = run_ops(*engine, reads, rng);
  REQUIRE(read_results.size() == kOps);
  for (std::size_t i = 0; i < kOps; ++i) REQUIRE(read_results.at(5000 + i) == lengths[i]);
  CHECK(std::memcmp(written.get(), read_back.get(), file_bytes) == 0);
}

TEST_CASE("reading at or past end of file is short, not an error", "[engine]") {
  const EngineKind kind = GENERATE(EngineKind::kUring, EngineKind::kPosix);
  auto engine = make_engine(kind, 8);
  if (!engine) return;
  TempDir dir;
  TestFile file(dir, "short");
  const int fds[] = {file.fd()};
  REQUIRE(engine->register_files(fds).is_ok());
  AlignedBytes buffer = aligned_bytes(3 * kAlignmentBytes);
  std::memset(buffer.get(), 0x5A, 3 * kAlignmentBytes);

  REQUIRE(run_one(*engine, IoOp{IoOpKind::kWrite, 0, 0, buffer.get(), kAlignmentBytes, -1, 1}) == kAlignmentBytes);
  // The file is one block long: a two-block read gets one block, a read beyond it gets nothing.
  CHECK(run_one(*engine, IoOp{IoOpKind::kRead, 0, 0, buffer.get(), 2 * kAlignmentBytes, -1, 2}) == kAlignmentBytes);
  CHECK(run_one(*engine, IoOp{IoOpKind::kRead, 0, 2 * kAlignmentBytes, buffer.get(), kAlignmentBytes, -1, 3}) == 0);
}

TEST_CASE("an unregistered file index or a read-only fd completes with -EBADF", "[engine]") {
  const EngineKind kind = GENERATE(EngineKind::kUring, EngineKind::kPosix);
  auto engine = make_engine(kind, 8);
  if (!engine) return;
  TempDir dir;
  TestFile writable(dir, "rw");
  TestFile read_only(dir, "rw", O_RDONLY);
  const int fds[] = {writable.fd(), read_only.fd()};
  REQUIRE(engine->register_files(fds).is_ok());
  AlignedBytes buffer = aligned_bytes(kAlignmentBytes);
  std::memset(buffer.get(), 1, kAlignmentBytes);

  CHECK(run_one(*engine, IoOp{IoOpKind::kWrite, 1, 0, buffer.get(), kAlignmentBytes, -1, 7}) == -EBADF);
  CHECK(run_one(*engine, IoOp{IoOpKind::kWrite, 2, 0, buffer.get(), kAlignmentBytes, -1, 8}) == -EBADF);
  CHECK(run_one(*engine, IoOp{IoOpKind::kRead, -1, 0, buffer.get(), kAlignmentBytes, -1, 9}) == -EBADF);
  CHECK(run_one(*engine, IoOp{IoOpKind::kWrite, 0, 0, buffer.get(), kAlignmentBytes, -1, 10}) == kAlignmentBytes);

  // Registering again replaces the set: index 0 is now the read-only fd.
  const int swapped[] = {read_only.fd()};
  REQUIRE(engine->register_files(swapped).is_ok());
  CHECK(run_one(*engine, IoOp{IoOpKind::kWrite, 0, 0, buffer.get(), kAlignmentBytes, -1, 11}) == -EBADF);
  CHECK(run_one(*engine, IoOp{IoOpKind::kRead, 0, 0, buffer.get(), kAlignmentBytes, -1, 12}) == kAlignmentBytes);
  // No files at all.
  REQUIRE(engine->register_files({}).is_ok());
  CHECK(run_one(*engine, IoOp{IoOpKind::kRead, 0, 0, buffer.get(), kAlignmentBytes, -1, 13}) == -EBADF);
}

TEST_CASE("registering a closed fd is an error for io_uring", "[engine]") {
  auto engine = make_engine(EngineKind::kUring, 8);
  if (!engine) return;
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  const int fds[] = {pipe_fds[0]};
  const Status status = engine->register_files(fds);
  REQUIRE_FALSE(status.is_ok());
  CHECK(status.code() == ErrorCode::kIoError);
  CHECK_THAT(status.message(), Catch::Contains("io_uring_register_files") && Catch::Contains("Bad file descriptor"));
}

TEST_CASE("submitting beyond the queue depth fails and queues nothing", "[engine]") {
  const EngineKind kind = GENERATE(EngineKind::kUring, EngineKind::kPosix);
  auto engine = make_engine(kind, 4);
  if (!engine) return;
  TempDir dir;
  TestFile file(dir, "depth");
  const int fds[] = {file.fd()};
  REQUIRE(engine->register_files(fds).is_ok());
  AlignedBytes buffer = aligned_bytes(5 * kAlignmentBytes);
  std::memset(buffer.get(), 3, 5 * kAlignmentBytes);
  std::vector<IoOp> ops;
  for (std::uint64_t i = 0; i < 5; ++i) {
    ops.push_back(IoOp{IoOpKind::kWrite, 0, i * kAlignmentBytes, buffer.get() + i * kAlignmentBytes,
                       static_cast<std::uint32_t>(kAlignmentBytes), -1, i});
  }
  const Status too_many = engine->submit(ops);
  REQUIRE_FALSE(too_many.is_ok());
  CHECK_THAT(too_many.message(), Catch::Contains("queue depth 4"));
  CHECK(engine->in_flight() == 0);

  std::mt19937_64 rng(7);
  const auto results = run_ops(*engine, ops, rng);
  CHECK(results.size() == 5);
}

TEST_CASE("reap with nothing in flight returns no results when the timeout passes", "[engine]") {
  const EngineKind kind = GENERATE(EngineKind::kUring, EngineKind::kPosix);
  auto engine = make_engine(kind, 8);
  if (!engine) return;
  std::vector<IoResult> out;

  auto start = Clock::now();
  Result<std::size_t> count = engine->reap(0, 0ms, out);
  REQUIRE(count.is_ok());
  CHECK(*count == 0);
  CHECK(Clock::now() - start < 1s);

  start = Clock::now();
  count = engine->reap(1, 50ms, out);
  const auto elapsed = Clock::now() - start;
  REQUIRE(count.is_ok());
  CHECK(*count == 0);
  CHECK(out.empty());
  CHECK(elapsed >= 45ms);
  CHECK(elapsed < 2s);
}

TEST_CASE("wake from another thread ends a blocked reap", "[engine]") {
  const EngineKind kind = GENERATE(EngineKind::kUring, EngineKind::kPosix);
  auto engine = make_engine(kind, 8);
  if (!engine) return;
  std::vector<IoResult> out;

  SECTION("while reap waits") {
    for (int round = 0; round < 3; ++round) {
      std::thread waker([&engine] {
        std::this_thread::sleep_for(50ms);
        engine->wake();
      });
      const auto start = Clock::now();
      const Result<std::size_t> count = engine->reap(1, 60s, out);
      const auto elapsed = Clock::now() - start;
      waker.join();
      REQUIRE(count.is_ok());
      CHECK(*count == 0);
      CHECK(elapsed < 10s);
    }
  }
  SECTION("before reap: the next reap returns promptly, the one after waits again") {
    engine->wake();
    auto start = Clock::now();
    Result<std::size_t> count = engine->reap(1, 60s, out);
    REQUIRE(count.is_ok());
    CHECK(*count == 0);
    CHECK(Clock::now() - start < 10s);

    start = Clock::now();
    count = engine->reap(1, 50ms, out);
    REQUIRE(count.is_ok());
    CHECK(Clock::now() - start >= 45ms);
  }
  SECTION("while ops complete") {
    TempDir dir;
    TestFile file(dir, "wake");
    const int fds[] = {file.fd()};
    REQUIRE(engine->register_files(fds).is_ok());
    AlignedBytes buffer = aligned_bytes(kAlignmentBytes);
    std::memset(buffer.get(), 9, kAlignmentBytes);
    engine->wake();
    const IoOp op{IoOpKind::kWrite, 0, 0, buffer.get(), static_cast<std::uint32_t>(kAlignmentBytes), -1, 77};
    REQUIRE(engine->submit({&op, 1}).is_ok());
    // The wake and the completion may be seen together or apart; the op's result comes back once.
    std::size_t results = 0;
    for (int attempt = 0; attempt < 3 && results == 0; ++attempt) {
      const Result<std::size_t> count = engine->reap(1, 10s, out);
      REQUIRE(count.is_ok());
      results += *count;
    }
    REQUIRE(results == 1);
    CHECK(out.back().tag == 77);
    CHECK(out.back().result == static_cast<std::int64_t>(kAlignmentBytes));
    CHECK(engine->in_flight() == 0);
  }
}

TEST_CASE("ops may name registered buffers", "[engine]") {
  const EngineKind kind = GENERATE(EngineKind::kUring, EngineKind::kPosix);
  auto engine = make_engine(kind, 16);
  if (!engine) return;
  TempDir dir;
  TestFile file(dir, "fixed");
  const int fds[] = {file.fd()};
  REQUIRE(engine->register_files(fds).is_ok());

  constexpr std::size_t kHalfBytes = 512 * 1024;
  AlignedBytes staging = aligned_bytes(2 * kHalfBytes);
  std::byte* source = staging.get();
  std::byte* target = staging.get() + kHalfBytes;
  std::mt19937_64 rng(3);
  fill_random(source, kHalfBytes, rng);
  std::memset(target, 0, kHalfBytes);
  const iovec buffers[] = {{source, kHalfBytes}, {target, kHalfBytes}};
  const Status registered = engine->register_buffers(buffers);
  if (!registered.is_ok()) WARN("buffers not registered, ops use plain I/O: " << registered.message());

  // Four 128 KiB pieces out of buffer 0, read back into buffer 1; one read names an index that was
  // never registered, which an engine must still serve from op.buffer.
  constexpr std::uint32_t kPieceBytes = 128 * 1024;
  std::vector<IoOp> writes;
  std::vector<IoOp> reads;
  for (std::uint32_t i = 0; i < 4; ++i) {
    writes.push_back(
        IoOp{IoOpKind::kWrite, 0, std::uint64_t{i} * kPieceBytes, source + i * kPieceBytes, kPieceBytes, 0, i});
    reads.push_back(IoOp{IoOpKind::kRead, 0, std::uint64_t{i} * kPieceBytes, target + i * kPieceBytes, kPieceBytes,
                         i == 3 ? 9 : 1, 10 + i});
  }
  for (const auto& [tag, result] : run_ops(*engine, writes, rng)) CHECK(result == kPieceBytes);
  for (const auto& [tag, result] : run_ops(*engine, reads, rng)) CHECK(result == kPieceBytes);
  CHECK(std::memcmp(source, target, kHalfBytes) == 0);
  REQUIRE(engine->register_buffers({}).is_ok());
}

TEST_CASE("destroying an engine with ops in flight waits for them", "[engine]") {
  const EngineKind kind = GENERATE(EngineKind::kUring, EngineKind::kPosix);
  auto engine = make_engine(kind, 16);
  if (!engine) return;
  TempDir dir;
  TestFile file(dir, "teardown");
  const int fds[] = {file.fd()};
  REQUIRE(engine->register_files(fds).is_ok());
  constexpr std::uint32_t kOpBytes = 256 * 1024;
  AlignedBytes buffer = aligned_bytes(16 * std::size_t{kOpBytes});
  std::memset(buffer.get(), 0x11, 16 * std::size_t{kOpBytes});
  std::vector<IoOp> ops;
  for (std::uint32_t i = 0; i < 16; ++i) {
    ops.push_back(IoOp{IoOpKind::kWrite, 0, std::uint64_t{i} * kOpBytes, buffer.get() + std::size_t{i} * kOpBytes,
                       kOpBytes, -1, i});
  }
  REQUIRE(engine->submit(ops).is_ok());
  engine.reset();  // must not return while the kernel or a worker still uses `buffer`
  buffer.reset();
  struct stat st {};
  REQUIRE(::fstat(file.fd(), &st) == 0);
  CHECK(st.st_size == 16 * std::int64_t{kOpBytes});
}

}  // namespace
}  // namespace zinf::io
