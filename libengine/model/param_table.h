// ParamTable: the model's list of parameter tensors — name, shape, element count and the module
// (group) that uses them — in the order the forward pass first touches them. Owners of model states
// (zero/, optim/, checkpoints) size and index their storage from it; the model initialises values
// through ParamTable::init_values so every owner, however it partitions, sees the same numbers.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "libengine/model/param_source.h"
#include "libengine/tensor/tensor.h"

namespace zinf::model {

enum class ParamInit {
  kNormal,  // N(0, std)
  kOnes,    // LayerNorm weight
  kZeros,   // biases
};

struct ParamInfo {
  std::string name;  // "blocks.3.attn.qkv.weight"
  Shape shape;
  std::int64_t numel = 0;
  std::int32_t group = 0;  // module index in forward order: embedding 0, block i → i + 1, head last
  ParamInit init = ParamInit::kNormal;
  float init_std = 0.02f;
  bool weight_decay = true;  // false for biases and norm weights (GPT-2/nanoGPT convention)
  // Set by ParamTable::add. A tile of a tiled tensor ("<whole>.tile{k}", tiles added in order) is
  // initialised as elements [whole_offset, +numel) of the whole tensor, whose untiled table
  // position is whole_id: a tiled model starts from the untiled model's values. Untiled, whole_id
  // is the parameter's own id and whole_offset 0.
  ParamId whole_id = 0;
  std::int64_t whole_offset = 0;
};

class ParamTable {
 public:
  ParamId add(ParamInfo info);
  std::span<const ParamInfo> params() const { return params_; }
  const ParamInfo& operator[](ParamId id) const { return params_.at(static_cast<std::size_t>(id)); }
  std::int32_t size() const { return static_cast<std::int32_t>(params_.size()); }
  std::int64_t total_numel() const { return total_numel_; }

  // Initial values of elements [begin, begin + out.size()) of parameter `id`, a pure function of
  // (seed, whole_id, element index in the whole tensor) so partitioned owners agree with a whole
  // copy, and tiles with the untiled tensor.
  void init_values(std::uint64_t seed, ParamId id, std::int64_t begin, std::span<float> out) const;

 private:
  struct Whole {
    std::string name;
    std::int64_t next_offset;
  };
  std::vector<ParamInfo> params_;
  std::vector<Whole> wholes_;  // whole tensors in first-appearance order: their untiled ids
  std::int64_t total_numel_ = 0;
};

}  // namespace zinf::model
