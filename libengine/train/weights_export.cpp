#include "libengine/train/weights_export.h"

#include <algorithm>

#include <fmt/format.h>

#include "libengine/model/hf_names.h"
#include "libengine/train/checkpoint.h"
#include "libengine/train/checkpoint_model.h"
#include "libengine/train/safetensors_writer.h"

namespace zinf::train {
namespace fs = std::filesystem;
namespace {

Status check_out_dir(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::ok();
  if (!fs::is_directory(dir, ec)) {
    return Status::invalid_argument(fmt::format("--out: {} exists and is not a directory", dir.string()));
  }
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == "model.safetensors" || name == kSafetensorsIndexName ||
        (name.starts_with("model-") && name.ends_with(".safetensors"))) {
      return Status::invalid_argument(
          fmt::format("--out: {} already holds a model ({}); choose an empty or new directory", dir.string(), name));
    }
  }
  return Status::ok();
}

}  // namespace

Result<ExportResult> export_weights(const CheckpointSet& set, const fs::path& out_dir, const ExportOptions& options) {
  ZINF_RETURN_IF_ERROR(check_out_dir(out_dir));
  // The model record from rank 0's header (every shard's header is checked against the manifest below).
  ZINF_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> first, CheckpointReader::open_as_written(set.shards.front()));
  ZINF_ASSIGN_OR_RETURN(const CheckpointModel model,
                        read_checkpoint_model(first->meta().extra, set.shards.front().string()));
  first.reset();
  const model::ParamTable& table = model.table;
  const zero::Partition whole(table, 1, 0);
  ZINF_ASSIGN_OR_RETURN(std::unique_ptr<ShardedCheckpointSource> source,
                        ShardedCheckpointSource::open(set, table, whole));
  // Every byte verified before the first output byte: a damaged checkpoint exports nothing.
  ZINF_RETURN_IF_ERROR(source->verify_needed_data());

  ZINF_ASSIGN_OR_RETURN(const std::vector<model::HfTensor> tensors, model::hf_tensors(model.shape));
  ZINF_ASSIGN_OR_RETURN(const nlohmann::json config, model::hf_config_json(model.shape));
  std::vector<SafetensorsEntry> entries;
  for (const model::HfTensor& t : tensors) {
    if (model::pieces_of(table, t.param).empty()) {
      return Status::invalid_argument(
          fmt::format("checkpoint {}: has no parameter {} (for {})", set.shards.front().string(), t.param, t.name));
    }
    entries.push_back({t.name, options.dtype, t.shape});
  }
  ZINF_ASSIGN_OR_RETURN(
      std::unique_ptr<ShardedSafetensorsWriter> writer,
      ShardedSafetensorsWriter::create(out_dir, entries, options.max_shard_bytes, {{"format", "pt"}}));
  ExportResult result;
  result.step = set.step;
  std::vector<float> piece, rows, hf;
  for (const model::HfTensor& t : tensors) {
    // The zinf rows [row_begin, +rows) of the whole parameter, gathered from its pieces (tiles).
    const std::int64_t first_element = t.row_begin * t.cols;
    const std::int64_t count = t.numel();
    rows.resize(static_cast<std::size_t>(count));
    for (const model::ParamPiece& p : model::pieces_of(table, t.param)) {
      const std::int64_t from = std::max(first_element, p.whole_offset);
      const std::int64_t to = std::min(first_element + count, p.whole_offset + p.numel);
      if (from >= to) continue;
      piece.resize(static_cast<std::size_t>(p.numel));
      // The master weights are the layout's first table.size() arrays, in table order.
      ZINF_RETURN_IF_ERROR(source->read(static_cast<std::size_t>(p.id), piece));
      std::copy(piece.begin() + (from - p.whole_offset), piece.begin() + (to - p.whole_offset),
                rows.begin() + (from - first_element));
    }
    std::span<const float> out = rows;
    if (t.transform == model::HfTransform::kTranspose) {
      hf.resize(rows.size());
      for (std::int64_t r = 0; r < t.rows; ++r) {
        for (std::int64_t c = 0; c < t.cols; ++c) {
          hf[static_cast<std::size_t>(c * t.rows + r)] = rows[static_cast<std::size_t>(r * t.cols + c)];
        }
      }
      out = hf;
    }
    ZINF_RETURN_IF_ERROR(writer->append(out));
    result.peak_buffer_bytes =
        std::max<std::uint64_t>(result.peak_buffer_bytes, (piece.capacity() + rows.capacity() + hf.capacity()) * 4);
    ++result.tensors;
    result.parameters += static_cast<std::uint64_t>(count);
    result.bytes += static_cast<std::uint64_t>(count) * dtype_size_bytes(options.dtype);
  }
  ZINF_ASSIGN_OR_RETURN(result.files, writer->commit());
  const fs::path config_path = out_dir / "config.json";
  ZINF_RETURN_IF_ERROR(write_file_durably(config_path, config.dump(2) + "\n"));
  result.files.push_back(config_path);
  return result;
}

}  // namespace zinf::train
