// NvmeStateStore::wait_writes: waits for an extent's rewrites and what was issued before them,
// never for the reads issued after the last write, and reports a failed write like wait().
#include "libengine/zero/nvme_state_store.h"

#include <cstring>
#include <filesystem>
#include <numeric>
#include <vector>

#include "libengine/io/fault_injecting_engine.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::zero {
namespace {

constexpr std::size_t kBytes = 1 << 20;

std::unique_ptr<io::FaultInjectingEngine> fault_engine() {
  Result<std::unique_ptr<io::IoEngine>> inner = io::make_io_engine(io::EngineKind::kUring, 64);
  if (!inner.is_ok()) inner = io::make_io_engine(io::EngineKind::kPosix, 64);
  REQUIRE(inner.is_ok());
  return std::make_unique<io::FaultInjectingEngine>(std::move(inner).value());
}

std::unique_ptr<NvmeStateStore> open_store(const std::string& path, std::unique_ptr<io::IoEngine> engine = nullptr) {
  NvmeStateStoreOptions options;
  options.paths = {path};
  options.planned_bytes = 4 * kBytes;
  options.largest_transfer_bytes = kBytes;
  options.engine = std::move(engine);
  options.on_warning = [](const std::string&) {};
  Result<std::unique_ptr<NvmeStateStore>> store = NvmeStateStore::open(std::move(options));
  REQUIRE(store.is_ok());
  return std::move(store).value();
}

std::vector<std::byte> pattern(unsigned char seed) {
  std::vector<std::byte> out(kBytes);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>((i * 7 + seed) & 0xff);
  return out;
}

TEST_CASE("NVMe state store: wait_writes leaves the reads issued after the last write to wait()") {
  const testing::TempDir dir;
  std::unique_ptr<NvmeStateStore> store = open_store(dir.path());
  const std::vector<std::byte> first = pattern(1), second = pattern(2);
  Result<NvmeStateStore::ExtentId> id = store->create("params of w", first);
  REQUIRE(id.is_ok());
  // Nothing pending: nothing to wait for.
  CHECK(store->wait_writes(*id).is_ok());
  // A read alone: not waited for, still pending, and wait() delivers it.
  std::vector<std::byte> read_back(kBytes);
  REQUIRE(store->start_read(*id, read_back).is_ok());
  CHECK(store->wait_writes(*id).is_ok());
  REQUIRE(store->wait(*id).is_ok());
  CHECK(std::memcmp(read_back.data(), first.data(), kBytes) == 0);
  // A rewrite, then a read: after wait_writes the new bytes are on disk, and the read issued after
  // the write (still pending or done) sees them.
  REQUIRE(store->start_write(*id, second).is_ok());
  std::vector<std::byte> after(kBytes);
  REQUIRE(store->start_read(*id, after).is_ok());
  REQUIRE(store->wait_writes(*id).is_ok());
  REQUIRE(store->wait(*id).is_ok());
  CHECK(std::memcmp(after.data(), second.data(), kBytes) == 0);
  CHECK(store->done(*id));
}

TEST_CASE("NVMe state store: wait_writes reports a failed rewrite with the extent's name") {
  const testing::TempDir dir;
  std::unique_ptr<io::FaultInjectingEngine> engine = fault_engine();
  io::FaultInjectingEngine* faults = engine.get();
  std::unique_ptr<NvmeStateStore> store = open_store(dir.path(), std::move(engine));
  const std::vector<std::byte> data = pattern(3);
  Result<NvmeStateStore::ExtentId> id = store->create("optimizer states of sub-group 0", data);
  REQUIRE(id.is_ok());
  faults->add_rule(io::FaultRule::fail(faults->counters().writes_seen + 1, EIO).counting_only(io::IoOpKind::kWrite));
  REQUIRE(store->start_write(*id, data).is_ok());
  const Status status = store->wait_writes(*id);
  REQUIRE_FALSE(status.is_ok());
  INFO(status.message());
  CHECK(status.message().find("optimizer states of sub-group 0") != std::string::npos);
  // The failure was reported once: nothing is left to wait for.
  CHECK(store->wait(*id).is_ok());
}

}  // namespace
}  // namespace zinf::zero
