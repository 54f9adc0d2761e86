// Checkpoint sets: the checkpoint of a run whose partitioned states are spread over several ranks.
// Each rank writes its own file with the elements it owns (zero::partitioned_checkpoint_layout),
// `<dir>/step-<step>.rank-<r>-of-<world>.zckpt`, in the single-file format of checkpoint.h; once
// every rank has committed its file, rank 0 writes `<dir>/step-<step>.manifest.json` — last and
// atomically — so a set is complete exactly when its manifest exists. A run at one rank (or with
// replicated states) writes a plain `step-<step>.zckpt`, which reads as a set of one.
//
// Resharding: ShardedCheckpointSource serves the arrays of any rank at any world size from a set
// written at another one — each array assembled from the old shards that hold its elements.
//
// What it is not: the barrier between the ranks' commits and the manifest (the trainer's), or a
// check of the run configuration (the fingerprint is the caller's to compare).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "libengine/core/status.h"
#include "libengine/model/param_table.h"
#include "libengine/train/checkpoint.h"
#include "libengine/zero/model_states.h"
#include "libengine/zero/partition.h"

namespace zinf::train {

// A complete checkpoint: its step, the world size it was written at and its files, by rank.
struct CheckpointSet {
  std::int64_t step = 0;
  int world_size = 1;
  std::vector<std::filesystem::path> shards;
  std::filesystem::path manifest;  // empty for a plain single-file checkpoint
};

// `step-<step>.rank-<rank>-of-<world>.zckpt` (a file name in the checkpoint directory).
std::string shard_file_name(std::int64_t step, int rank, int world_size);
// `<dir>/step-<step>.manifest.json`.
std::filesystem::path checkpoint_manifest_path(const std::filesystem::path& dir, std::int64_t step);

// Rank 0, after every rank committed its shard: writes the set's manifest durably and removes all
// but the newest `keep_last` checkpoints (sets and plain files; 0 keeps every one) and the shards
// of older sets that never got a manifest. IoError naming the path.
Status commit_checkpoint_set(const std::filesystem::path& dir, std::int64_t step, int world_size,
                             const std::string& fingerprint, int keep_last);

// The newest complete checkpoint in `dir` — a set with its manifest, or a plain file — or nullopt.
// A manifest that does not parse or names missing shards is an error naming it.
Result<std::optional<CheckpointSet>> latest_checkpoint_set(const std::filesystem::path& dir);

// Every checkpoint in `dir` that claims to be complete (a plain file or a manifest), newest first;
// `set` is the error naming the manifest where it does not parse or names missing shards.
struct CheckpointCandidate {
  std::filesystem::path path;  // the plain file or the manifest
  Result<CheckpointSet> set;
};
Result<std::vector<CheckpointCandidate>> checkpoint_candidates(const std::filesystem::path& dir);

// Reads the arrays of one rank of `partition` (its layout: zero::partitioned_checkpoint_layout) from
// `set`, whatever world size the set was written at. Each array is read whole from every old shard
// that holds part of it and its CRC verified; an old shard file is opened when first needed.
class ShardedCheckpointSource final : public zero::CheckpointSource {
 public:
  // Opens the set's rank-0 file (its meta is the run's); fails as CheckpointReader::open does.
  // `table` and `partition` must outlive the source.
  static Result<std::unique_ptr<ShardedCheckpointSource>> open(const CheckpointSet& set, const model::ParamTable& table,
                                                               const zero::Partition& partition);
  const CheckpointMeta& meta() const { return meta_; }
  // Ranges back to back from element 0 (zero::CheckpointSource). A slice that is an old rank's
  // comes range by range from its shard; a resharded one is assembled whole at its first range and
  // kept until its last (in host memory: the arrays being read in ranges, of this rank's slice).
  Status read(std::size_t index, std::size_t offset, std::span<float> into) override;
  using zero::CheckpointSource::read;

 private:
  ShardedCheckpointSource(const CheckpointSet& set, const model::ParamTable& table, const zero::Partition& partition)
      : set_(set), table_(table), partition_(partition) {}
  Result<CheckpointReader*> shard(int rank);

  CheckpointSet set_;
  const model::ParamTable& table_;
  const zero::Partition& partition_;
  std::vector<zero::Partition> old_partitions_;  // by old rank
  std::vector<std::unique_ptr<CheckpointReader>> readers_;
  CheckpointMeta meta_;
  std::vector<float> buffer_;                            // one old slice
  std::map<std::size_t, std::vector<float>> assembled_;  // resharded arrays read in ranges, by index
};

}  // namespace zinf::train
