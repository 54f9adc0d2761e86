// Tests of FaultInjectingEngine over both real engines on a real file: each rule kind fires on
// exactly the Nth op with the right tag, failed ops are not performed, short ops really transfer
// only K bytes, persistent rules keep firing, counters add up, rules may be added from any thread.
#include "libengine/io/fault_injecting_engine.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::io {
namespace {

using namespace std::chrono_literals;
using zinf::testing::TempDir;

constexpr std::uint32_t kBlockBytes = 4096;

struct FreeDeleter {
  void operator()(std::byte* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<std::byte[], FreeDeleter>;

AlignedBytes aligned_bytes(std::size_t bytes, int fill) {
  void* memory = nullptr;
  REQUIRE(::posix_memalign(&memory, kBlockBytes, bytes) == 0);
  std::memset(memory, fill, bytes);
  return AlignedBytes(static_cast<std::byte*>(memory));
}

bool all_equal(const std::byte* data, std::size_t bytes, int value) {
  for (std::size_t i = 0; i < bytes; ++i) {
    if (data[i] != static_cast<std::byte>(value)) return false;
  }
  return true;
}

// A fault engine over `kind` with one O_DIRECT (or, on tmpfs, buffered) file registered as index 0.
// Null, with a warning, when io_uring is unavailable.
class Fixture {
 public:
  explicit Fixture(EngineKind kind, unsigned queue_depth = 16) {
    const std::string path = dir_.path() + "/faults";
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
    if (fd_ < 0 && errno == EINVAL) fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    REQUIRE(fd_ >= 0);
    Result<std::unique_ptr<IoEngine>> inner = make_io_engine(kind, queue_depth);
    if (!inner.is_ok() && kind == EngineKind::kUring) {
      WARN("skipping the io_uring engine: " << inner.status().message());
      return;
    }
    REQUIRE(inner.is_ok());
    engine_ = std::make_unique<FaultInjectingEngine>(std::move(inner).value());
    const int fds[] = {fd_};
    REQUIRE(engine_->register_files(fds).is_ok());
  }
  ~Fixture() {
    engine_.reset();
    ::close(fd_);
  }
  Fixture(const Fixture&) = delete;
  Fixture& operator=(const Fixture&) = delete;

  FaultInjectingEngine* engine() { return engine_.get(); }
  std::int64_t file_size_bytes() const {
    struct stat st {};
    REQUIRE(::fstat(fd_, &st) == 0);
    return st.st_size;
  }

  // Submits `ops` in one batch and reaps until every one has a result; returns them by tag.
  std::map<std::uint64_t, std::int64_t> run(const std::vector<IoOp>& ops) {
    REQUIRE(engine_->submit(ops).is_ok());
    REQUIRE(engine_->in_flight() == ops.size());
    std::map<std::uint64_t, std::int64_t> results;
    std::vector<IoResult> reaped;
    while (results.size() < ops.size()) {
      reaped.clear();
      const Result<std::size_t> count = engine_->reap(1, 10s, reaped);
      REQUIRE(count.is_ok());
      REQUIRE(*count >= 1);
      for (const IoResult& result : reaped) REQUIRE(results.emplace(result.tag, result.result).second);
    }
    CHECK(engine_->in_flight() == 0);
    return results;
  }
  std::int64_t run_one(const IoOp& op) { return run({op}).at(op.tag); }

 private:
  TempDir dir_;
  int fd_ = -1;
  std::unique_ptr<FaultInjectingEngine> engine_;
};

IoOp write_op(std::uint64_t block, std::byte* buffer, std::uint64_t tag, std::uint32_t length = kBlockBytes) {
  return IoOp{IoOpKind::kWrite, 0, block * kBlockBytes, buffer, length, -1, tag};
}
IoOp read_op(std::uint64_t block, std::byte* buffer, std::uint64_t tag, std::uint32_t length = kBlockBytes) {
  return IoOp{IoOpKind::kRead, 0, block * kBlockBytes, buffer, length, -1, tag};
}

TEST_CASE("the fault engine is named after the engine it wraps", "[fault]") {
  const EngineKind kind = GENERATE(EngineKind::kUring, EngineKind::kPosix);
  Fixture fixture(kind);
  if (!fixture.engine()) return;
  CHECK(fixture.engine()->name() == "fault(" + std::string(engine_kind_name(kind)) + ")");
  CHECK(fixture.engine()->queue_depth() == 16);
}

TEST_CASE("an error or EAGAIN rule fails exactly the Nth op without performing it", "[fault]") {
  const EngineKind kind = GENERATE(EngineKind::kUring, EngineKind::kPosix);
  const bool eagain = GENERATE(false, true);
  Fixture fixture(kind);
  FaultInjectingEngine* engine = fixture.engine();
  if (!engine) return;
  const std::int64_t expected_error = eagain ? -EAGAIN : -ENOSPC;
  engine->add_rule(eagain ? FaultRule::eagain(3) : FaultRule::fail(3, ENOSPC));

  // Five one-block writes, block i filled with i + 1, tags 100..104.
  AlignedBytes source = aligned_bytes(5 * kBlockBytes, 0);
  std::vector<IoOp> writes;
  for (std::uint64_t i = 0; i < 5; ++i) {
    std::memset(source.get() + i * kBlockBytes, static_cast<int>(i + 1), kBlockBytes);
    writes.push_back(write_op(i, source.get() + i * kBlockBytes, 100 + i));
  }
  const auto results = fixture.run(writes);
  REQUIRE(results.size() == 5);
  for (std::uint64_t i = 0; i < 5; ++i) {
    INFO("tag " << 100 + i);
    CHECK(results.at(100 + i) == (i == 2 ? expected_error : std::int64_t{kBlockBytes}));
  }
  FaultCounters counters = engine->counters();
  CHECK(counters.ops_seen == 5);
  CHECK(counters.writes_seen == 5);
  CHECK(counters.reads_seen == 0);
  CHECK(counters.faults_fired == 1);
  CHECK(counters.errors_fired == (eagain ? 0U : 1U));
  CHECK(counters.eagains_fired == (eagain ? 1U : 0U));

  // The faulted block was never written: it is a hole reading as zeros; its neighbours are there.
  AlignedBytes back = aligned_bytes(5 * kBlockBytes, 0xEE);
  CHECK(fixture.run_one(read_op(0, back.get(), 200, 5 * kBlockBytes)) == 5 * kBlockBytes);
  for (std::uint64_t i = 0; i < 5; ++i) {
    INFO("block " << i);
    CHECK(all_equal(back.get() + i * kBlockBytes, kBlockBytes, i == 2 ? 0 : static_cast<int>(i + 1)));
  }
  CHECK(engine->counters().faults_fired == 1);  // op 6 is not the 3rd: the rule fired once only
}

TEST_CASE("a short rule really transfers only the first K bytes, under the original tag", "[fault]") {
  const EngineKind kind = GENERATE(EngineKind::kUring, EngineKind::kPosix);
  Fixture fixture(kind);
  FaultInjectingEngine* engine = fixture.engine();
  if (!engine) return;
  constexpr std::uint32_t kOpBytes = 4 * kBlockBytes;
  AlignedBytes source = aligned_bytes(kOpBytes, 0xAB);

  SECTION("short write") {
    engine->add_rule(FaultRule::shorten(1, kBlockBytes));
    CHECK(fixture.run_one(write_op(0, source.get(), 41, kOpBytes)) == kBlockBytes);
    CHECK(fixture.file_size_bytes() == kBlockBytes);
    AlignedBytes back = aligned_bytes(kOpBytes, 0);
    CHECK(fixture.run_one(read_op(0, back.get(), 42, kOpBytes)) == kBlockBytes);  // EOF after K bytes
    CHECK(all_equal(back.get(), kBlockBytes, 0xAB));
  }
  SECTION("short read, counted over reads only") {
    engine->add_rule(FaultRule::shorten(2, 2 * kBlockBytes).counting_only(IoOpKind::kRead));
    CHECK(fixture.run_one(write_op(0, source.get(), 50, kOpBytes)) == kOpBytes);
    AlignedBytes back = aligned_bytes(kOpBytes, 0xEE);
    CHECK(fixture.run_one(read_op(0, back.get(), 51, kOpBytes)) == kOpBytes);  // read 1
    std::memset(back.get(), 0xEE, kOpBytes);
    CHECK(fixture.run_one(read_op(0, back.get(), 52, kOpBytes)) == 2 * kBlockBytes);  // read 2
    CHECK(all_equal(back.get(), 2 * kBlockBytes, 0xAB));
    CHECK(all_equal(back.get() + 2 * kBlockBytes, 2 * kBlockBytes, 0xEE));     // untouched
    CHECK(fixture.run_one(read_op(0, back.get(), 53, kOpBytes)) == kOpBytes);  // read 3
  }
  SECTION("an op already shorter than K runs whole") {
    engine->add_rule(FaultRule::shorten(1, 2 * kOpBytes));
    CHECK(fixture.run_one(write_op(0, source.get(), 60, kOpBytes)) == kOpBytes);
  }
  CHECK(engine->counters().shorts_fired == 1);
  CHECK(engine->counters().faults_fired == 1);
}

TEST_CASE("a rule limited to writes counts writes only", "[fault]") {
  const EngineKind kind = GENERATE(EngineKind::kUring, EngineKind::kPosix);
  Fixture fixture(kind);
  FaultInjectingEngine* engine = fixture.engine();
  if (!engine) return;
  engine->add_rule(FaultRule::fail(2, EIO).counting_only(IoOpKind::kWrite));
  // One buffer per op: ops of one batch run concurrently.
  AlignedBytes buffers = aligned_bytes(5 * kBlockBytes, 7);
  const auto buffer = [&buffers](std::size_t op) { return buffers.get() + op * kBlockBytes; };
  // Op 2 overall is a read and op 3 the second write: only the latter fails.
  const auto results = fixture.run({write_op(0, buffer(0), 1), read_op(0, buffer(1), 2), write_op(1, buffer(2), 3),
                                    read_op(1, buffer(3), 4), write_op(2, buffer(4), 5)});
  // Ops in one batch are unordered, so a read may run before the write of its block: it is only
  // required not to fail.
  CHECK(results.at(1) == kBlockBytes);
  CHECK(results.at(2) >= 0);
  CHECK(results.at(3) == -EIO);
  CHECK(results.at(4) >= 0);
  CHECK(results.at(5) == kBlockBytes);
  const FaultCounters counters = engine->counters();
  CHECK(counters.ops_seen == 5);
  CHECK(counters.reads_seen == 2);
  CHECK(counters.writes_seen == 3);
  CHECK(counters.faults_fired == 1);
}

TEST_CASE("a persistent rule fires on the Nth op and every later one", "[fault]") {
  const EngineKind kind = GENERATE(EngineKind::kUring, EngineKind::kPosix);
  Fixture fixture(kind);
  FaultInjectingEngine* engine = fixture.engine();
  if (!engine) return;
  engine->add_rule(FaultRule::fail(3, ENOSPC).and_every_later_op());
  AlignedBytes buffer = aligned_bytes(kBlockBytes, 1);
  for (std::uint64_t op = 1; op <= 6; ++op) {
    INFO("op " << op);
    CHECK(fixture.run_one(write_op(op, buffer.get(), op)) == (op < 3 ? std::int64_t{kBlockBytes} : -ENOSPC));
  }
  CHECK(engine->counters().faults_fired == 4);
  CHECK(engine->counters().errors_fired == 4);
  engine->clear_rules();
  CHECK(fixture.run_one(write_op(7, buffer.get(), 7)) == kBlockBytes);
  CHECK(engine->counters().ops_seen == 7);
  CHECK(engine->counters().faults_fired == 4);
}

TEST_CASE("when rules overlap the first one added wins", "[fault]") {
  Fixture fixture(EngineKind::kPosix);
  FaultInjectingEngine* engine = fixture.engine();
  engine->add_rule(FaultRule::fail(2, EIO));
  engine->add_rule(FaultRule::eagain(1).and_every_later_op());
  AlignedBytes buffer = aligned_bytes(kBlockBytes, 1);
  CHECK(fixture.run_one(write_op(0, buffer.get(), 1)) == -EAGAIN);
  CHECK(fixture.run_one(write_op(0, buffer.get(), 2)) == -EIO);
  CHECK(fixture.run_one(write_op(0, buffer.get(), 3)) == -EAGAIN);
  CHECK(fixture.file_size_bytes() == 0);  // nothing was performed
}

TEST_CASE("fault results are in flight until reaped and satisfy reap's minimum", "[fault]") {
  Fixture fixture(EngineKind::kPosix);
  FaultInjectingEngine* engine = fixture.engine();
  engine->add_rule(FaultRule::fail(1, EIO));
  AlignedBytes buffer = aligned_bytes(kBlockBytes, 1);
  const IoOp failed = write_op(0, buffer.get(), 11);
  REQUIRE(engine->submit({&failed, 1}).is_ok());
  CHECK(engine->in_flight() == 1);
  std::vector<IoResult> out;
  const auto start = std::chrono::steady_clock::now();
  Result<std::size_t> count = engine->reap(1, 60s, out);
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  REQUIRE(count.is_ok());
  REQUIRE(*count == 1);
  CHECK(out[0].tag == 11);
  CHECK(out[0].result == -EIO);
  CHECK(engine->in_flight() == 0);

  // One faulted and one real op: a reap for two waits for the real one.
  engine->add_rule(FaultRule::eagain(3));
  const IoOp both[] = {write_op(0, buffer.get(), 12), write_op(1, buffer.get(), 13)};
  REQUIRE(engine->submit(both).is_ok());
  CHECK(engine->in_flight() == 2);
  out.clear();
  std::size_t total = 0;
  while (total < 2) {
    count = engine->reap(2 - total, 10s, out);
    REQUIRE(count.is_ok());
    REQUIRE(*count > 0);
    total += *count;
  }
  REQUIRE(out.size() == 2);
  std::map<std::uint64_t, std::int64_t> by_tag{{out[0].tag, out[0].result}, {out[1].tag, out[1].result}};
  CHECK(by_tag.at(12) == kBlockBytes);
  CHECK(by_tag.at(13) == -EAGAIN);
}

TEST_CASE("a submit over the queue depth fails and changes nothing", "[fault]") {
  Fixture fixture(EngineKind::kPosix, 2);
  FaultInjectingEngine* engine = fixture.engine();
  engine->add_rule(FaultRule::fail(1));
  AlignedBytes buffer = aligned_bytes(kBlockBytes, 1);
  const IoOp three[] = {write_op(0, buffer.get(), 1), write_op(1, buffer.get(), 2), write_op(2, buffer.get(), 3)};
  CHECK_FALSE(engine->submit(three).is_ok());
  CHECK(engine->in_flight() == 0);
  CHECK(engine->counters().ops_seen == 0);
  CHECK(engine->counters().faults_fired == 0);
  CHECK(fixture.run_one(write_op(0, buffer.get(), 4)) == -EIO);  // still the 1st op
}

TEST_CASE("rules and counters may be used from another thread while ops run", "[fault]") {
  Fixture fixture(EngineKind::kPosix, 8);
  FaultInjectingEngine* engine = fixture.engine();
  AlignedBytes buffer = aligned_bytes(kBlockBytes, 1);
  std::atomic<bool> done{false};
  std::thread meddler([&] {
    std::uint64_t seen = 0;
    while (!done.load()) {
      // Far beyond what the test submits: counted and checked, never fired.
      engine->add_rule(FaultRule::fail(1'000'000));
      const FaultCounters counters = engine->counters();
      CHECK(counters.ops_seen >= seen);
      seen = counters.ops_seen;
      engine->clear_rules();
      std::this_thread::yield();
    }
  });
  for (std::uint64_t i = 0; i < 200; ++i) {
    CHECK(fixture.run_one(write_op(i % 4, buffer.get(), i)) == kBlockBytes);
  }
  done.store(true);
  meddler.join();
  CHECK(engine->counters().ops_seen == 200);
  CHECK(engine->counters().faults_fired == 0);
}

}  // namespace
}  // namespace zinf::io
