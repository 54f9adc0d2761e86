// zinf's own mixed read+write probe (probes/mixed_io_probe.h): its layout against closed forms, and
// a run on a temporary directory whose byte counts are checked against the layout and the store's
// own counters. No timing is asserted.
#include <cstdint>
#include <memory>

#include "libengine/io/swap_store.h"
#include "probes/mixed_io_probe.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::probes {
namespace {

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = 1024 * kKiB;

MixedIoConfig config_of(std::uint64_t size, std::uint64_t tensor, unsigned read_percent) {
  MixedIoConfig config;
  config.size_bytes = size;
  config.tensor_bytes = tensor;
  config.read_percent = read_percent;
  config.repeat = 2;
  return config;
}

TEST_CASE("mixed I/O probe: whole tensors at the byte share, a queue depth of blocks in flight each way") {
  // bench train's probe: 1 GiB of 64 MiB tensors at 46% read, the engine's 1 MiB blocks at qd 64.
  // 16 tensors, round(16 x 0.46) = round(7.36) = 7 read; 64 MiB in flight is one tensor, plus one.
  const Result<MixedIoLayout> bench = plan_mixed_io(config_of(1024 * kMiB, 64 * kMiB, 46), kMiB, 64);
  REQUIRE(bench.is_ok());
  CHECK(bench->read_tensors == 7);
  CHECK(bench->write_tensors == 9);
  CHECK(bench->read_bytes() == 7 * 64 * kMiB);
  CHECK(bench->write_bytes() == 9 * 64 * kMiB);
  CHECK(bench->window == 2);
  // 16 MiB tensors: 64 of them, round(29.44) = 29 read; ceil(64 MiB / 16 MiB) + 1 = 5 in flight.
  const Result<MixedIoLayout> small = plan_mixed_io(config_of(1024 * kMiB, 16 * kMiB, 46), kMiB, 64);
  REQUIRE(small.is_ok());
  CHECK(small->read_tensors == 29);
  CHECK(small->write_tensors == 35);
  CHECK(small->window == 5);
  // Extremes keep one tensor each way; the window never exceeds the larger direction.
  const Result<MixedIoLayout> edge = plan_mixed_io(config_of(3 * kMiB, kMiB, 99), kMiB, 64);
  REQUIRE(edge.is_ok());
  CHECK(edge->read_tensors == 2);  // round(2.97) = 3, kept below 3 so one tensor is written
  CHECK(edge->write_tensors == 1);
  CHECK(edge->window == 2);
}

TEST_CASE("mixed I/O probe: a share outside 1..99, one tensor or nothing to repeat is refused") {
  const Result<MixedIoLayout> all_read = plan_mixed_io(config_of(4 * kMiB, kMiB, 100), kMiB, 4);
  REQUIRE_FALSE(all_read.is_ok());
  CHECK(all_read.status().message().find("read_percent 100") != std::string::npos);
  CHECK_FALSE(plan_mixed_io(config_of(4 * kMiB, kMiB, 0), kMiB, 4).is_ok());
  const Result<MixedIoLayout> one = plan_mixed_io(config_of(kMiB, kMiB, 50), kMiB, 4);
  REQUIRE_FALSE(one.is_ok());
  CHECK(one.status().message().find("holds 1 tensors") != std::string::npos);
  MixedIoConfig none = config_of(4 * kMiB, kMiB, 50);
  none.repeat = 0;
  CHECK_FALSE(plan_mixed_io(none, kMiB, 4).is_ok());
  CHECK_FALSE(plan_mixed_io(config_of(4 * kMiB, 8, 50), kMiB, 4).is_ok());  // smaller than a stamp
}

TEST_CASE("mixed I/O probe: a run reads and rewrites the layout's bytes and leaves no extent behind") {
  testing::TempDir dir;
  io::SwapStoreOptions options;
  options.paths = {dir.path()};
  options.planned_bytes = 4 * kMiB;
  options.block_bytes = 256 * kKiB;
  options.queue_depth = 4;
  options.largest_transfer_bytes = 512 * kKiB;
  Result<std::unique_ptr<io::SwapStore>> store = io::SwapStore::open(options);
  REQUIRE(store.is_ok());
  // 8 tensors of 512 KiB at 25%: 2 read, 6 rewritten; 1 MiB in flight is 2 tensors, plus one.
  const MixedIoConfig config = config_of(4 * kMiB, 512 * kKiB, 25);
  const Result<MixedIoResult> result = run_mixed_io(**store, config);
  INFO(result.status().message());
  REQUIRE(result.is_ok());
  CHECK(result->layout.read_tensors == 2);
  CHECK(result->layout.write_tensors == 6);
  CHECK(result->layout.window == 3);
  REQUIRE(result->samples.size() == 2);
  for (const MixedIoSample& sample : result->samples) {
    CHECK(sample.read_bytes == kMiB);
    CHECK(sample.write_bytes == 3 * kMiB);
    CHECK(sample.seconds > 0);
    CHECK(sample.gbps == Approx(4.0 * static_cast<double>(kMiB) / sample.seconds / 1e9));
  }
  const io::SwapStoreStats stats = (*store)->stats();
  CHECK(stats.bytes_read == 2 * kMiB);                    // two passes of the read set
  CHECK(stats.bytes_written == 4 * kMiB + 2 * 3 * kMiB);  // every extent once, then two passes of the rest
  CHECK(stats.extents_live == 0);
  CHECK(stats.failed_tickets == 0);
}

}  // namespace
}  // namespace zinf::probes
