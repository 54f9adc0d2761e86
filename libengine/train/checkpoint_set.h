// Checkpoint sets: the checkpoint of a run whose partitioned states are spread over several ranks.
// Each rank writes its own file with the elements it owns (zero::partitioned_checkpoint_layout),
// `<dir>/step-<step>.rank-<r>-of-<world>.zckpt`, in the single-file format of checkpoint.h; once
// every rank has committed its file, rank 0 writes `<dir>/step-<step>.manifest.json` — last and
// atomically — so a set is complete exactly when its manifest exists. A run at one rank (or with
// replicated states) writes a plain `step-<step>.zckpt`, which reads as a set of one.
//
// Validation: the manifest (format zinf.checkpoint-set/2) records the set's step, world size, run
// fingerprint, a random set id the ranks agreed on before writing, and per shard its file name,
// size and the CRC-32C of its JSON header. Every shard's header records the step, the fingerprint
// and {set id, rank, world size}, and every array's CRC-32C: so the manifest chains to every byte.
// A shard that disagrees with its manifest in any of these (damaged, truncated, copied from another
// run, left over from another save under a renamed step) makes the whole set invalid. A plain file
// must record the step its name says. Manifests of format /1 (no sizes, CRCs or set id) cannot be
// validated and are refused by name.
//
// Resharding: ShardedCheckpointSource serves the arrays of any rank at any world size from a set
// written at another one — each array assembled from the old shards that hold its elements.
//
// What it is not: the ranks' agreement on which set to load and the barrier between the ranks'
// commits and the manifest (the trainer's), or the comparison of the manifest's fingerprint with
// the scenario's (the caller's: a whole set of another configuration is not damage).
#pragma once

#include <array>
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

// What a manifest records about one shard.
struct ShardRecord {
  std::uint64_t file_bytes = 0;
  std::uint32_t header_crc = 0;  // CRC-32C of the shard's JSON header
};

// A complete checkpoint: its step, the world size it was written at and its files, by rank.
struct CheckpointSet {
  std::int64_t step = 0;
  int world_size = 1;
  std::vector<std::filesystem::path> shards;
  std::filesystem::path manifest;  // empty for a plain single-file checkpoint
  // From the manifest (empty for a plain file): the run fingerprint, the set id, where the states
  // lived (the engine's description; informative) and each shard's record, by rank.
  std::string fingerprint;
  std::string set_id;
  std::string placement;
  std::vector<ShardRecord> records;
};

// `step-<step>.rank-<rank>-of-<world>.zckpt` (a file name in the checkpoint directory).
std::string shard_file_name(std::int64_t step, int rank, int world_size);
// `<dir>/step-<step>.manifest.json`.
std::filesystem::path checkpoint_manifest_path(const std::filesystem::path& dir, std::int64_t step);

// A fresh random set id (16 hex digits), for rank 0 to hand to every rank before they write.
std::string new_set_id();
// The set id as two exact doubles (32 bits each) and back, for Communicator::all_reduce_host.
std::array<double, 2> set_id_to_doubles(const std::string& set_id);
std::string set_id_from_doubles(double high, double low);

// Rank 0, after every rank committed its shard: writes the manifest of `set` (step, world_size,
// fingerprint, set_id, placement and one record per rank; paths are ignored) durably and removes
// all but the newest `keep_last` checkpoints (sets and plain files; 0 keeps every one) and the
// shards of older sets that never got a manifest. IoError naming the path.
Status commit_checkpoint_set(const std::filesystem::path& dir, const CheckpointSet& set, int keep_last);

// Checks the header of the set's shard `rank`, opened as `reader`, against the manifest: step,
// fingerprint, set id, rank, world size, file size and header CRC (for a plain file: the step its
// name says). InvalidArgument naming the file and what disagrees.
Status check_shard(const CheckpointSet& set, int rank, const CheckpointReader& reader);

// Every problem of `set`, one line each naming the file: each shard opened as written and checked
// with check_shard(), and with `read_data` every array read and its CRC-32C verified. Empty: valid.
std::vector<std::string> verify_checkpoint_set(const CheckpointSet& set, bool read_data);

// The newest complete checkpoint in `dir` — a set with its manifest, or a plain file — or nullopt.
// A manifest that does not parse or names missing shards is an error naming it.
Result<std::optional<CheckpointSet>> latest_checkpoint_set(const std::filesystem::path& dir);

// Every checkpoint in `dir` that claims to be complete (a plain file or a manifest), newest first;
// `set` is the error naming the manifest where it does not parse or names missing shards.
struct CheckpointCandidate {
  std::int64_t step = 0;       // from the file name
  std::filesystem::path path;  // the plain file or the manifest
  Result<CheckpointSet> set;
};
Result<std::vector<CheckpointCandidate>> checkpoint_candidates(const std::filesystem::path& dir);

// Reads the arrays of one rank of `partition` (its layout: zero::partitioned_checkpoint_layout) from
// `set`, whatever world size the set was written at. Each array is read whole from every old shard
// that holds part of it and its CRC verified; an old shard file is opened when first needed.
class ShardedCheckpointSource final : public zero::CheckpointSource {
 public:
  // Opens every shard of the set and checks each against the layout (CheckpointReader::open) and
  // against the manifest (check_shard): a set is loaded whole or not at all. The rank-0 shard's meta
  // is the run's. `table` and `partition` must outlive the source.
  static Result<std::unique_ptr<ShardedCheckpointSource>> open(const CheckpointSet& set, const model::ParamTable& table,
                                                               const zero::Partition& partition);
  const CheckpointMeta& meta() const { return meta_; }
  // Reads every byte of the old shards this rank's slices come from and verifies their CRCs
  // (CheckpointReader::verify_data), before any state is touched: loading the states runs
  // collectives (publishing parameters), so a rank must not find damage half-way through a load
  // its peers complete. The first failure, naming the file.
  Status verify_needed_data();
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
