// export_weights: a checkpoint's master weights as Hugging Face safetensors (what `zinf export`
// does), the way DeepSpeed's zero_to_fp32.py consolidates a ZeRO checkpoint: from a set written at
// any world size with the states on any tier (each array assembled from the shards that hold its
// elements, every CRC verified), into `model.safetensors` (or HF's shards + index above
// max_shard_bytes) and the model's config.json.
//
// Streamed: one HF tensor at a time (the zinf parameter's pieces read, transposed where the HF
// layout is, converted to the output dtype, appended): memory is bounded by a few copies of the
// largest tensor, never the model.
//
// Refuses what `zinf checkpoint verify` refuses (a damaged, truncated or foreign shard, a bad
// manifest) before any output file is written: every byte it will read is CRC-checked first. An
// I/O error while writing (a full disk) leaves no file half-written under its final name, but the
// shards renamed before it stay; config.json is written last, so a directory without it is an
// incomplete export.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "libengine/core/dtype.h"
#include "libengine/core/status.h"
#include "libengine/train/checkpoint_set.h"

namespace zinf::train {

struct ExportOptions {
  DType dtype = DType::kF32;
  std::uint64_t max_shard_bytes = 5'000'000'000;  // "5GB", save_pretrained's default
};

struct ExportResult {
  std::int64_t step = 0;
  std::vector<std::filesystem::path> files;  // shards, index (when sharded), config.json
  std::uint64_t tensors = 0;
  std::uint64_t parameters = 0;         // elements written
  std::uint64_t bytes = 0;              // tensor data bytes written
  std::uint64_t peak_buffer_bytes = 0;  // the largest host buffer the export held (its streaming bound)
};

// `out_dir` is created when missing and must not already hold a model (model.safetensors, shards or
// index): InvalidArgument naming it. Errors otherwise name the checkpoint file, tensor or path.
Result<ExportResult> export_weights(const CheckpointSet& set, const std::filesystem::path& out_dir,
                                    const ExportOptions& options);

}  // namespace zinf::train
