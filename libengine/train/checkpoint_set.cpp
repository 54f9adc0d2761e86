#include "libengine/train/checkpoint_set.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <random>
#include <system_error>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "libengine/core/check.h"
#include "libengine/spec/json_input.h"

namespace zinf::train {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kManifestFormat = "zinf.checkpoint-set/2";
constexpr std::string_view kOldManifestFormat = "zinf.checkpoint-set/1";
constexpr std::string_view kManifestSuffix = ".manifest.json";
constexpr std::string_view kPlainSuffix = ".zckpt";

// The digits of "step-<digits><rest>" and what follows them; nullopt when the name is not a step's.
std::optional<std::pair<std::int64_t, std::string_view>> split_step(std::string_view name) {
  constexpr std::string_view kPrefix = "step-";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  std::size_t end = kPrefix.size();
  std::int64_t step = 0;
  while (end < name.size() && name[end] >= '0' && name[end] <= '9' && end - kPrefix.size() < 18) {
    step = step * 10 + (name[end] - '0');
    ++end;
  }
  if (end == kPrefix.size()) return std::nullopt;
  return std::pair{step, name.substr(end)};
}

Status remove_file(const fs::path& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Status::io_error(
        fmt::format("delete old checkpoint {}: {} ({})", path.string(), std::strerror(errno), errno));
  }
  return Status::ok();
}

// What a directory holds, by step: plain files, manifests, and shard files.
struct Listing {
  std::map<std::int64_t, fs::path> plain;
  std::map<std::int64_t, fs::path> manifests;
  std::map<std::int64_t, std::vector<fs::path>> shards;
};

Result<Listing> list_checkpoints(const fs::path& dir) {
  Listing listing;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return listing;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const auto split = split_step(name);
    if (!split) continue;
    const auto& [step, rest] = *split;
    if (rest == kPlainSuffix) {
      listing.plain[step] = it->path();
    } else if (rest == kManifestSuffix) {
      listing.manifests[step] = it->path();
    } else if (rest.starts_with(".rank-") && rest.ends_with(kPlainSuffix)) {
      listing.shards[step].push_back(it->path());
    }
  }
  if (ec) return Status::io_error(fmt::format("list checkpoint directory {}: {}", dir.string(), ec.message()));
  return listing;
}

Result<CheckpointSet> read_manifest(const fs::path& path) {
  ZINF_ASSIGN_OR_RETURN(const nlohmann::json manifest, spec::read_json_file(path.string()));
  CheckpointSet set;
  set.manifest = path;
  const auto bad = [&](std::string_view why) {
    return Status::invalid_argument(fmt::format("checkpoint manifest {}: {}", path.string(), why));
  };
  const std::string format = manifest.is_object() && manifest.contains("format") && manifest["format"].is_string()
                                 ? manifest["format"].get<std::string>()
                                 : std::string();
  if (format == kOldManifestFormat) {
    return bad(fmt::format(
        "format {} records no shard sizes, header CRCs or set id, so its shards cannot be validated; this build "
        "reads {}: resume with the zinf that wrote it, or start the run over (--no-resume)",
        kOldManifestFormat, kManifestFormat));
  }
  if (format != kManifestFormat) return bad(fmt::format("not a {} manifest", kManifestFormat));
  const std::optional<std::int64_t> step = spec::exact_int64(manifest.value("step", nlohmann::json()));
  const std::optional<std::int64_t> world = spec::exact_int64(manifest.value("world_size", nlohmann::json()));
  if (!step || *step < 0) return bad("step is missing or not a non-negative integer");
  if (!world || *world < 1 || *world > (1 << 20)) return bad("world_size is missing or not a positive integer");
  const auto text = [&](const char* key) -> std::optional<std::string> {
    const auto it = manifest.find(key);
    if (it == manifest.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
  };
  const std::optional<std::string> fingerprint = text("fingerprint");
  const std::optional<std::string> set_id = text("set_id");
  if (!fingerprint || fingerprint->empty()) return bad("fingerprint is missing or not a non-empty string");
  if (!set_id || set_id->empty()) return bad("set_id is missing or not a non-empty string");
  set.fingerprint = *fingerprint;
  set.set_id = *set_id;
  set.placement = text("placement").value_or("");
  const nlohmann::json shards = manifest.value("shards", nlohmann::json());
  if (!shards.is_array() || shards.size() != static_cast<std::size_t>(*world)) {
    return bad(fmt::format("shards must list {} files, one per rank", *world));
  }
  set.step = *step;
  set.world_size = static_cast<int>(*world);
  if (split_step(path.filename().string())->first != set.step) {
    return bad(fmt::format("records step {}, but its name says step {}", set.step,
                           split_step(path.filename().string())->first));
  }
  for (int rank = 0; rank < set.world_size; ++rank) {
    const nlohmann::json& entry = shards[static_cast<std::size_t>(rank)];
    const std::string expected = shard_file_name(set.step, rank, set.world_size);
    if (!entry.is_object() || entry.value("file", nlohmann::json()) != expected) {
      return bad(fmt::format("shard {} is not {{\"file\": \"{}\", \"bytes\", \"header_crc32c\"}}", rank, expected));
    }
    const std::optional<std::uint64_t> bytes = spec::exact_uint64(entry.value("bytes", nlohmann::json()));
    const std::optional<std::uint64_t> crc = spec::exact_uint64(entry.value("header_crc32c", nlohmann::json()));
    if (!bytes || !crc || *crc > 0xffffffffu) {
      return bad(fmt::format("shard {} has no valid bytes or header_crc32c", rank));
    }
    const fs::path shard = path.parent_path() / expected;
    std::error_code ec;
    if (!fs::is_regular_file(shard, ec)) return bad(fmt::format("shard file {} is missing", shard.string()));
    set.shards.push_back(shard);
    set.records.push_back({*bytes, static_cast<std::uint32_t>(*crc)});
  }
  return set;
}

}  // namespace

