#include "libengine/model/hf_names.h"

#include <algorithm>

#include <fmt/format.h>

namespace zinf::model {
namespace {

// A zinf parameter [rows, cols] that is one HF tensor: `name` (transformers' GPT2LMHeadModel
// spelling) and its base-model spelling without the "transformer." prefix, which files saved from
// GPT2Model (the Hub's gpt2 weights) use.
HfTensor whole(std::string name, std::string param, std::int64_t rows, std::int64_t cols, HfTransform transform) {
  HfTensor t;
  t.alt_name = name.starts_with("transformer.") ? name.substr(std::string_view("transformer.").size()) : std::string();
  t.name = std::move(name);
  t.param = std::move(param);
  t.param_rows = rows;
  t.cols = cols;
  t.rows = rows;
  t.transform = transform;
  if (transform == HfTransform::kTranspose) {
    t.shape = {cols, rows};
  } else if (cols == 1) {
    t.shape = {rows};
  } else {
    t.shape = {rows, cols};
  }
  return t;
}

Status gpt2_family(const spec::ModelShape& s) {
  if (s.norm != spec::NormKind::kLayerNorm || s.mlp != spec::MlpKind::kGelu ||
      s.position != spec::PositionKind::kLearned) {
    return Status::invalid_argument(
        "model: only GPT-2-style models (layernorm, gelu MLP, learned positions) have a Hugging Face name map so far");
  }
  if (!s.qkv_bias || !s.attn_out_bias || !s.mlp_bias) {
    return Status::invalid_argument(
        "model: GPT-2 (model_type gpt2) has biases on every projection; a model without them has no gpt2 form");
  }
  if (s.kv_heads != s.heads || s.head_dim * s.heads != s.hidden) {
    return Status::invalid_argument(
        "model: GPT-2 (model_type gpt2) has kv_heads == heads and head_dim == hidden/heads");
  }
  return Status::ok();
}

std::vector<HfTensor> gpt2_tensors(const spec::ModelShape& s) {
  const std::int64_t c = s.hidden, f = s.ffn_hidden;
  constexpr HfTransform kCopy = HfTransform::kCopy;
  constexpr HfTransform kT = HfTransform::kTranspose;
  std::vector<HfTensor> out;
  out.push_back(whole("transformer.wte.weight", "wte", s.vocab, c, kCopy));
  out.push_back(whole("transformer.wpe.weight", "wpe", s.max_positions, c, kCopy));
  for (std::int64_t i = 0; i < s.layers; ++i) {
    const std::string h = fmt::format("transformer.h.{}.", i);
    const std::string b = fmt::format("blocks.{}.", i);
    out.push_back(whole(h + "ln_1.weight", b + "ln1.weight", c, 1, kCopy));
    out.push_back(whole(h + "ln_1.bias", b + "ln1.bias", c, 1, kCopy));
    out.push_back(whole(h + "attn.c_attn.weight", b + "attn.qkv.weight", 3 * c, c, kT));
    out.push_back(whole(h + "attn.c_attn.bias", b + "attn.qkv.bias", 3 * c, 1, kCopy));
    out.push_back(whole(h + "attn.c_proj.weight", b + "attn.proj.weight", c, c, kT));
    out.push_back(whole(h + "attn.c_proj.bias", b + "attn.proj.bias", c, 1, kCopy));
    out.push_back(whole(h + "ln_2.weight", b + "ln2.weight", c, 1, kCopy));
    out.push_back(whole(h + "ln_2.bias", b + "ln2.bias", c, 1, kCopy));
    out.push_back(whole(h + "mlp.c_fc.weight", b + "mlp.fc.weight", f, c, kT));
    out.push_back(whole(h + "mlp.c_fc.bias", b + "mlp.fc.bias", f, 1, kCopy));
    out.push_back(whole(h + "mlp.c_proj.weight", b + "mlp.proj.weight", c, f, kT));
    out.push_back(whole(h + "mlp.c_proj.bias", b + "mlp.proj.bias", c, 1, kCopy));
  }
  out.push_back(whole("transformer.ln_f.weight", "lnf.weight", c, 1, kCopy));
  out.push_back(whole("transformer.ln_f.bias", "lnf.bias", c, 1, kCopy));
  // Tied: transformers saves only wte (safetensors stores a shared tensor once).
  if (!s.tied_embeddings) out.push_back(whole("lm_head.weight", "head.weight", s.vocab, c, kCopy));
  return out;
}

}  // namespace

std::int64_t HfTensor::param_element(std::int64_t i) const {
  if (transform == HfTransform::kCopy) return row_begin * cols + i;
  // HF [cols, rows]: element i is (c, r) = (i / rows, i % rows), zinf's (row_begin + r, c).
  return (row_begin + i % rows) * cols + i / rows;
}

Result<std::vector<HfTensor>> hf_tensors(const spec::ModelShape& shape) {
  ZINF_RETURN_IF_ERROR(gpt2_family(shape));
  return gpt2_tensors(shape);
}

Result<nlohmann::json> hf_config_json(const spec::ModelShape& s) {
  ZINF_RETURN_IF_ERROR(gpt2_family(s));
  // zinf's GPT: tanh-approximated GELU ("gelu_new"), LayerNorm eps 1e-5, no dropout.
  return nlohmann::json{{"architectures", {"GPT2LMHeadModel"}},
                        {"model_type", "gpt2"},
                        {"vocab_size", s.vocab},
                        {"n_positions", s.max_positions},
                        {"n_ctx", s.max_positions},
                        {"n_embd", s.hidden},
                        {"n_layer", s.layers},
                        {"n_head", s.heads},
                        {"n_inner", s.ffn_hidden},
                        {"activation_function", "gelu_new"},
                        {"layer_norm_epsilon", 1e-5},
                        {"resid_pdrop", 0.0},
                        {"embd_pdrop", 0.0},
                        {"attn_pdrop", 0.0},
                        {"scale_attn_weights", true},
                        {"tie_word_embeddings", s.tied_embeddings},
                        {"torch_dtype", "float32"}};
}

std::string whole_name(std::string_view param_name) {
  const std::size_t tile = param_name.rfind(".tile");
  if (tile == std::string_view::npos || tile + 5 == param_name.size()) return std::string(param_name);
  const std::string_view digits = param_name.substr(tile + 5);
  const bool numeric = std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  return std::string(numeric ? param_name.substr(0, tile) : param_name);
}

std::vector<ParamPiece> pieces_of(const ParamTable& table, std::string_view whole) {
  std::vector<ParamPiece> out;
  for (ParamId id = 0; id < table.size(); ++id) {
    const ParamInfo& info = table[id];
    if (info.name == whole || whole_name(info.name) == whole) out.push_back({id, info.whole_offset, info.numel});
  }
  std::sort(out.begin(), out.end(),
            [](const ParamPiece& a, const ParamPiece& b) { return a.whole_offset < b.whole_offset; });
  return out;
}

}  // namespace zinf::model
