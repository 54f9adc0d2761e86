// IoQueue against a scripted engine: each op's raw answer is chosen by the test (short, EAGAIN,
// errno, EOF), and the engine really performs the part it reports, so the queue's resubmission and
// retry logic is checked byte for byte against a file.
#include "libengine/io/io_queue.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::io {
namespace {

// Performs ops synchronously in submit() with pread/pwrite, after `script` has had its say: it may
// return a raw result to report instead (-errno without doing anything, or a byte count to perform
// only that many bytes). Results are handed out by reap().
class ScriptedEngine final : public IoEngine {
 public:
  using Script = std::function<std::optional<std::int64_t>(const IoOp& op, std::uint64_t op_number)>;

  ScriptedEngine(unsigned depth, Script script) : depth_(depth), script_(std::move(script)) {}

  std::string_view name() const override { return "scripted"; }
  unsigned queue_depth() const override { return depth_; }
  Status register_files(std::span<const int> fds) override {
    fds_.assign(fds.begin(), fds.end());
    return Status::ok();
  }
  Status register_buffers(std::span<const iovec>) override { return Status::ok(); }
  Status submit(std::span<const IoOp> ops) override {
    REQUIRE(in_flight() + ops.size() <= depth_);
    for (const IoOp& op : ops) {
      ++submitted_;
      max_in_flight_ = std::max<std::size_t>(max_in_flight_, results_.size() + 1);
      std::optional<std::int64_t> scripted = script_ ? script_(op, submitted_) : std::nullopt;
      std::int64_t result = 0;
      if (scripted && *scripted < 0) {
        result = *scripted;
      } else {
        const std::size_t length = scripted ? static_cast<std::size_t>(*scripted) : op.length;
        const int fd = fds_.at(static_cast<std::size_t>(op.file_index));
        const ssize_t n = op.kind == IoOpKind::kRead ? ::pread(fd, op.buffer, length, static_cast<off_t>(op.offset))
                                                     : ::pwrite(fd, op.buffer, length, static_cast<off_t>(op.offset));
        result = n < 0 ? -errno : n;
      }
      results_.push_back(IoResult{op.tag, result});
    }
    return Status::ok();
  }
  Result<std::size_t> reap(std::size_t, std::chrono::milliseconds, std::vector<IoResult>& out) override {
    const std::size_t n = results_.size();
    out.insert(out.end(), results_.begin(), results_.end());
    results_.clear();
    return n;
  }
  unsigned in_flight() const override { return static_cast<unsigned>(results_.size()); }
  void wake() override {}

  std::uint64_t submitted() const { return submitted_; }
  std::size_t max_in_flight() const { return max_in_flight_; }

 private:
  unsigned depth_;
  Script script_;
  std::vector<int> fds_;
  std::deque<IoResult> results_;
  std::uint64_t submitted_ = 0;
  std::size_t max_in_flight_ = 0;
};

struct ScratchFile {
  testing::TempDir dir;
  int fd = -1;
  ScratchFile() {
    fd = ::open((dir.path() + "/data").c_str(), O_RDWR | O_CREAT, 0600);
    REQUIRE(fd >= 0);
  }
  ~ScratchFile() { ::close(fd); }
};

std::vector<std::byte> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> bytes(n);
  for (std::byte& b : bytes) b = static_cast<std::byte>(rng() & 0xFF);
  return bytes;
}

// Pumps until every pushed transfer is done; fails the test on an engine error or no progress.
std::vector<IoDone> drain(IoQueue& queue) {
  std::vector<IoDone> done;
  for (int rounds = 0; queue.pending() > 0; ++rounds) {
    REQUIRE(rounds < 100000);
    const Status s = queue.pump(std::chrono::milliseconds(50), done);
    REQUIRE(s.is_ok());
  }
  return done;
}

}  // namespace

TEST_CASE("IoQueue moves whole transfers and keeps no more than the queue depth in flight", "[io_queue]") {
  ScratchFile file;
  ScriptedEngine engine(4, nullptr);
  const int fds[] = {file.fd};
  REQUIRE(engine.register_files(fds).is_ok());
  IoQueue queue(engine, {"swap file in test"});
  std::vector<std::byte> data = random_bytes(64 * 1000, 1);
  for (std::uint64_t i = 0; i < 64; ++i) {
    queue.push(IoTransfer{IoOpKind::kWrite, 0, i * 1000, data.data() + i * 1000, 1000, -1, i});
  }
  CHECK(queue.pending() == 64);
  std::vector<IoDone> done = drain(queue);
  REQUIRE(done.size() == 64);
  for (const IoDone& d : done) CHECK(d.status.is_ok());
  CHECK(engine.max_in_flight() <= 4);
  CHECK(queue.counters().ops_submitted == 64);

  std::vector<std::byte> back(data.size());
  for (std::uint64_t i = 0; i < 64; ++i) {
    queue.push(IoTransfer{IoOpKind::kRead, 0, i * 1000, back.data() + i * 1000, 1000, -1, 100 + i});
  }
  done = drain(queue);
  REQUIRE(done.size() == 64);
  CHECK(back == data);
}

