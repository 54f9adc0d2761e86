// SwapStore::register_memory and registered staging: chunks that lie inside a declared region name
// its registered buffer (io_uring fixed buffers, so the kernel pins no pages per transfer), chunks
// outside it name none, staged chunks keep the staging buffers' indices; a refused registration —
// at open or later — leaves every transfer working unregistered, with the bytes intact. Over the
// io_uring engine where it is available (the posix engine ignores registration), else the posix
// one, with the ops the store hands the engine recorded.
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "libengine/io/io_engine.h"
#include "libengine/io/swap_store.h"
#include "libengine/memory/aligned_buffer.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"
#include "tests/unit/io/gate_engine.h"

namespace zinf::io {
namespace {

constexpr std::uint64_t kBlock = 4096;
constexpr std::size_t kChunks = 8;
constexpr std::size_t kBytes = kChunks * kBlock;

struct Store {
  testing::TempDir dir;
  testing::GateEngine* gate = nullptr;
  std::unique_ptr<SwapStore> store;
  std::vector<std::string> warnings;

  explicit Store(bool refuse_at_open) {
    const EngineKind kind = make_io_engine(EngineKind::kUring, 8).is_ok() ? EngineKind::kUring : EngineKind::kPosix;
    SwapStoreOptions options;
    options.paths = {dir.path()};
    options.planned_bytes = 4 * kBytes;
    options.block_bytes = kBlock;
    options.queue_depth = 8;
    options.on_warning = [this](const std::string& line) { warnings.push_back(line); };
    Result<std::unique_ptr<IoEngine>> inner = make_io_engine(kind, 8);
    REQUIRE(inner.is_ok());
    auto recording = std::make_unique<testing::GateEngine>(std::move(inner).value(), true);
    gate = recording.get();
    if (refuse_at_open) gate->limit_registration(0);
    Result<std::unique_ptr<SwapStore>> opened = SwapStore::open(std::move(options), std::move(recording));
    INFO((opened.is_ok() ? std::string() : opened.status().message()));
    REQUIRE(opened.is_ok());
    store = std::move(opened).value();
    gate->limit_registration(~std::size_t{0});
  }

  // Writes `data` to a new extent and reads it back into `into`; returns the ops of both.
  std::vector<testing::SubmittedOp> round_trip(std::span<const std::byte> data, std::span<std::byte> into) {
    gate->clear_log();
    Result<Ticket> written = store->write(data);
    REQUIRE(written.is_ok());
    REQUIRE(store->wait(written.value()).is_ok());
    Result<Ticket> read = store->read(written.value(), into);
    REQUIRE(read.is_ok());
    REQUIRE(store->wait(read.value()).is_ok());
    REQUIRE(std::memcmp(data.data(), into.data(), data.size()) == 0);
    return gate->log();
  }
};

memory::AlignedBuffer aligned(std::size_t bytes, unsigned char seed) {
  Result<memory::AlignedBuffer> buffer = memory::AlignedBuffer::allocate(bytes, kBlock);
  REQUIRE(buffer.is_ok());
  auto* p = reinterpret_cast<unsigned char*>(buffer.value().data());
  for (std::size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(seed + i * 7);
  return std::move(buffer).value();
}

std::span<std::byte> bytes_of(memory::AlignedBuffer& buffer, std::size_t offset, std::size_t size) {
  return {buffer.data() + offset, size};
}

TEST_CASE("swap store: chunks inside a registered region name its buffer, others none") {
  Store s(false);
  const int staging = static_cast<int>(s.store->stats().staging_buffers);
  memory::AlignedBuffer region = aligned(2 * kBytes, 1);
  memory::AlignedBuffer outside = aligned(2 * kBytes, 2);
  REQUIRE(s.store->register_memory(bytes_of(region, 0, region.size())).is_ok());
  // Both halves of the region: its source and its destination.
  for (const testing::SubmittedOp& op : s.round_trip(bytes_of(region, 0, kBytes), bytes_of(region, kBytes, kBytes))) {
    CHECK(op.buffer_index == staging);
  }
  for (const testing::SubmittedOp& op : s.round_trip(bytes_of(outside, 0, kBytes), bytes_of(outside, kBytes, kBytes))) {
    CHECK(op.buffer_index == -1);
  }
  // A region overlapping a registered one is refused, and the first stays registered.
  const Status overlap = s.store->register_memory(bytes_of(region, kBytes, kBytes));
  CHECK(overlap.code() == ErrorCode::kInvalidArgument);
  memory::AlignedBuffer second = aligned(kBytes, 3);
  REQUIRE(s.store->register_memory(bytes_of(second, 0, kBytes)).is_ok());
  for (const testing::SubmittedOp& op : s.round_trip(bytes_of(second, 0, kBytes), bytes_of(region, 0, kBytes))) {
    CHECK(op.buffer_index == (op.kind == IoOpKind::kWrite ? staging + 1 : staging));
  }
  // An unaligned source bounces through staging: a staging buffer's index.
  for (const testing::SubmittedOp& op :
       s.round_trip(bytes_of(region, 1, kBytes - kBlock), bytes_of(outside, 1, kBytes - kBlock))) {
    CHECK(op.buffer_index >= 0);
    CHECK(op.buffer_index < staging);
  }
  CHECK(s.warnings.empty());
}

TEST_CASE("swap store: a refused registration leaves transfers working unregistered") {
  SECTION("register_memory refused: the staging buffers stay registered") {
    Store s(false);
    const int staging = static_cast<int>(s.store->stats().staging_buffers);
    memory::AlignedBuffer region = aligned(2 * kBytes, 4);
    s.gate->limit_registration(static_cast<std::size_t>(staging));  // room for the staging buffers only
    const Status refused = s.store->register_memory(bytes_of(region, 0, region.size()));
    CHECK(refused.code() == ErrorCode::kIoError);
    CHECK_THAT(refused.message(), Catch::Contains("registering 64.0 KiB of host buffers"));
    for (const testing::SubmittedOp& op : s.round_trip(bytes_of(region, 0, kBytes), bytes_of(region, kBytes, kBytes))) {
      CHECK(op.buffer_index == -1);
    }
    for (const testing::SubmittedOp& op :
         s.round_trip(bytes_of(region, 3, kBytes - kBlock), bytes_of(region, kBytes + 5, kBytes - kBlock))) {
      CHECK(op.buffer_index >= 0);
      CHECK(op.buffer_index < staging);
    }
  }
  SECTION("refused at open: one warning, staged transfers name no buffer") {
    Store s(true);
    REQUIRE(s.warnings.size() == 1);
    CHECK_THAT(s.warnings[0], Catch::Contains("swap: registering staging buffers"));
    memory::AlignedBuffer region = aligned(2 * kBytes, 5);
    for (const testing::SubmittedOp& op :
         s.round_trip(bytes_of(region, 3, kBytes - kBlock), bytes_of(region, kBytes + 5, kBytes - kBlock))) {
      CHECK(op.buffer_index == -1);
    }
    // A region registered afterwards takes index 0 and is used.
    REQUIRE(s.store->register_memory(bytes_of(region, 0, region.size())).is_ok());
    for (const testing::SubmittedOp& op : s.round_trip(bytes_of(region, 0, kBytes), bytes_of(region, kBytes, kBytes))) {
      CHECK(op.buffer_index == 0);
    }
  }
}

}  // namespace
}  // namespace zinf::io
