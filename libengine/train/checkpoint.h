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
//                 "arrays": [{"name", "numel", "offset" (bytes from the data section), "crc32c"}]}
//   data section starts at the next multiple of 64 bytes; each array is raw fp32, 64-byte aligned.
// A save writes `<name>.tmp`, fsyncs it, renames it over `<name>` and fsyncs the directory, so a
// crash or a full disk leaves either the new checkpoint complete or no trace of it — never a torn
// file under the final name, and never a damaged earlier checkpoint.
//
// What it is not: a comparison of run configurations (load returns the fingerprint; whether it
// matches is the caller's decision), a sharded multi-rank format, or thread-safe against two
// writers on one directory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "libengine/core/status.h"
#include "libengine/tensor/named_array.h"

namespace zinf::train {

inline constexpr std::uint32_t kCheckpointFormatVersion = 1;

struct CheckpointMeta {
  std::int64_t step = 0;           // the number of optimizer steps the saved states have taken
  std::string fingerprint;         // identifies the run configuration the states belong to
  nlohmann::json extra = nlohmann::json::object();  // the trainer's own state, free-form
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