fs::path checkpoint_manifest_path(const fs::path& dir, std::int64_t step) {
  return dir / fmt::format("step-{:08d}{}", step, kManifestSuffix);
}

std::string shard_file_name(std::int64_t step, int rank, int world_size) {
  return fmt::format("step-{:08d}.rank-{:05d}-of-{:05d}{}", step, rank, world_size, kPlainSuffix);
}

std::string new_set_id() {
  std::random_device entropy;
  const std::uint64_t id = (std::uint64_t{entropy()} << 32) | entropy();
  return fmt::format("{:016x}", id);
}

std::array<double, 2> set_id_to_doubles(const std::string& set_id) {
  const std::uint64_t id = std::stoull(set_id, nullptr, 16);
  return {static_cast<double>(id >> 32), static_cast<double>(id & 0xffffffffu)};
}

std::string set_id_from_doubles(double high, double low) {
  return fmt::format("{:016x}", (static_cast<std::uint64_t>(high) << 32) | static_cast<std::uint64_t>(low));
}

Status commit_checkpoint_set(const fs::path& dir, const CheckpointSet& set, int keep_last) {
  ZINF_CHECK(set.records.size() == static_cast<std::size_t>(set.world_size),
             "commit_checkpoint_set: one shard record per rank");
  const std::int64_t step = set.step;
  nlohmann::json shards = nlohmann::json::array();
  for (int rank = 0; rank < set.world_size; ++rank) {
    const ShardRecord& record = set.records[static_cast<std::size_t>(rank)];
    shards.push_back({{"file", shard_file_name(step, rank, set.world_size)},
                      {"bytes", record.file_bytes},
                      {"header_crc32c", record.header_crc}});
  }
  const nlohmann::json manifest = {{"format", kManifestFormat},    {"step", step},
                                   {"world_size", set.world_size}, {"fingerprint", set.fingerprint},
                                   {"set_id", set.set_id},         {"placement", set.placement},
                                   {"shards", std::move(shards)}};
  ZINF_RETURN_IF_ERROR(write_file_durably(checkpoint_manifest_path(dir, step), manifest.dump(2) + "\n"));

  ZINF_ASSIGN_OR_RETURN(const Listing listing, list_checkpoints(dir));
  // Every complete checkpoint, newest last; all but the newest keep_last go, each with its shards.
  std::vector<std::int64_t> complete;
  for (const auto& [s, path] : listing.plain) complete.push_back(s);
  for (const auto& [s, path] : listing.manifests) complete.push_back(s);
  std::sort(complete.begin(), complete.end());
  complete.erase(std::unique(complete.begin(), complete.end()), complete.end());
  std::vector<std::int64_t> removed;
  if (keep_last > 0 && complete.size() > static_cast<std::size_t>(keep_last)) {
    removed.assign(complete.begin(), complete.end() - keep_last);
  }
  for (std::int64_t s : removed) {
    // The manifest first: a set without one is incomplete, never half-deleted but still listed.
    if (auto it = listing.manifests.find(s); it != listing.manifests.end())
      ZINF_RETURN_IF_ERROR(remove_file(it->second));
    if (auto it = listing.plain.find(s); it != listing.plain.end()) ZINF_RETURN_IF_ERROR(remove_file(it->second));
  }
  for (const auto& [s, files] : listing.shards) {
    const bool orphan = s < step && !listing.manifests.contains(s);
    if (orphan || std::find(removed.begin(), removed.end(), s) != removed.end()) {
      for (const fs::path& file : files) ZINF_RETURN_IF_ERROR(remove_file(file));
    }
  }
  return Status::ok();
}