TEST_CASE("IoQueue resubmits the remainder of short transfers until every byte has moved", "[io_queue]") {
  ScratchFile file;
  // Every op moves at most 300 bytes: a 10,000-byte transfer needs 34 ops.
  ScriptedEngine engine(8, [](const IoOp& op, std::uint64_t) -> std::optional<std::int64_t> {
    return std::min<std::int64_t>(op.length, 300);
  });
  const int fds[] = {file.fd};
  REQUIRE(engine.register_files(fds).is_ok());
  IoQueue queue(engine, {"swap file in test"});
  std::vector<std::byte> data = random_bytes(10000, 2);
  queue.push(IoTransfer{IoOpKind::kWrite, 0, 4096, data.data(), data.size(), -1, 7});
  std::vector<IoDone> done = drain(queue);
  REQUIRE(done.size() == 1);
  CHECK(done[0].tag == 7);
  CHECK(done[0].status.is_ok());
  CHECK(queue.counters().short_resubmits == 33);

  std::vector<std::byte> back(data.size());
  queue.push(IoTransfer{IoOpKind::kRead, 0, 4096, back.data(), back.size(), -1, 8});
  done = drain(queue);
  REQUIRE(done.size() == 1);
  CHECK(done[0].status.is_ok());
  CHECK(back == data);
}

TEST_CASE("IoQueue retries EAGAIN and EINTR, and gives up with a clear error when they never stop", "[io_queue]") {
  ScratchFile file;
  std::vector<std::byte> data = random_bytes(4096, 3);

  SECTION("a few EAGAINs, then success") {
    ScriptedEngine engine(2, [](const IoOp&, std::uint64_t n) -> std::optional<std::int64_t> {
      if (n <= 3) return -EAGAIN;
      if (n == 4) return -EINTR;
      return std::nullopt;
    });
    const int fds[] = {file.fd};
    REQUIRE(engine.register_files(fds).is_ok());
    IoQueue queue(engine, {"swap file in test"});
    queue.push(IoTransfer{IoOpKind::kWrite, 0, 0, data.data(), data.size(), -1, 1});
    std::vector<IoDone> done = drain(queue);
    REQUIRE(done.size() == 1);
    CHECK(done[0].status.is_ok());
    CHECK(queue.counters().eagain_retries == 4);
    std::vector<std::byte> back(data.size());
    REQUIRE(::pread(file.fd, back.data(), back.size(), 0) == static_cast<ssize_t>(back.size()));
    CHECK(back == data);
  }
  SECTION("EAGAIN forever") {
    ScriptedEngine engine(2, [](const IoOp&, std::uint64_t) -> std::optional<std::int64_t> { return -EAGAIN; });
    const int fds[] = {file.fd};
    REQUIRE(engine.register_files(fds).is_ok());
    IoQueue queue(engine, {"swap file in /mnt/nvme0"}, /*max_retries=*/5);
    queue.push(IoTransfer{IoOpKind::kWrite, 0, 8192, data.data(), data.size(), -1, 1});
    std::vector<IoDone> done = drain(queue);
    REQUIRE(done.size() == 1);
    REQUIRE_FALSE(done[0].status.is_ok());
    const std::string& m = done[0].status.message();
    CHECK(m.find("write of 4.00 KiB at offset 8192 in swap file in /mnt/nvme0") != std::string::npos);
    CHECK(m.find("EAGAIN") != std::string::npos);
    CHECK(m.find("after 5 retries") != std::string::npos);
    CHECK(queue.counters().transfers_failed == 1);
  }
}

TEST_CASE("IoQueue turns errno results into Status naming the operation, offset, file and errno", "[io_queue]") {
  ScratchFile file;
  std::vector<std::byte> data = random_bytes(3 * 4096, 4);
  // The second op fails with ENOSPC; the other two succeed.
  ScriptedEngine engine(4, [](const IoOp&, std::uint64_t n) -> std::optional<std::int64_t> {
    if (n == 2) return -ENOSPC;
    return std::nullopt;
  });
  const int fds[] = {file.fd};
  REQUIRE(engine.register_files(fds).is_ok());
  IoQueue queue(engine, {"swap file in /mnt/nvme1"});
  for (std::uint64_t i = 0; i < 3; ++i) {
    queue.push(IoTransfer{IoOpKind::kWrite, 0, i * 4096, data.data() + i * 4096, 4096, -1, i});
  }
  std::vector<IoDone> done = drain(queue);
  REQUIRE(done.size() == 3);
  int failures = 0;
  for (const IoDone& d : done) {
    if (d.status.is_ok()) continue;
    ++failures;
    CHECK(d.tag == 1);
    CHECK(d.status.code() == ErrorCode::kIoError);
    CHECK(d.status.message() ==
          "write of 4.00 KiB at offset 4096 in swap file in /mnt/nvme1: No space left on device (ENOSPC)");
  }
  CHECK(failures == 1);
}

TEST_CASE("IoQueue reports a read past end of file instead of spinning on it", "[io_queue]") {
  ScratchFile file;
  std::vector<std::byte> data = random_bytes(1000, 5);
  REQUIRE(::pwrite(file.fd, data.data(), data.size(), 0) == 1000);
  ScriptedEngine engine(2, nullptr);
  const int fds[] = {file.fd};
  REQUIRE(engine.register_files(fds).is_ok());
  IoQueue queue(engine, {"swap file in test"});
  std::vector<std::byte> back(4096);
  queue.push(IoTransfer{IoOpKind::kRead, 0, 0, back.data(), back.size(), -1, 9});
  std::vector<IoDone> done = drain(queue);
  REQUIRE(done.size() == 1);
  REQUIRE_FALSE(done[0].status.is_ok());
  CHECK(done[0].status.message().find("unexpected end of file (1000 of 4096 bytes done)") != std::string::npos);
  CHECK(std::equal(data.begin(), data.end(), back.begin()));
}

}  // namespace zinf::io
