// The Hugging Face name map: for a model shape, the tensors a Hugging Face checkpoint of that model
// holds (name, shape) and, for each, which zinf parameter it is (part of) and how its values are
// laid out relative to zinf's — what `zinf export` writes and `"init": {"safetensors"}` reads.
//
// Every zinf parameter is viewed as a row-major matrix [rows, cols] (a 1-D parameter: [numel, 1]);
// an HF tensor is a block of consecutive rows of one, either as they are (kCopy: the HF tensor's
// flat elements are those rows' elements) or transposed (kTranspose: the HF tensor is [cols, rows]).
// A fused zinf parameter is several HF tensors over disjoint row ranges (Llama's q/k/v projections
// over zinf's fused qkv); a zinf parameter split into tiles (TiledLinear, ".tile{k}") is still one
// HF tensor: tiles are row ranges of their whole tensor (ParamInfo::whole_offset).
//
// Families: GPT-2 (model_type gpt2: LayerNorm, GELU MLP, learned positions). GPT-2's Conv1D stores
// weights [in, out], the transpose of zinf's nn.Linear [out, in]; c_attn is the fused q|k|v in the
// same order as zinf's qkv, so it is one transposed tensor. Another family is a new case in
// hf_tensors() and hf_config_json() (hf_names.cpp); nothing else changes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/core/status.h"
#include "libengine/model/param_table.h"
#include "libengine/spec/model_shape.h"

namespace zinf::model {

enum class HfTransform {
  kCopy,       // HF tensor (any shape of rows*cols elements) = zinf rows [row_begin, +rows), flat
  kTranspose,  // HF tensor [cols, rows] = (zinf rows [row_begin, +rows))ᵀ
};

struct HfTensor {
  std::string name;                 // "transformer.h.0.attn.c_attn.weight"
  std::string alt_name;             // also accepted when reading ("h.0.attn.c_attn.weight"), or empty
  std::vector<std::int64_t> shape;  // the HF shape
  std::string param;                // the zinf parameter's whole (untiled) name: "blocks.0.attn.qkv.weight"
  std::int64_t param_rows = 0;      // the zinf parameter as [param_rows, cols]
  std::int64_t cols = 1;
  std::int64_t row_begin = 0;  // the zinf rows this tensor is
  std::int64_t rows = 0;
  HfTransform transform = HfTransform::kCopy;

  std::int64_t numel() const { return rows * cols; }
  // The zinf parameter's flat element index of this tensor's flat element `i` (row-major, HF layout).
  std::int64_t param_element(std::int64_t i) const;
};

// The HF tensors of `shape`, in the order a Hugging Face save lists them (embeddings, blocks,
// final norm, head), covering every element of every zinf parameter exactly once. InvalidArgument
// naming the field when the shape has no HF family here (e.g. "model.norm: rmsnorm ...").
Result<std::vector<HfTensor>> hf_tensors(const spec::ModelShape& shape);

// The Hugging Face config.json of `shape` (model_type, sizes, tie_word_embeddings ...), which
// spec::model_shape_from_hf_config reads back as the same shape. Errors as hf_tensors().
Result<nlohmann::json> hf_config_json(const spec::ModelShape& shape);

// One parameter of a ParamTable that holds elements of a whole (untiled) parameter.
struct ParamPiece {
  ParamId id = 0;
  std::int64_t whole_offset = 0;  // its first element in the whole parameter
  std::int64_t numel = 0;
};
// The pieces of the whole parameter `whole` in `table`: itself, or its tiles "<whole>.tile{k}", in
// element order. Empty when the table has no such parameter.
std::vector<ParamPiece> pieces_of(const ParamTable& table, std::string_view whole);
// The whole parameter name of a table entry ("blocks.0.mlp.fc.weight.tile3" -> "blocks.0.mlp.fc.weight").
std::string whole_name(std::string_view param_name);

}  // namespace zinf::model
