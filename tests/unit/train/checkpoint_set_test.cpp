// Checkpoint sets: shards written at one world size read back at others (resharding), element for
// element against the closed form each array was filled with; the newest complete set wins over
// shards without a manifest; keep_last prunes whole sets; damaged manifests are refused by name.
#include "libengine/train/checkpoint_set.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/catch.h"
#include "tests/temp_dir.h"
#include "tests/unit/train/flip_byte.h"

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
// `fingerprint` and `offset` (added to every value) tell the sets of two runs apart.
void write_set(const fs::path& dir, const model::ParamTable& table, int world, std::int64_t step, int keep_last,
               std::int64_t piece = 0, const std::string& fingerprint = "fp", float offset = 0.0f) {
  CheckpointMeta meta;
  meta.step = step;
  meta.fingerprint = fingerprint;
  CheckpointSet set;
  set.step = step;
  set.world_size = world;
  set.fingerprint = fingerprint;
  set.set_id = new_set_id();
  set.placement = "test placement";
  const auto count = static_cast<std::size_t>(table.size());
  for (int rank = 0; rank < world; ++rank) {
    if (world > 1) meta.shard = ShardIdentity{set.set_id, rank, world};
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
            values[static_cast<std::size_t>(i)] = expected(index, slice.begin + begin + i) + offset;
          REQUIRE(writer.value()->write(index, static_cast<std::size_t>(begin), values).is_ok());
        }
      }
    }
    REQUIRE(writer.value()->commit(world > 1 ? 0 : keep_last).is_ok());
    set.records.push_back({writer.value()->file_bytes(), writer.value()->header_crc()});
  }
  if (world > 1) REQUIRE(commit_checkpoint_set(dir, set, keep_last).is_ok());
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

