// `zinf export CHECKPOINT_DIR --out DIR [--dtype f32|bf16|f16] [--max-shard-size 5GB] [--step N]`:
// a checkpoint's master weights as Hugging Face safetensors with HF names plus config.json
// (train/weights_export.h): the newest complete checkpoint in the directory (or --step's), from a set
// of any world size with the states on any tier. No scenario is needed: the checkpoint records its
// model. A damaged checkpoint is refused as `zinf checkpoint verify` would, before any output.
#include <filesystem>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "apps/zinf/subcommand.h"
#include "libengine/core/units.h"
#include "libengine/train/checkpoint_set.h"
#include "libengine/train/weights_export.h"

namespace zinf::cli {
namespace {

namespace fs = std::filesystem;

Result<DType> parse_export_dtype(const std::string& text) {
  if (text == "f32") return DType::kF32;
  if (text == "f16") return DType::kF16;
  if (const std::optional<DType> dtype = dtype_from_name(text)) return *dtype;
  return Status::invalid_argument(fmt::format("--dtype: '{}' is not an element type (allowed: f32, bf16, f16)", text));
}

class ExportCommand final : public Subcommand {
 public:
  explicit ExportCommand(CLI::App& app) {
    CLI::App* c = app.add_subcommand(
        "export", "Write a checkpoint's weights as Hugging Face safetensors (HF names) and config.json");
    c->add_option("checkpoint_dir", dir_, "Checkpoint directory (scenario.checkpoint.dir)")
        ->required()
        ->type_name("CHECKPOINT_DIR");
    c->add_option("--out", out_, "Directory to write model.safetensors (or shards + index) and config.json into")
        ->required()
        ->type_name("DIR");
    c->add_option("--dtype", dtype_text_, "Element type of the written tensors: f32, bf16 or f16")
        ->type_name("f32|bf16|f16")
        ->default_str("f32");
    c->add_option("--max-shard-size", shard_text_,
                  "Split into model-0000N-of-0000M.safetensors + index above this much data per file")
        ->type_name("SIZE")
        ->default_str("5GB");
    c->add_option("--step", step_text_, "Export the checkpoint of this step (default: the newest complete one)")
        ->type_name("N");
  }

  Status run(const Io& io) override {
    ZINF_ASSIGN_OR_RETURN(const DType dtype, parse_export_dtype(dtype_text_));
    ZINF_ASSIGN_OR_RETURN(const std::uint64_t max_shard, parse_bytes(shard_text_, "--max-shard-size"));
    std::optional<std::int64_t> step;
    if (!step_text_.empty()) {
      ZINF_ASSIGN_OR_RETURN(step, parse_int_in_range(step_text_, "--step", 0, std::int64_t{1} << 53));
    }
    std::error_code ec;
    if (!fs::is_directory(dir_, ec)) {
      return Status::not_found(fmt::format("checkpoint directory {}: no such directory", dir_));
    }
    ZINF_ASSIGN_OR_RETURN(std::vector<train::CheckpointCandidate> candidates, train::checkpoint_candidates(dir_));
    const train::CheckpointCandidate* chosen = nullptr;
    for (const train::CheckpointCandidate& candidate : candidates) {
      if (!step || candidate.step == *step) {
        chosen = &candidate;
        break;
      }
    }
    if (chosen == nullptr) {
      return Status::not_found(step ? fmt::format("--step: no checkpoint of step {} in {}", *step, dir_)
                                    : fmt::format("checkpoint directory {}: no complete checkpoint", dir_));
    }
    ZINF_RETURN_IF_ERROR(chosen->set.status());
    train::ExportOptions options;
    options.dtype = dtype;
    options.max_shard_bytes = max_shard;
    ZINF_ASSIGN_OR_RETURN(const train::ExportResult result, train::export_weights(chosen->set.value(), out_, options));
    io.out << fmt::format("exported step {} of {} ({} rank(s)): {} tensors, {} parameters, {} bytes of {} data\n",
                          result.step, chosen->path.string(), chosen->set.value().world_size, result.tensors,
                          result.parameters, result.bytes, dtype_name(dtype));
    for (const fs::path& file : result.files) io.out << "  " << file.string() << "\n";
    io.out << fmt::format("largest buffer held: {} bytes (one tensor at a time)\n", result.peak_buffer_bytes);
    return Status::ok();
  }

 private:
  std::string dir_;
  std::string out_;
  std::string dtype_text_ = "f32";
  std::string shard_text_ = "5GB";
  std::string step_text_;
};

}  // namespace

std::unique_ptr<Subcommand> add_export_command(CLI::App& app) { return std::make_unique<ExportCommand>(app); }

}  // namespace zinf::cli
