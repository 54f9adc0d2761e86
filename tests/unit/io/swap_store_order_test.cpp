// SwapStore's order of service (swap_store.cpp, feed()): reads go to the drive before writes that no
// read waits for; a write that a read of its extent waits behind goes with that read; among the ops
// someone waits for, reads are served in the order they were issued; write-behind chunks (and reads
// ahead, IoPriority::kAhead) take at most a quarter of the queue depth; a read ahead someone waits
// for is needed from then on. Checked on the order in which chunks reach the engine, with
// completions held back so the store's choices are not a matter of timing.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "libengine/io/io_engine.h"
#include "libengine/io/swap_store.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"
#include "tests/unit/io/gate_engine.h"

namespace zinf::io {
namespace {

constexpr std::uint64_t kBlock = 4096;
constexpr std::size_t kExtentBytes = 16 * kBlock;  // 16 chunks each
constexpr unsigned kQueueDepth = 8;                // write-behind: at most 2 chunks in flight

using Submitted = testing::SubmittedOp;
using RecordingGate = testing::GateEngine;

// Blocks until the engine has seen `count` ops (the I/O thread has made its choices), at most 5 s.
void await_logged(const RecordingGate& gate, std::size_t count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (gate.logged() < count && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(gate.logged() >= count);
}

// A store over a RecordingGate with extents A, B, C written (completions flowing), and where each
// extent's chunks sit in the swap file.
struct Fixture {
  testing::TempDir dir;
  RecordingGate* gate = nullptr;
  std::unique_ptr<SwapStore> store;
  std::vector<std::vector<std::byte>> data;                    // A, B, C as written
  std::vector<Ticket> extents;                                 // A, B, C
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;  // [first, last] chunk offset of each

  Fixture() {
    SwapStoreOptions options;
    options.paths = {dir.path()};
    options.planned_bytes = 3 * kExtentBytes;
    options.block_bytes = kBlock;
    options.queue_depth = kQueueDepth;
    options.engine = EngineKind::kPosix;
    Result<std::unique_ptr<IoEngine>> inner = make_io_engine(EngineKind::kPosix, kQueueDepth);
    REQUIRE(inner.is_ok());
    auto recording = std::make_unique<RecordingGate>(std::move(inner).value(), true);
    gate = recording.get();
    Result<std::unique_ptr<SwapStore>> opened = SwapStore::open(std::move(options), std::move(recording));
    INFO((opened.is_ok() ? std::string() : opened.status().message()));
    REQUIRE(opened.is_ok());
    store = std::move(opened).value();
    for (int e = 0; e < 3; ++e) {
      data.emplace_back(kExtentBytes, static_cast<std::byte>(e + 1));
      gate->clear_log();
      Result<Ticket> written = store->write(data.back());
      REQUIRE(written.is_ok());
      REQUIRE(store->wait(written.value()).is_ok());
      const std::vector<Submitted> log = gate->log();
      REQUIRE(log.size() == kExtentBytes / kBlock);
      const auto [low, high] = std::minmax_element(
          log.begin(), log.end(), [](const Submitted& a, const Submitted& b) { return a.offset < b.offset; });
      extents.push_back(written.value());
      spans.emplace_back(low->offset, high->offset);
    }
    gate->clear_log();
  }
  // Which extent (0 A, 1 B, 2 C) a submitted chunk belongs to.
  int extent_of(const Submitted& s) const {
    for (int e = 0; e < 3; ++e) {
      if (s.offset >= spans[e].first && s.offset <= spans[e].second) return e;
    }
    return -1;
  }
  Ticket rewrite(int e) {
    Result<Ticket> t = store->rewrite(extents[e], data[e]);
    REQUIRE(t.is_ok());
    return t.value();
  }
  Ticket read(int e, std::vector<std::byte>& into, IoPriority priority = IoPriority::kNeeded) {
    into.assign(kExtentBytes, std::byte{0});
    Result<Ticket> t = store->read(extents[e], into, priority);
    REQUIRE(t.is_ok());
    return t.value();
  }
  // Matches the chunks of `kind` on extent e (0 A, 1 B, 2 C).
  auto on(IoOpKind kind, int e) const {
    return [this, kind, e](const Submitted& s) { return s.kind == kind && extent_of(s) == e; };
  }
  // Position in the log of the n-th (0-based) chunk that matches.
  template <typename Match>
  static std::size_t position(const std::vector<Submitted>& log, std::size_t n, Match&& match) {
    std::size_t seen = 0;
    for (std::size_t i = 0; i < log.size(); ++i) {
      if (match(log[i]) && seen++ == n) return i;
    }
    return log.size();
  }
};

TEST_CASE("swap store order: a read goes ahead of write-behind, write-behind takes a quarter of the queue") {
  Fixture f;
  f.gate->set_open(false);
  const Ticket write_a = f.rewrite(0);
  const Ticket write_b = f.rewrite(1);
  // Written behind, nobody waiting: 2 chunks (a quarter of the queue depth of 8) go to the drive.
  await_logged(*f.gate, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(f.gate->logged() == 2);
  std::vector<std::byte> c_back;
  const Ticket read_c = f.read(2, c_back);
  await_logged(*f.gate, kQueueDepth);  // the read fills the rest of the queue
  f.gate->set_open(true);
  REQUIRE(f.store->wait(read_c).is_ok());
  REQUIRE(f.store->wait(write_a).is_ok());
  REQUIRE(f.store->wait(write_b).is_ok());
  CHECK(c_back == f.data[2]);
  const std::vector<Submitted> log = f.gate->log();
  REQUIRE(log.size() == 3 * kExtentBytes / kBlock);
  const auto is_write = [](const Submitted& s) { return s.kind == IoOpKind::kWrite; };
  // Every chunk of the read before the third chunk of write-behind.
  CHECK(Fixture::position(log, 15, f.on(IoOpKind::kRead, 2)) < Fixture::position(log, 2, is_write));
  // The writes themselves oldest first: A's chunks before B's.
  CHECK(Fixture::position(log, 15, f.on(IoOpKind::kWrite, 0)) < Fixture::position(log, 0, f.on(IoOpKind::kWrite, 1)));
}

TEST_CASE("swap store order: a write that a read waits behind goes with the read, before other writes") {
  Fixture f;
  f.gate->set_open(false);
  const Ticket write_a = f.rewrite(0);
  await_logged(*f.gate, 2);
  const Ticket write_b = f.rewrite(1);
  const Ticket write_c = f.rewrite(2);
  std::vector<std::byte> b_back;
  const Ticket read_b = f.read(1, b_back);  // must see the rewrite of B, so it waits behind it
  await_logged(*f.gate, kQueueDepth);
  f.gate->set_open(true);
  for (const Ticket& t : {read_b, write_a, write_b, write_c}) REQUIRE(f.store->wait(t).is_ok());
  CHECK(b_back == f.data[1]);
  const std::vector<Submitted> log = f.gate->log();
  REQUIRE(log.size() == 4 * kExtentBytes / kBlock);
  // B's rewrite, then B's read, all before C's first chunk and A's third.
  CHECK(Fixture::position(log, 15, f.on(IoOpKind::kWrite, 1)) < Fixture::position(log, 0, f.on(IoOpKind::kRead, 1)));
  CHECK(Fixture::position(log, 15, f.on(IoOpKind::kWrite, 1)) < Fixture::position(log, 0, f.on(IoOpKind::kWrite, 2)));
  CHECK(Fixture::position(log, 15, f.on(IoOpKind::kWrite, 1)) < Fixture::position(log, 2, f.on(IoOpKind::kWrite, 0)));
}

TEST_CASE("swap store order: the ops reads wait for are served in the order the reads were issued") {
  // The optimizer writes the last layers' parameters first and the first layers' last; the next
  // forward pass reads the first layers first. Each write goes with the read behind it: B's,
  // written after A's but read before it, goes first.
  Fixture f;
  f.gate->set_open(false);
  const Ticket write_a = f.rewrite(0);
  await_logged(*f.gate, 2);
  const Ticket write_b = f.rewrite(1);
  std::vector<std::byte> a_back, b_back;
  const Ticket read_b = f.read(1, b_back);
  const Ticket read_a = f.read(0, a_back);
  await_logged(*f.gate, kQueueDepth);
  f.gate->set_open(true);
  for (const Ticket& t : {read_b, read_a, write_a, write_b}) REQUIRE(f.store->wait(t).is_ok());
  CHECK(a_back == f.data[0]);
  CHECK(b_back == f.data[1]);
  const std::vector<Submitted> log = f.gate->log();
  REQUIRE(log.size() == 4 * kExtentBytes / kBlock);
  // A's first two chunks were in flight before anyone waited; then all of B's write goes first.
  CHECK(Fixture::position(log, 15, f.on(IoOpKind::kWrite, 1)) < Fixture::position(log, 2, f.on(IoOpKind::kWrite, 0)));
  CHECK(Fixture::position(log, 15, f.on(IoOpKind::kRead, 1)) < Fixture::position(log, 0, f.on(IoOpKind::kRead, 0)));
}

TEST_CASE("swap store order: a read ahead waits with the write-behind, a needed read issued later goes first") {
  // The optimizer pipeline reads the next sub-groups' states before the forward pass; the forward
  // pass's parameter reads, issued after them, must not queue behind them.
  Fixture f;
  f.gate->set_open(false);
  std::vector<std::byte> a_back, c_back;
  const Ticket ahead_a = f.read(0, a_back, IoPriority::kAhead);
  await_logged(*f.gate, 2);  // background: a quarter of the queue depth
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(f.gate->logged() == 2);
  const Ticket read_c = f.read(2, c_back);
  await_logged(*f.gate, kQueueDepth);
  f.gate->set_open(true);
  REQUIRE(f.store->wait(read_c).is_ok());
  REQUIRE(f.store->wait(ahead_a).is_ok());
  CHECK(a_back == f.data[0]);  // the same bytes whatever the order
  CHECK(c_back == f.data[2]);
  const std::vector<Submitted> log = f.gate->log();
  REQUIRE(log.size() == 2 * kExtentBytes / kBlock);
  CHECK(Fixture::position(log, 15, f.on(IoOpKind::kRead, 2)) < Fixture::position(log, 2, f.on(IoOpKind::kRead, 0)));
}

TEST_CASE("swap store order: waiting for a read ahead makes it needed") {
  // The pipeline blocks on a sub-group's states at the end of the step: from then on the compute
  // waits for them, and they go before the background.
  Fixture f;
  f.gate->set_open(false);
  std::vector<std::byte> a_back, b_back;
  const Ticket ahead_a = f.read(0, a_back, IoPriority::kAhead);
  const Ticket ahead_b = f.read(1, b_back, IoPriority::kAhead);
  await_logged(*f.gate, 2);  // A's first two chunks; B waits with the background
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(f.gate->logged() == 2);
  Status waited_b;
  std::thread waiter([&] { waited_b = f.store->wait(ahead_b); });
  await_logged(*f.gate, kQueueDepth);  // B fills the rest of the queue
  f.gate->set_open(true);
  waiter.join();
  REQUIRE(waited_b.is_ok());
  REQUIRE(f.store->wait(ahead_a).is_ok());
  CHECK(a_back == f.data[0]);
  CHECK(b_back == f.data[1]);
  const std::vector<Submitted> log = f.gate->log();
  REQUIRE(log.size() == 2 * kExtentBytes / kBlock);
  CHECK(Fixture::position(log, 15, f.on(IoOpKind::kRead, 1)) < Fixture::position(log, 2, f.on(IoOpKind::kRead, 0)));
}

TEST_CASE("swap store order: waiting for a read ahead makes the write before it on its extent needed") {
  Fixture f;
  f.gate->set_open(false);
  const Ticket write_a = f.rewrite(0);
  await_logged(*f.gate, 2);
  const Ticket write_b = f.rewrite(1);
  std::vector<std::byte> b_back;
  const Ticket ahead_b = f.read(1, b_back, IoPriority::kAhead);  // behind B's rewrite, nobody waits yet
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(f.gate->logged() == 2);
  Status waited_b;
  std::thread waiter([&] { waited_b = f.store->wait(ahead_b); });
  await_logged(*f.gate, kQueueDepth);
  f.gate->set_open(true);
  waiter.join();
  REQUIRE(waited_b.is_ok());
  REQUIRE(f.store->wait(write_a).is_ok());
  REQUIRE(f.store->wait(write_b).is_ok());
  CHECK(b_back == f.data[1]);  // the read still sees its extent's rewrite
  const std::vector<Submitted> log = f.gate->log();
  REQUIRE(log.size() == 3 * kExtentBytes / kBlock);
  // B's rewrite (needed now) before A's third chunk, then B's read.
  CHECK(Fixture::position(log, 15, f.on(IoOpKind::kWrite, 1)) < Fixture::position(log, 2, f.on(IoOpKind::kWrite, 0)));
  CHECK(Fixture::position(log, 15, f.on(IoOpKind::kWrite, 1)) < Fixture::position(log, 0, f.on(IoOpKind::kRead, 1)));
}

}  // namespace
}  // namespace zinf::io
