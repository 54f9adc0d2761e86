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
        "model: a Hugging Face name map exists for GPT-2 (layernorm, gelu MLP, learned positions) and for llama / "
        "mistral / qwen2 (rmsnorm, gated MLP, rotary positions); this shape mixes them");
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

// Llama, Mistral and Qwen2 (modeling_llama/mistral/qwen2.py) share their names and differ in
// biases. From a shape alone the family is: q/k/v biased and nothing else -> qwen2 (Qwen2 hard-codes
// exactly that); otherwise llama, whose attention_bias (q, k, v and o together) and mlp_bias cover
// the rest. A bias-free shape is written as llama: MistralForCausalLM with sliding_window null is
// the same computation, and reading a Mistral checkpoint needs no model_type (names are shared).
enum class LlamaFamily { kLlama, kQwen2 };

Result<LlamaFamily> llama_family(const spec::ModelShape& s) {
  if (s.norm != spec::NormKind::kRmsNorm || s.mlp != spec::MlpKind::kGated ||
      s.position != spec::PositionKind::kRotary) {
    return Status::invalid_argument(
        "model: a Hugging Face name map exists for GPT-2 (layernorm, gelu MLP, learned positions) and for "
        "llama / mistral / qwen2 (rmsnorm, gated MLP, rotary positions); this shape mixes them");
  }
  if (s.rope.partial_rotary_factor != 1.0) {
    return Status::invalid_argument(fmt::format(
        "model.partial_rotary_factor: {} has no llama / mistral / qwen2 form (their attention rotates whole heads: "
        "1 only)",
        s.rope.partial_rotary_factor));
  }
  if (s.qkv_bias && !s.attn_out_bias && !s.mlp_bias) return LlamaFamily::kQwen2;
  if (s.qkv_bias != s.attn_out_bias) {
    return Status::invalid_argument(
        "model: an output-projection bias without q/k/v biases has no Hugging Face form (llama's attention_bias "
        "biases q, k, v and o together; qwen2 biases q, k, v only)");
  }
  return LlamaFamily::kLlama;
}

std::vector<HfTensor> llama_tensors(const spec::ModelShape& s) {
  const std::int64_t c = s.hidden, f = s.ffn_hidden;
  const std::int64_t q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim, qkv = q + 2 * kv;
  constexpr HfTransform kCopy = HfTransform::kCopy;
  // A block of rows [row_begin, +rows) of the zinf parameter [param_rows, cols].
  const auto rows_of = [](std::string name, std::string param, std::int64_t param_rows, std::int64_t cols,
                          std::int64_t row_begin, std::int64_t rows) {
    HfTensor t = whole(std::move(name), std::move(param), param_rows, cols, HfTransform::kCopy);
    t.row_begin = row_begin;
    t.rows = rows;
    t.shape = cols == 1 ? std::vector<std::int64_t>{rows} : std::vector<std::int64_t>{rows, cols};
    return t;
  };
  std::vector<HfTensor> out;
  out.push_back(whole("model.embed_tokens.weight", "wte", s.vocab, c, kCopy));
  for (std::int64_t i = 0; i < s.layers; ++i) {
    const std::string h = fmt::format("model.layers.{}.", i);
    const std::string b = fmt::format("blocks.{}.", i);
    out.push_back(whole(h + "input_layernorm.weight", b + "ln1.weight", c, 1, kCopy));
    out.push_back(rows_of(h + "self_attn.q_proj.weight", b + "attn.qkv.weight", qkv, c, 0, q));
    if (s.qkv_bias) out.push_back(rows_of(h + "self_attn.q_proj.bias", b + "attn.qkv.bias", qkv, 1, 0, q));
    out.push_back(rows_of(h + "self_attn.k_proj.weight", b + "attn.qkv.weight", qkv, c, q, kv));
    if (s.qkv_bias) out.push_back(rows_of(h + "self_attn.k_proj.bias", b + "attn.qkv.bias", qkv, 1, q, kv));
    out.push_back(rows_of(h + "self_attn.v_proj.weight", b + "attn.qkv.weight", qkv, c, q + kv, kv));
    if (s.qkv_bias) out.push_back(rows_of(h + "self_attn.v_proj.bias", b + "attn.qkv.bias", qkv, 1, q + kv, kv));
    out.push_back(whole(h + "self_attn.o_proj.weight", b + "attn.proj.weight", c, q, kCopy));
    if (s.attn_out_bias) out.push_back(whole(h + "self_attn.o_proj.bias", b + "attn.proj.bias", c, 1, kCopy));
    out.push_back(whole(h + "post_attention_layernorm.weight", b + "ln2.weight", c, 1, kCopy));
    out.push_back(whole(h + "mlp.gate_proj.weight", b + "mlp.gate.weight", f, c, kCopy));
    if (s.mlp_bias) out.push_back(whole(h + "mlp.gate_proj.bias", b + "mlp.gate.bias", f, 1, kCopy));
    out.push_back(whole(h + "mlp.up_proj.weight", b + "mlp.fc.weight", f, c, kCopy));
    if (s.mlp_bias) out.push_back(whole(h + "mlp.up_proj.bias", b + "mlp.fc.bias", f, 1, kCopy));
    out.push_back(whole(h + "mlp.down_proj.weight", b + "mlp.proj.weight", c, f, kCopy));
    if (s.mlp_bias) out.push_back(whole(h + "mlp.down_proj.bias", b + "mlp.proj.bias", c, 1, kCopy));
  }
  out.push_back(whole("model.norm.weight", "lnf.weight", c, 1, kCopy));
  if (!s.tied_embeddings) out.push_back(whole("lm_head.weight", "head.weight", s.vocab, c, kCopy));
  return out;
}

