// Safetensors writers (the format: safetensors_reader.h), streaming: the header is written first
// from the declared names, shapes and dtypes, then each tensor's data is appended in declaration
// order, fp32 values converted to the declared dtype on the way (round to nearest even, as
// PyTorch's .to(torch.bfloat16 / torch.float16); kernels/convert.h). Nothing but one conversion
// buffer is held in memory, so a writer's caller streams a model bounded by its largest tensor.
//
// Durability: a file is written as `<name>.tmp`, fsynced, renamed over `<name>`, and its directory
// fsynced, so a crash or a full disk leaves the complete file or none; errors (ENOSPC, EIO ...) are
// IoErrors naming the path. A writer destroyed before commit() removes its .tmp file.
//
// ShardedSafetensorsWriter splits the tensors over files of at most max_shard_bytes of data each
// (a larger tensor gets a file of its own), named as Hugging Face's save_pretrained names them:
// `model-00001-of-00003.safetensors` ... plus `model.safetensors.index.json` ({"metadata":
// {"total_size"}, "weight_map": {tensor: file}}), written last; one shard is a plain
// `model.safetensors` without an index.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "libengine/core/dtype.h"
#include "libengine/core/status.h"

namespace zinf::train {

// A tensor to write: its name, element type in the file and shape.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;

  std::uint64_t numel() const;
  std::uint64_t bytes() const { return numel() * dtype_size_bytes(dtype); }
};

class SafetensorsWriter {
 public:
  // Creates `path`.tmp and writes the header of `entries` (unique, non-empty names that are not
  // "__metadata__"; non-negative dims) and `metadata`. InvalidArgument naming the tensor for a bad
  // entry; IoError naming the path otherwise.
  static Result<std::unique_ptr<SafetensorsWriter>> create(const std::filesystem::path& path,
                                                           std::vector<SafetensorsEntry> entries,
                                                           const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // The next values of the data: the current tensor's next elements, continuing into the next
  // tensors in declaration order (a call may span tensors; any split works). InvalidArgument when
  // more values arrive than the tensors hold; IoError naming the path.
  Status append(std::span<const float> values);
  // The name of the tensor the next appended value belongs to (empty once all are complete).
  std::string_view next_tensor() const;
  // Every tensor complete: fsync, rename over the final name, fsync the directory. InvalidArgument
  // naming the first incomplete tensor; IoError naming the path (the .tmp is removed then).
  Status commit();

 private:
  SafetensorsWriter() = default;
  Status write_bytes(const void* data, std::size_t bytes);

  std::filesystem::path path_;
  std::filesystem::path tmp_path_;
  std::vector<SafetensorsEntry> entries_;
  std::size_t current_ = 0;         // the tensor being written
  std::uint64_t current_done_ = 0;  // its elements written
  std::uint64_t offset_ = 0;        // the file offset of the next byte
  std::vector<std::uint16_t> staging_;
  int fd_ = -1;
  bool committed_ = false;
};

class ShardedSafetensorsWriter {
 public:
  // Plans the shards of `entries` in `dir` (created when missing): consecutive tensors in
  // declaration order fill a shard while its data stays within `max_shard_bytes` (>= 1).
  static Result<std::unique_ptr<ShardedSafetensorsWriter>> create(
      const std::filesystem::path& dir, std::vector<SafetensorsEntry> entries, std::uint64_t max_shard_bytes,
      const std::map<std::string, std::string>& metadata = {});

  // As SafetensorsWriter::append, across the shards: a shard is committed once its last tensor is
  // complete and the next one opened.
  Status append(std::span<const float> values);
  // Commits the last shard and writes the index (more than one shard). Returns the files written
  // (the shards, then the index).
  Result<std::vector<std::filesystem::path>> commit();
  std::size_t shard_count() const { return shards_.size(); }

 private:
  ShardedSafetensorsWriter() = default;
  Status open_shard(std::size_t shard);

  std::filesystem::path dir_;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
  std::vector<std::vector<SafetensorsEntry>> shards_;
  std::vector<std::string> shard_names_;
  std::size_t current_shard_ = 0;
  std::uint64_t current_left_ = 0;  // elements still to come in the current shard
  std::unique_ptr<SafetensorsWriter> writer_;
  std::vector<std::filesystem::path> written_;
};

// The file names of a model in HF's layout: "model.safetensors" for one shard, else
// "model-<i, 5 digits>-of-<n, 5 digits>.safetensors" (i from 1), and the index's name.
std::string safetensors_shard_name(std::size_t index, std::size_t count);
inline constexpr std::string_view kSafetensorsIndexName = "model.safetensors.index.json";

}  // namespace zinf::train
