// Checkpoints: atomic save and verified resume of a training run's fp32 model states (master params,
// Adam moments — whatever NamedArrays the state owner lists) plus a small JSON description of the
// rest (step, run fingerprint, and trainer state such as the loss scaler, the optimizer step count
// and the data cursor).
//
// One file per checkpoint, `<dir>/step-<step, 8+ digits>.zckpt`, little-endian:
//   bytes 0-7    magic "ZINFCKPT"
//   bytes 8-11   format version (uint32, currently 1)
//   bytes 12-15  CRC-32C of the JSON header (uint32)
//   bytes 16-23  JSON header length in bytes (uint64)
//   JSON header  {"step", "fingerprint", "extra", "file_bytes",
//                 "arrays": [{"name", "numel", "offset" (bytes from the data section), "crc32c"}],
//                 "set": {"id", "rank", "world_size"} (only in one rank's shard of a set)}
//   data section starts at the next multiple of 64 bytes; each array is raw fp32, 64-byte aligned.
// A save writes `<name>.tmp`, fsyncs it, renames it over `<name>` and fsyncs the directory, so a
// crash or a full disk leaves either the new checkpoint complete or no trace of it — never a torn
// file under the final name, and never a damaged earlier checkpoint.
//
// Streaming: CheckpointWriter and CheckpointReader move one array at a time (zero::CheckpointSink
// and CheckpointSource), so a state owner whose states live on NVMe never holds all of them in
// host memory. The header is written last, padded with JSON whitespace to the length reserved for
// the widest CRCs, so the data offsets are fixed before the first array is written. The span-based
// save_checkpoint/load_checkpoint below are the same format for arrays already in memory.
//
// What it is not: a comparison of run configurations (load returns the fingerprint; whether it
// matches is the caller's decision), a sharded multi-rank format, or thread-safe against two
// writers on one directory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/core/status.h"
#include "libengine/tensor/named_array.h"
#include "libengine/zero/model_states.h"

namespace zinf::train {

inline constexpr std::uint32_t kCheckpointFormatVersion = 1;

// Which set a shard belongs to (checkpoint_set.h): the set's random id, written into every shard
// of the set and into its manifest, so a shard of another save (a stale or copied file) is told
// apart from the set's own even when its step and fingerprint match.
struct ShardIdentity {
  std::string set_id;
  int rank = 0;
  int world_size = 1;
  bool operator==(const ShardIdentity&) const = default;
};

struct CheckpointMeta {
  std::int64_t step = 0;                            // the number of optimizer steps the saved states have taken
  std::string fingerprint;                          // identifies the run configuration the states belong to
  nlohmann::json extra = nlohmann::json::object();  // the trainer's own state, free-form
  std::optional<ShardIdentity> shard;               // set in the shards of a set, absent in a plain file
};

// One checkpoint being written: `<dir>/step-<meta.step>.zckpt.tmp` until commit(). Not thread-safe.
class CheckpointWriter final : public zero::CheckpointSink {
 public:
  // Creates `dir` when missing and the .tmp file for `layout` (unique, non-empty names).
  // `file_name`: the final name in `dir` (one rank's shard, checkpoint_set.h); empty: the step's
  // checkpoint_path(). InvalidArgument for a negative step or a bad name; IoError naming the path
  // otherwise.
  static Result<std::unique_ptr<CheckpointWriter>> create(const std::filesystem::path& dir, const CheckpointMeta& meta,
                                                          std::vector<zero::CheckpointArrayInfo> layout,
                                                          const std::string& file_name = {});
  // Without a successful commit() the .tmp file is removed: nothing of this save remains.
  ~CheckpointWriter() override;
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Writes elements [offset, offset + values.size()) of array `index` at their place in the file
  // (zero::CheckpointSink: each array once, in ranges back to back; arrays in any order).
  Status write(std::size_t index, std::size_t offset, std::span<const float> values) override;
  using zero::CheckpointSink::write;
  // Every array written: writes the header, fsyncs, renames over the final name, fsyncs the
  // directory and prunes as save_checkpoint() does. Returns the final path. On failure before the
  // rename the .tmp file is removed (by the destructor) and earlier checkpoints are untouched.
  Result<std::filesystem::path> commit(int keep_last);
  // After a successful commit(): the file's size and the CRC-32C of its JSON header (which holds
  // every array's CRC), what a set's manifest records per shard.
  std::uint64_t file_bytes() const { return file_bytes_; }
  std::uint32_t header_crc() const { return header_crc_; }

 private:
  CheckpointWriter() = default;
  std::string header_text(std::span<const std::uint32_t> crcs, std::uint64_t file_bytes) const;