nlohmann::json rope_scaling_json(const spec::RopeSettings& rope) {
  switch (rope.scaling) {
    case spec::RopeScalingKind::kNone:
      return nullptr;
    case spec::RopeScalingKind::kLinear:
      return {{"rope_type", "linear"}, {"factor", rope.factor}};
    case spec::RopeScalingKind::kLlama3:
      return {{"rope_type", "llama3"},
              {"factor", rope.factor},
              {"low_freq_factor", rope.low_freq_factor},
              {"high_freq_factor", rope.high_freq_factor},
              {"original_max_position_embeddings", rope.original_max_positions}};
  }
  return nullptr;
}

nlohmann::json llama_config_json(const spec::ModelShape& s, LlamaFamily family) {
  const bool qwen2 = family == LlamaFamily::kQwen2;
  nlohmann::json config{{"architectures", {qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
                        {"model_type", qwen2 ? "qwen2" : "llama"},
                        {"vocab_size", s.vocab},
                        {"hidden_size", s.hidden},
                        {"intermediate_size", s.ffn_hidden},
                        {"num_hidden_layers", s.layers},
                        {"num_attention_heads", s.heads},
                        {"num_key_value_heads", s.kv_heads},
                        {"head_dim", s.head_dim},
                        {"max_position_embeddings", s.max_positions},
                        {"hidden_act", "silu"},
                        {"rms_norm_eps", s.norm_eps},
                        {"rope_theta", s.rope.theta},
                        {"rope_scaling", rope_scaling_json(s.rope)},
                        {"attention_dropout", 0.0},
                        {"tie_word_embeddings", s.tied_embeddings},
                        {"torch_dtype", "float32"}};
  if (qwen2) {
    // Qwen2's sliding window applies only with use_sliding_window; zinf attends to the whole context.
    config["use_sliding_window"] = false;
    config["sliding_window"] = nullptr;
  } else {
    config["attention_bias"] = s.qkv_bias;
    config["mlp_bias"] = s.mlp_bias;
  }
  return config;
}

}  // namespace

std::int64_t HfTensor::param_element(std::int64_t i) const {
  if (transform == HfTransform::kCopy) return row_begin * cols + i;
  // HF [cols, rows]: element i is (c, r) = (i / rows, i % rows), zinf's (row_begin + r, c).
  return (row_begin + i % rows) * cols + i / rows;
}

Result<std::vector<HfTensor>> hf_tensors(const spec::ModelShape& shape) {
  if (shape.norm == spec::NormKind::kRmsNorm) {
    ZINF_RETURN_IF_ERROR(llama_family(shape).status());
    return llama_tensors(shape);
  }
  ZINF_RETURN_IF_ERROR(gpt2_family(shape));
  return gpt2_tensors(shape);
}

Result<nlohmann::json> hf_config_json(const spec::ModelShape& s) {
  if (s.norm == spec::NormKind::kRmsNorm) {
    ZINF_ASSIGN_OR_RETURN(const LlamaFamily family, llama_family(s));
    return llama_config_json(s, family);
  }
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
