// SafetensorsStateSource: a run's starting weights from Hugging Face safetensors (the scenario's
// "init": {"safetensors": "DIR or file"}), served as the checkpoint arrays a state owner loads
// (zero::CheckpointSource over the layout of ModelStates::checkpoint_layout()): the master weights
// from the file, converted to fp32; Adam's moments zero, as a fresh optimizer has them. So the
// weights reach every ZeRO stage, tier and rank count through the owners' own checkpoint load.
//
// Checked at open(), before any state is touched: every tensor of the model's HF name map
// (model/hf_names.h) is in the file with exactly its shape, and the file holds nothing else
// (non-parameter buffers a save may carry, GPT-2's attn.bias / attn.masked_bias masks, are skipped).
// A mismatch is one line naming the tensor. The dtype may be F32, BF16 or F16.
//
// Reads: a rank reads the elements of its own partition only, straight from the file, for every
// tensor stored in zinf's layout; a transposed tensor (GPT-2's Conv1D weights) is read whole once,
// transposed, and kept until the next transposed tensor is needed (host memory: one tensor).
//
// Not thread-safe.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "libengine/core/status.h"
#include "libengine/model/hf_names.h"
#include "libengine/model/param_table.h"
#include "libengine/spec/model_shape.h"
#include "libengine/train/safetensors_weights.h"
#include "libengine/zero/model_states.h"
#include "libengine/zero/partition.h"

namespace zinf::train {

class SafetensorsStateSource final : public zero::CheckpointSource {
 public:
  // `partition`: the rank's partition when the states are partitioned, null when every rank holds
  // whole parameters. `table` and `partition` must outlive the source.
  static Result<std::unique_ptr<SafetensorsStateSource>> open(const std::filesystem::path& path,
                                                              const spec::ModelShape& shape,
                                                              const model::ParamTable& table,
                                                              const zero::Partition* partition);
  Status read(std::size_t index, std::size_t offset, std::span<float> into) override;
  using zero::CheckpointSource::read;

  // Elements read from the files so far (a rank of a partitioned run reads about 1/world of them,
  // plus the transposed tensors whole).
  std::uint64_t elements_read() const { return elements_read_; }

 private:
  struct Bound {
    model::HfTensor hf;
    SafetensorsWeights::Located at;
  };
  SafetensorsStateSource(const model::ParamTable& table, const zero::Partition* partition)
      : table_(table), partition_(partition) {}
  Status read_whole(const std::string& whole, std::int64_t first, std::span<float> into);

  const model::ParamTable& table_;
  const zero::Partition* partition_;
  std::unique_ptr<SafetensorsWeights> weights_;
  std::vector<Bound> bound_;
  std::string cached_;              // the transposed tensor held in zinf's layout, by HF name
  std::vector<float> cached_rows_;  // its rows [row_begin, +rows) of the zinf parameter
  std::uint64_t elements_read_ = 0;
};

}  // namespace zinf::train