// Opens the newest set as rank `rank` of `world` would and reads every array of that rank: the
// first error, or ok.
Status load_newest(const fs::path& dir, const model::ParamTable& table, int world, int rank) {
  ZINF_ASSIGN_OR_RETURN(const std::optional<CheckpointSet> set, latest_checkpoint_set(dir));
  if (!set) return Status::not_found("no checkpoint");
  const zero::Partition partition(table, world, rank);
  ZINF_ASSIGN_OR_RETURN(std::unique_ptr<ShardedCheckpointSource> source,
                        ShardedCheckpointSource::open(*set, table, partition));
  const auto count = static_cast<std::size_t>(table.size());
  for (std::size_t index = 0; index < 3 * count; ++index) {
    std::vector<float> values(static_cast<std::size_t>(partition[static_cast<model::ParamId>(index % count)].owned));
    ZINF_RETURN_IF_ERROR(source->read(index, 0, values));
  }
  return Status::ok();
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Issue 24: only shard 0's header was checked, and never against the manifest; every shard of a
// set must now agree with it, or the whole set is refused naming the file, at every rank.
TEST_CASE("checkpoint sets: a damaged, foreign or stale shard makes the whole set invalid, naming the file") {
  const model::ParamTable table = make_table();
  TempDir dir;
  const fs::path root(dir.path());
  write_set(root, table, 2, 80, 0);
  write_set(root, table, 2, 100, 0);
  const fs::path shard1 = root / shard_file_name(100, 1, 2);
  const auto check_refused = [&](std::string_view why) {
    for (int world : {1, 2, 3}) {
      for (int rank = 0; rank < world; ++rank) {
        INFO("read at rank " << rank << " of " << world);
        const Status loaded = load_newest(root, table, world, rank);
        REQUIRE_FALSE(loaded.is_ok());
        CHECK(loaded.message().find(shard1.filename().string()) != std::string::npos);
        CHECK(loaded.message().find(why) != std::string::npos);
      }
    }
    auto set = latest_checkpoint_set(root);
    REQUIRE(set.is_ok());
    const std::vector<std::string> problems = verify_checkpoint_set(*set.value(), true);
    REQUIRE(problems.size() == 1);
    CHECK(problems.front().find(shard1.filename().string()) != std::string::npos);
  };
  REQUIRE(load_newest(root, table, 2, 0).is_ok());
  REQUIRE(verify_checkpoint_set(*latest_checkpoint_set(root).value(), true).empty());
  SECTION("truncated") {
    fs::resize_file(shard1, fs::file_size(shard1) - 100);
    check_refused("truncated");
  }
  SECTION("a flipped byte in the data: the array's CRC, at every rank that reads it") {
    testing::flip_last_array_byte(shard1);
    // The headers still agree with the manifest: found when the array is read.
    const Status loaded = load_newest(root, table, 2, 1);
    REQUIRE_FALSE(loaded.is_ok());
    CHECK(loaded.message().find("CRC-32C") != std::string::npos);
    CHECK(loaded.message().find(shard1.filename().string()) != std::string::npos);
    CHECK(verify_checkpoint_set(*latest_checkpoint_set(root).value(), false).empty());  // headers only
    const std::vector<std::string> problems = verify_checkpoint_set(*latest_checkpoint_set(root).value(), true);
    REQUIRE(problems.size() == 1);
    CHECK(problems.front().find("CRC-32C") != std::string::npos);
  }
  SECTION("a shard of another run (another fingerprint) at the same step") {
    TempDir other;
    write_set(other.path(), table, 2, 100, 0, 0, "another-seed", 0.5f);
    fs::copy_file(fs::path(other.path()) / shard_file_name(100, 1, 2), shard1, fs::copy_options::overwrite_existing);
    check_refused("another run");
  }
  SECTION("a shard of another save of the same run (another set id)") {
    TempDir other;
    write_set(other.path(), table, 2, 100, 0);
    fs::copy_file(fs::path(other.path()) / shard_file_name(100, 1, 2), shard1, fs::copy_options::overwrite_existing);
    check_refused("another save");
  }
  SECTION("the step-80 shard renamed to step 100") {
    fs::copy_file(root / shard_file_name(80, 1, 2), shard1, fs::copy_options::overwrite_existing);
    check_refused("step 80");
  }
  SECTION("the manifest's fingerprint zeroed: no shard agrees with it") {
    const fs::path manifest = checkpoint_manifest_path(root, 100);
    std::string text = read_text(manifest);
    text.replace(text.find("\"fp\""), 4, "\"00\"");
    std::ofstream(manifest) << text;
    auto set = latest_checkpoint_set(root);
    REQUIRE(set.is_ok());
    CHECK(set.value()->fingerprint == "00");
    const Status loaded = load_newest(root, table, 2, 1);
    REQUIRE_FALSE(loaded.is_ok());
    CHECK(loaded.message().find("another run") != std::string::npos);
  }
  SECTION("the manifest's record of a header CRC changed") {
    const fs::path manifest = checkpoint_manifest_path(root, 100);
    nlohmann::json json = nlohmann::json::parse(read_text(manifest));
    json["shards"][1]["header_crc32c"] = json["shards"][1]["header_crc32c"].get<std::uint32_t>() ^ 1u;
    std::ofstream(manifest) << json.dump();
    check_refused("CRC-32C");
  }
}

TEST_CASE("checkpoint sets: a plain file whose header records another step than its name is refused") {
  const model::ParamTable table = make_table();
  TempDir dir;
  const fs::path root(dir.path());
  write_set(root, table, 1, 80, 0);
  fs::copy_file(checkpoint_path(root, 80), checkpoint_path(root, 100));
  const Status loaded = load_newest(root, table, 1, 0);
  REQUIRE_FALSE(loaded.is_ok());
  CHECK(loaded.message().find("step-00000100.zckpt") != std::string::npos);
  CHECK(loaded.message().find("step 80") != std::string::npos);
}

TEST_CASE("checkpoint sets: verify reads every byte, the padding no CRC covers included") {
  const model::ParamTable table = make_table();
  TempDir dir;
  const fs::path root(dir.path());
  write_set(root, table, 1, 5, 0);
  // The last array (adam_v/p1000, 4000 bytes) ends 32 bytes before the 64-byte aligned end of the file.
  {
    std::fstream file(checkpoint_path(root, 5), std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-8, std::ios::end);
    file.put('\x01');
  }
  CHECK(load_newest(root, table, 1, 0).is_ok());  // no state changed
  const std::vector<std::string> problems = verify_checkpoint_set(*latest_checkpoint_set(root).value(), true);
  REQUIRE(problems.size() == 1);
  CHECK(problems.front().find("padding") != std::string::npos);
  CHECK(problems.front().find("step-00000005.zckpt") != std::string::npos);
}

TEST_CASE("checkpoint sets: a manifest of the old format is refused by name, saying why") {
  const model::ParamTable table = make_table();
  TempDir dir;
  write_set(dir.path(), table, 2, 7, 0);
  std::ofstream(checkpoint_manifest_path(dir.path(), 7))
      << R"({"format": "zinf.checkpoint-set/1", "step": 7, "world_size": 2, "fingerprint": "fp",
            "shards": ["step-00000007.rank-00000-of-00002.zckpt", "step-00000007.rank-00001-of-00002.zckpt"]})";
  auto latest = latest_checkpoint_set(dir.path());
  REQUIRE_FALSE(latest.is_ok());
  CHECK(latest.status().message().find("step-00000007.manifest.json") != std::string::npos);
  CHECK(latest.status().message().find("cannot be validated") != std::string::npos);
}

TEST_CASE("checkpoint sets: the set id round-trips through the doubles the ranks exchange") {
  for (int i = 0; i < 100; ++i) {
    const std::string id = new_set_id();
    REQUIRE(id.size() == 16);
    const std::array<double, 2> parts = set_id_to_doubles(id);
    CHECK(set_id_from_doubles(parts[0], parts[1]) == id);
  }
  CHECK(set_id_from_doubles(4294967295.0, 4294967295.0) == "ffffffffffffffff");
}

}  // namespace
}  // namespace zinf::train