Result<std::vector<CheckpointCandidate>> checkpoint_candidates(const fs::path& dir) {
  ZINF_ASSIGN_OR_RETURN(const Listing listing, list_checkpoints(dir));
  std::vector<std::pair<std::int64_t, CheckpointCandidate>> found;
  for (const auto& [step, path] : listing.plain) {
    CheckpointSet set;
    set.step = step;
    set.shards.push_back(path);
    found.push_back({step, CheckpointCandidate{step, path, std::move(set)}});
  }
  for (const auto& [step, path] : listing.manifests)
    found.push_back({step, CheckpointCandidate{step, path, read_manifest(path)}});
  // Newest first; at one step a set before a plain file (a plain file is what one rank writes).
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<CheckpointCandidate> out;
  for (auto& [step, candidate] : found) out.push_back(std::move(candidate));
  return out;
}

Result<std::optional<CheckpointSet>> latest_checkpoint_set(const fs::path& dir) {
  ZINF_ASSIGN_OR_RETURN(std::vector<CheckpointCandidate> candidates, checkpoint_candidates(dir));
  if (candidates.empty()) return std::optional<CheckpointSet>();
  ZINF_ASSIGN_OR_RETURN(CheckpointSet set, std::move(candidates.front().set));
  return std::optional<CheckpointSet>(std::move(set));
}

Result<std::unique_ptr<ShardedCheckpointSource>> ShardedCheckpointSource::open(const CheckpointSet& set,
                                                                               const model::ParamTable& table,
                                                                               const zero::Partition& partition) {
  std::unique_ptr<ShardedCheckpointSource> source(new ShardedCheckpointSource(set, table, partition));
  for (int rank = 0; rank < set.world_size; ++rank) source->old_partitions_.emplace_back(table, set.world_size, rank);
  source->readers_.resize(static_cast<std::size_t>(set.world_size));
  // Every shard's header now, whether or not this rank reads from it: the set loads whole or not.
  for (int rank = 0; rank < set.world_size; ++rank) {
    ZINF_ASSIGN_OR_RETURN(CheckpointReader * reader, source->shard(rank));
    ZINF_RETURN_IF_ERROR(check_shard(set, rank, *reader));
  }
  source->meta_ = source->readers_.front()->meta();
  return source;
}

Status ShardedCheckpointSource::verify_needed_data() {
  for (int rank = 0; rank < set_.world_size; ++rank) {
    const zero::Partition& old = old_partitions_[static_cast<std::size_t>(rank)];
    bool needed = false;
    for (model::ParamId id = 0; id < table_.size() && !needed; ++id) {
      const std::int64_t from = std::max(partition_[id].begin, old[id].begin);
      const std::int64_t to = std::min(partition_[id].begin + partition_[id].owned, old[id].begin + old[id].owned);
      needed = from < to;
    }
    if (needed) ZINF_RETURN_IF_ERROR(readers_[static_cast<std::size_t>(rank)]->verify_data());
  }
  return Status::ok();
}

Status check_shard(const CheckpointSet& set, int rank, const CheckpointReader& reader) {
  const CheckpointMeta& meta = reader.meta();
  const std::string file = reader.path().string();
  const auto bad = [&](std::string why) {
    return Status::invalid_argument(fmt::format("checkpoint {}: {}", file, why));
  };
  if (meta.step != set.step) {
    return bad(fmt::format("its header records step {}, but it stands for step {} (a stale or renamed file)", meta.step,
                           set.step));
  }
  if (set.manifest.empty()) {
    if (meta.shard) return bad("is one rank's shard of a set, not a plain checkpoint");
    return Status::ok();
  }
  const std::string manifest = set.manifest.filename().string();
  if (meta.fingerprint != set.fingerprint) {
    return bad(fmt::format("its header records run fingerprint {}, but {} records {} (a file of another run)",
                           meta.fingerprint, manifest, set.fingerprint));
  }
  const ShardIdentity expected{set.set_id, rank, set.world_size};
  if (!meta.shard || *meta.shard != expected) {
    return bad(meta.shard ? fmt::format("its header names rank {} of {} of set {}, but {} expects rank {} of {} of set "
                                        "{} (a file of another save)",
                                        meta.shard->rank, meta.shard->world_size, meta.shard->set_id, manifest, rank,
                                        set.world_size, set.set_id)
                          : fmt::format("its header names no set, but {} expects set {}", manifest, set.set_id));
  }
  const ShardRecord& record = set.records[static_cast<std::size_t>(rank)];
  if (reader.file_bytes() != record.file_bytes) {
    return bad(fmt::format("{} bytes, but {} records {}", reader.file_bytes(), manifest, record.file_bytes));
  }
  if (reader.header_crc() != record.header_crc) {
    return bad(fmt::format("its header's CRC-32C is 0x{:08x}, but {} records 0x{:08x}", reader.header_crc(), manifest,
                           record.header_crc));
  }
  return Status::ok();
}

