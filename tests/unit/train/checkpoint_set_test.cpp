// Checkpoint sets: shards written at one world size read back at others (resharding), element for
// element against the closed form each array was filled with; the newest complete set wins over
// shards without a manifest; keep_last prunes whole sets; damaged manifests are refused by name.
#include "libengine/train/checkpoint_set.h"

#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::train {
namespace {

namespace fs = std::filesystem;
using zinf::testing::TempDir;

model::ParamTable make_table() {
  model::ParamTable table;
  for (const std::int64_t n : {std::int64_t{1}, std::int64_t{31}, std::int64_t{100}, std::int64_t{1000}}) {
    table.add(model::ParamInfo{.name = fmt::format("p{}", n), .shape = Shape({n})});
  }
  return table;
}

// Array `index` of the standard layout holds, at element e of its parameter, this value.
float expected(std::size_t index, std::int64_t element) {
  return static_cast<float>(index) * 10000.0f + static_cast<float>(element);
}

// Writes a complete set of `world` shards (or a plain file at world 1) of step `step` into `dir`.
// `piece` > 0: each parameter's master, m and v go in ranges of `piece` elements, interleaved (as
// the engine writes a parameter split over several optimizer sub-groups).
void write_set(const fs::path& dir, const model::ParamTable& table, int world, std::int64_t step, int keep_last,
               std::int64_t piece = 0) {
  CheckpointMeta meta;
  meta.step = step;
  meta.fingerprint = "fp";
  const auto count = static_cast<std::size_t>(table.size());
  for (int rank = 0; rank < world; ++rank) {
    const zero::Partition partition(table, world, rank);
    const std::vector<zero::CheckpointArrayInfo> layout = zero::partitioned_checkpoint_layout(table, partition);
    auto writer = CheckpointWriter::create(dir, meta, layout, world > 1 ? shard_file_name(step, rank, world) : "");
    REQUIRE(writer.is_ok());
    for (std::size_t id = 0; id < count; ++id) {
      const zero::ParamSlice& slice = partition[static_cast<model::ParamId>(id)];
      const std::int64_t step_size = piece > 0 ? piece : std::max<std::int64_t>(1, slice.owned);
      for (std::int64_t begin = 0; begin < std::max<std::int64_t>(1, slice.owned); begin += step_size) {
        const std::int64_t n = std::min(step_size, slice.owned - begin);
        for (std::size_t index = id; index < layout.size(); index += count) {
          std::vector<float> values(static_cast<std::size_t>(std::max<std::int64_t>(0, n)));
          for (std::int64_t i = 0; i < n; ++i)
            values[static_cast<std::size_t>(i)] = expected(index, slice.begin + begin + i);
          REQUIRE(writer.value()->write(index, static_cast<std::size_t>(begin), values).is_ok());
        }
      }
    }
    REQUIRE(writer.value()->commit(world > 1 ? 0 : keep_last).is_ok());
  }
  if (world > 1) REQUIRE(commit_checkpoint_set(dir, step, world, "fp", keep_last).is_ok());
}

// `piece` > 0: read as write_set() writes with it, in interleaved ranges.
void check_reads(const fs::path& dir, const model::ParamTable& table, int written_world, int read_world,
                 std::int64_t piece = 0) {
  auto set = latest_checkpoint_set(dir);
  REQUIRE(set.is_ok());
  REQUIRE(set.value().has_value());
  CHECK(set.value()->world_size == written_world);
  const auto count = static_cast<std::size_t>(table.size());
  for (int rank = 0; rank < read_world; ++rank) {
    const zero::Partition partition(table, read_world, rank);
    auto source = ShardedCheckpointSource::open(*set.value(), table, partition);
    REQUIRE(source.is_ok());
    CHECK(source.value()->meta().fingerprint == "fp");
    for (std::size_t id = 0; id < count; ++id) {
      const zero::ParamSlice& slice = partition[static_cast<model::ParamId>(id)];
      const std::int64_t step_size = piece > 0 ? piece : std::max<std::int64_t>(1, slice.owned);
      for (std::int64_t begin = 0; begin < std::max<std::int64_t>(1, slice.owned); begin += step_size) {
        const std::int64_t n = std::max<std::int64_t>(0, std::min(step_size, slice.owned - begin));
        for (std::size_t index = id; index < 3 * count; index += count) {
          std::vector<float> values(static_cast<std::size_t>(n), -1.0f);
          REQUIRE(source.value()->read(index, static_cast<std::size_t>(begin), values).is_ok());
          for (std::int64_t i = 0; i < n; ++i) {
            INFO("written at " << written_world << ", read at " << read_world << " rank " << rank << ", array " << index
                               << ", element " << slice.begin + begin + i);
            REQUIRE(values[static_cast<std::size_t>(i)] == expected(index, slice.begin + begin + i));
          }
        }
      }
    }
  }
}

TEST_CASE("checkpoint sets: written at 1, 2, 3 or 4 ranks, read back at every other world size") {
  const model::ParamTable table = make_table();
  for (const int written : {1, 2, 3, 4}) {
    for (const int read : {1, 2, 3, 4, 8}) {
      // Whole arrays, and arrays in interleaved ranges of 7 written and of 13 read (split parameters).
      for (const auto& [write_piece, read_piece] : {std::pair{0, 0}, std::pair{7, 13}, std::pair{0, 13}}) {
        INFO("ranges written " << write_piece << ", read " << read_piece);
        TempDir dir;
        write_set(dir.path(), table, written, 5, 2, write_piece);
        check_reads(dir.path(), table, written, read, read_piece);
      }
    }
  }
}

TEST_CASE("checkpoint sets: shards without a manifest are not a checkpoint, keep_last prunes whole sets") {
  const model::ParamTable table = make_table();
  TempDir dir;
  write_set(dir.path(), table, 2, 1, 2);
  write_set(dir.path(), table, 2, 2, 2);
  // A set whose manifest was never written (a rank died before the commit): step 3's shards only.
  {
    CheckpointMeta meta;
    meta.step = 3;
    const zero::Partition partition(table, 2, 0);
    auto writer = CheckpointWriter::create(dir.path(), meta, zero::partitioned_checkpoint_layout(table, partition),
                                           shard_file_name(3, 0, 2));
    REQUIRE(writer.is_ok());
    std::vector<float> values;
    for (std::size_t index = 0; index < 3 * static_cast<std::size_t>(table.size()); ++index) {
      values.assign(static_cast<std::size_t>(partition[static_cast<model::ParamId>(index % 4)].owned), 0.0f);
      REQUIRE(writer.value()->write(index, values).is_ok());
    }
    REQUIRE(writer.value()->commit(0).is_ok());
  }
  auto latest = latest_checkpoint_set(dir.path());
  REQUIRE(latest.is_ok());
  REQUIRE(latest.value().has_value());
  CHECK(latest.value()->step == 2);

  // Step 4 completes: step 1 goes (keep_last 2), and so does step 3's orphan shard.
  write_set(dir.path(), table, 2, 4, 2);
  CHECK_FALSE(fs::exists(checkpoint_manifest_path(dir.path(), 1)));
  CHECK_FALSE(fs::exists(fs::path(dir.path()) / shard_file_name(1, 0, 2)));
  CHECK_FALSE(fs::exists(fs::path(dir.path()) / shard_file_name(1, 1, 2)));
  CHECK_FALSE(fs::exists(fs::path(dir.path()) / shard_file_name(3, 0, 2)));
  CHECK(fs::exists(checkpoint_manifest_path(dir.path(), 2)));
  CHECK(fs::exists(fs::path(dir.path()) / shard_file_name(2, 1, 2)));
  latest = latest_checkpoint_set(dir.path());
  REQUIRE(latest.is_ok());
  CHECK(latest.value()->step == 4);
  CHECK(latest.value()->shards.size() == 2);
}

TEST_CASE("checkpoint sets: a damaged manifest or a missing shard is an error naming the manifest") {
  const model::ParamTable table = make_table();
  TempDir dir;
  write_set(dir.path(), table, 2, 7, 0);
  SECTION("missing shard") {
    fs::remove(fs::path(dir.path()) / shard_file_name(7, 1, 2));
    auto latest = latest_checkpoint_set(dir.path());
    REQUIRE_FALSE(latest.is_ok());
    CHECK(latest.status().message().find("step-00000007.manifest.json") != std::string::npos);
    CHECK(latest.status().message().find("missing") != std::string::npos);
  }
  SECTION("garbage manifest") {
    std::ofstream(checkpoint_manifest_path(dir.path(), 7)) << "{\"format\": \"zinf.checkpoint-set/1\", \"step\": 7}";
    auto latest = latest_checkpoint_set(dir.path());
    REQUIRE_FALSE(latest.is_ok());
    CHECK(latest.status().message().find("manifest") != std::string::npos);
  }
}

}  // namespace
}  // namespace zinf::train