  std::filesystem::path dir_;
  std::filesystem::path final_path_;
  std::filesystem::path tmp_path_;
  CheckpointMeta meta_;
  std::vector<zero::CheckpointArrayInfo> layout_;
  std::vector<std::uint64_t> offsets_;  // bytes from the data section, per array
  std::vector<std::uint32_t> crcs_;
  std::vector<std::uint64_t> written_;  // elements of each array written so far
  std::uint64_t header_bytes_ = 0;      // reserved JSON header length
  std::uint64_t data_start_ = 0;
  std::uint64_t file_bytes_ = 0;
  std::uint32_t header_crc_ = 0;
  int fd_ = -1;
  bool committed_ = false;
};

// One checkpoint opened for reading: the header is read and checked against `layout` at open().
class CheckpointReader final : public zero::CheckpointSource {
 public:
  // Every check of load_checkpoint() except the arrays' CRCs, which read() verifies.
  static Result<std::unique_ptr<CheckpointReader>> open(const std::filesystem::path& path,
                                                        std::vector<zero::CheckpointArrayInfo> layout);
  // The same checks against the layout the file's own header records (arrays in name order): for
  // tools that verify a checkpoint without the model (`zinf checkpoint verify`).
  static Result<std::unique_ptr<CheckpointReader>> open_as_written(const std::filesystem::path& path);
  ~CheckpointReader() override;
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const CheckpointMeta& meta() const { return meta_; }
  const std::filesystem::path& path() const { return path_; }
  const std::vector<zero::CheckpointArrayInfo>& layout() const { return layout_; }
  // The file's size (equal to what its header records) and its header's CRC-32C (verified at open).
  std::uint64_t file_bytes() const { return file_bytes_; }
  std::uint32_t header_crc() const { return header_crc_; }
  // Reads every byte after the header: every array of the layout whole, in pieces, verifying
  // each CRC-32C, and the alignment padding, which must be zeros. The first failure, naming the file.
  Status verify_data();
  // Reads elements [offset, offset + into.size()) of array `index` of the layout (ranges back to
  // back from 0, zero::CheckpointSource) and verifies its CRC-32C once the range that ends it has
  // been read (IoError naming the file and array).
  Status read(std::size_t index, std::size_t offset, std::span<float> into) override;
  using zero::CheckpointSource::read;

 private:
  struct Entry {
    std::uint64_t numel;
    std::uint64_t offset;  // from the start of the file, for read(); from the data section in the header
    std::uint32_t crc;
  };
  CheckpointReader() = default;
  // `as_written`: `layout` is empty and taken from the header.
  static Result<std::unique_ptr<CheckpointReader>> open_impl(const std::filesystem::path& path,
                                                             std::vector<zero::CheckpointArrayInfo> layout,
                                                             bool as_written);
  std::filesystem::path path_;
  std::vector<zero::CheckpointArrayInfo> layout_;
  std::vector<Entry> entries_;  // by layout index
  struct Progress {
    std::uint64_t next = 0;  // the element the next range starts at
    std::uint32_t crc = 0;   // of the elements before it
  };
  std::vector<Progress> progress_;  // by layout index
  CheckpointMeta meta_;
  std::uint64_t file_bytes_ = 0;
  std::uint32_t header_crc_ = 0;
  std::uint64_t header_end_ = 0;  // the byte after the JSON header
  int fd_ = -1;
};

// `<dir>/step-<step as %08d>.zckpt`.
std::filesystem::path checkpoint_path(const std::filesystem::path& dir, std::int64_t step);

// Writes `arrays` and `meta` as checkpoint meta.step in `dir` (created when missing) atomically, then
// deletes the oldest checkpoints in `dir` so that `keep_last` remain (0 keeps every one) together with
// leftover `.tmp` files of interrupted earlier saves. Array names must be unique and non-empty.
// Fails with InvalidArgument for a negative step or keep_last or a bad name, and with IoError naming
// the path and the OS error (e.g. "No space left on device (ENOSPC)") when the directory, the file,
// the rename or the pruning fails; on a failure before the rename the `.tmp` file is removed and
// every earlier checkpoint is untouched. Blocks until the data is on stable storage.
Status save_checkpoint(const std::filesystem::path& dir, const CheckpointMeta& meta, std::span<const NamedArray> arrays,
                       int keep_last);

// Writes `text` to `path` so that a crash leaves either the old file or the whole new one: a
// `.tmp` beside it, fsync, rename, fsync of the directory. IoError naming the path otherwise (the
// `.tmp` is removed then).
Status write_file_durably(const std::filesystem::path& path, std::string_view text);

// The checkpoint in `dir` with the highest step, or nullopt when there is none (including when `dir`
// does not exist). `.tmp` files and other names are ignored. IoError when `dir` cannot be listed.
Result<std::optional<std::filesystem::path>> latest_checkpoint(const std::filesystem::path& dir);

// Reads the checkpoint at `path` into `into` and returns its meta. The file must hold exactly the
// arrays of `into` (matched by name, in any order) with the same element counts. Every check —
// magic, version, header CRC and syntax, truncation, missing/extra/mis-sized arrays, each array's
// CRC-32C — fails with an error naming the file (and the array), NotFound when `path` does not
// exist. On failure the contents of `into` are unspecified (some arrays may already be overwritten).
Result<CheckpointMeta> load_checkpoint(const std::filesystem::path& path, std::span<const NamedArray> into);

}  // namespace zinf::train