std::vector<std::string> verify_checkpoint_set(const CheckpointSet& set, bool read_data) {
  std::vector<std::string> problems;
  for (int rank = 0; rank < static_cast<int>(set.shards.size()); ++rank) {
    Result<std::unique_ptr<CheckpointReader>> reader =
        CheckpointReader::open_as_written(set.shards[static_cast<std::size_t>(rank)]);
    Status status = reader.status();
    if (status.is_ok()) status = check_shard(set, rank, *reader.value());
    if (status.is_ok() && read_data) status = reader.value()->verify_data();
    if (!status.is_ok()) problems.push_back(status.message());
  }
  return problems;
}

Result<CheckpointReader*> ShardedCheckpointSource::shard(int rank) {
  std::unique_ptr<CheckpointReader>& reader = readers_[static_cast<std::size_t>(rank)];
  if (!reader) {
    ZINF_ASSIGN_OR_RETURN(reader, CheckpointReader::open(set_.shards[static_cast<std::size_t>(rank)],
                                                         zero::partitioned_checkpoint_layout(
                                                             table_, old_partitions_[static_cast<std::size_t>(rank)])));
  }
  return reader.get();
}

Status ShardedCheckpointSource::read(std::size_t index, std::size_t offset, std::span<float> into) {
  // Layout: master, m, v, each over the parameters in table order.
  const auto count = static_cast<std::size_t>(table_.size());
  const auto id = static_cast<model::ParamId>(index % count);
  const zero::ParamSlice& mine = partition_[id];
  ZINF_CHECK(offset + into.size() <= static_cast<std::size_t>(mine.owned),
             "ShardedCheckpointSource::read: range past the slice");
  const std::int64_t begin = mine.begin;
  const std::int64_t end = mine.begin + mine.owned;
  // The same slice as an old rank's: its ranges straight from that shard.
  for (int rank = 0; rank < set_.world_size; ++rank) {
    const zero::ParamSlice& old = old_partitions_[static_cast<std::size_t>(rank)][id];
    if (old.begin != begin || old.owned != mine.owned || mine.owned == 0) continue;
    ZINF_ASSIGN_OR_RETURN(CheckpointReader * reader, shard(rank));
    return reader->read(index, offset, into);
  }
  // Resharded: the slice is assembled from every old slice it overlaps (each read whole, its CRC
  // verified) when its first range is asked for; later ranges come from the assembled copy.
  const bool whole = offset == 0 && into.size() == static_cast<std::size_t>(mine.owned);
  if (offset == 0) {
    std::vector<float>* assembled = nullptr;
    if (!whole) {
      assembled = &assembled_[index];
      assembled->resize(static_cast<std::size_t>(mine.owned));
    }
    const std::span<float> target = whole ? into : std::span<float>(*assembled);
    for (int rank = 0; rank < set_.world_size && begin < end; ++rank) {
      const zero::ParamSlice& old = old_partitions_[static_cast<std::size_t>(rank)][id];
      const std::int64_t from = std::max(begin, old.begin);
      const std::int64_t to = std::min(end, old.begin + old.owned);
      if (from >= to) continue;
      ZINF_ASSIGN_OR_RETURN(CheckpointReader * reader, shard(rank));
      buffer_.resize(static_cast<std::size_t>(old.owned));
      ZINF_RETURN_IF_ERROR(reader->read(index, buffer_));
      std::copy(buffer_.begin() + (from - old.begin), buffer_.begin() + (to - old.begin),
                target.begin() + (from - begin));
    }
    if (whole) return Status::ok();
  }
  const auto found = assembled_.find(index);
  if (found == assembled_.end()) {
    return Status::invalid_argument(fmt::format("checkpoint {}: array {} read from element {} before element 0",
                                                set_.shards.front().string(), index, offset));
  }
  std::copy_n(found->second.begin() + static_cast<std::ptrdiff_t>(offset), into.size(), into.begin());
  if (offset + into.size() == found->second.size()) assembled_.erase(found);  // its last range
  return Status::ok();
}

}  // namespace zinf::train
