// Hugging Face config.json → ModelShape. One converter per supported family, each reading exactly the
// keys the matching Transformers module reads, with that module's defaults: the shape keys (so the
// count equals the model's real parameter count) and the keys the math needs to train it (the norm's
// eps; rope_theta, rope_scaling and partial_rotary_factor, also in transformers 5's
// rope_parameters form). Every other key (dropout, dtype, token ids, attention implementation...)
// is ignored on purpose: a published config.json carries dozens of them and none changes the model.
// Not a general config loader: families whose layer shapes differ (MoE, T5, Falcon...) are rejected.
#include "libengine/spec/hf_config.h"

#include <array>
#include <optional>

#include <fmt/format.h>

#include "libengine/core/quote.h"
#include "libengine/spec/json_input.h"

namespace zinf::spec {
namespace {

constexpr std::string_view kSupportedModelTypes = "gpt2, gpt_neox, llama, mistral, qwen2";

enum class Family { kGpt2, kGptNeox, kLlama, kMistral, kQwen2 };

struct FamilyName {
  Family family;
  std::string_view model_type;    // the config's "model_type"
  std::string_view architecture;  // the causal-LM class in "architectures" (older configs lack model_type)
};

// Only the causal-LM classes: other heads (sequence classification...) have other parameters.
constexpr std::array<FamilyName, 5> kFamilies = {{
    {Family::kGpt2, "gpt2", "GPT2LMHeadModel"},
    {Family::kGptNeox, "gpt_neox", "GPTNeoXForCausalLM"},
    {Family::kLlama, "llama", "LlamaForCausalLM"},
    {Family::kMistral, "mistral", "MistralForCausalLM"},
    {Family::kQwen2, "qwen2", "Qwen2ForCausalLM"},
}};

// Keys that give a mixture-of-experts model its expert count: Mixtral, Qwen-MoE/OLMoE, DeepSeek.
constexpr std::array<std::string_view, 3> kExpertCountKeys = {"num_local_experts", "num_experts", "n_routed_experts"};

Status reject_mixture_of_experts(const JsonObject& config) {
  for (std::string_view key : kExpertCountKeys) {
    if (!config.has(key)) continue;
    const nlohmann::json& value = config.raw().at(key);
    // Dense configs sometimes carry the key as null, 0 or 1; only a real expert count is MoE. Any
    // other type is refused rather than skipped, so "8" (a string) cannot slip past this check.
    if (value.is_null()) continue;
    if (!value.is_number()) {
      return Status::invalid_argument(fmt::format("{}: expected an expert count (a number, or null), found {}",
                                                  config.field_path(key), describe_json_value(value)));
    }
    if (value.get<double>() > 1) {
      return Status::invalid_argument(
          fmt::format("{}: {} experts; mixture-of-experts is not supported (only dense models: {})",
                      config.field_path(key), value.dump(), kSupportedModelTypes));
    }
  }
  return Status::ok();
}

// The family named by "model_type", or by "architectures" when model_type is absent.
Result<FamilyName> find_family(const JsonObject& config) {
  if (config.has("model_type")) {
    ZINF_ASSIGN_OR_RETURN(const std::string model_type, config.string("model_type"));
    for (const FamilyName& name : kFamilies) {
      if (name.model_type == model_type) return name;
    }
    return Status::invalid_argument(fmt::format("{}: {} is not supported; supported: {}",
                                                config.field_path("model_type"), zinf::quoted(model_type),
                                                kSupportedModelTypes));
  }
  if (config.has("architectures") && config.raw().at("architectures").is_array()) {
    for (const nlohmann::json& architecture : config.raw().at("architectures")) {
      if (!architecture.is_string()) continue;
      for (const FamilyName& name : kFamilies) {
        if (name.architecture == architecture.get<std::string>()) return name;
      }
    }
    return Status::invalid_argument(
        fmt::format("{}: required field is missing and {} {} names no supported model; supported model_type: {}",
                    config.field_path("model_type"), config.field_path("architectures"),
                    describe_json_value(config.raw().at("architectures")), kSupportedModelTypes));
  }
  return Status::invalid_argument(fmt::format("{}: required field is missing (and no architectures); supported: {}",
                                              config.field_path("model_type"), kSupportedModelTypes));
}

// `divisor` must divide `dividend`; the message names both keys and how to fix it.
Status check_divides(const JsonObject& config, std::string_view divisor_key, std::int64_t divisor,
                     std::string_view dividend_key, std::int64_t dividend, std::string_view hint) {
  if (dividend % divisor == 0) return Status::ok();
  return Status::invalid_argument(fmt::format("{}: {} does not divide {} {}; {}", config.field_path(divisor_key),
                                              divisor, config.field_path(dividend_key), dividend, hint));
}

// An optional boolean key (absent or null → `fallback`); anything but true/false is an error.
Result<bool> bool_or(const JsonObject& config, std::string_view key, bool fallback) {
  ZINF_ASSIGN_OR_RETURN(const std::optional<bool> value, config.optional_bool(key));
  return value.value_or(fallback);
}

// A number key (absent or null → `fallback`).
Result<double> number_or(const JsonObject& config, std::string_view key, double fallback) {
  ZINF_ASSIGN_OR_RETURN(const std::optional<double> value, config.optional_number(key));
  return value.value_or(fallback);
}

// rope_theta, rope_scaling and partial_rotary_factor as transformers' rope init functions read them
// (modeling_rope_utils.py): rope_scaling's "rope_type" (or the older "type"); transformers 5 moves
// all of it into "rope_parameters" (rope_theta included), read the same way when present. Types
// other than default, linear and llama3 (dynamic, yarn, longrope...) are refused.
Status read_rope(const JsonObject& config, double default_theta, RopeSettings& rope) {
  ZINF_ASSIGN_OR_RETURN(rope.theta, number_or(config, "rope_theta", default_theta));
  ZINF_ASSIGN_OR_RETURN(rope.partial_rotary_factor, number_or(config, "partial_rotary_factor", 1.0));
  std::string_view scaling_key = "rope_scaling";
  if (config.has("rope_parameters") && !config.raw().at("rope_parameters").is_null()) scaling_key = "rope_parameters";
  if (!config.has(scaling_key) || config.raw().at(scaling_key).is_null()) return Status::ok();
  ZINF_ASSIGN_OR_RETURN(const JsonObject scaling, config.object(scaling_key));
  if (scaling_key == "rope_parameters") {
    ZINF_ASSIGN_OR_RETURN(rope.theta, number_or(scaling, "rope_theta", rope.theta));
    ZINF_ASSIGN_OR_RETURN(rope.partial_rotary_factor,
                          number_or(scaling, "partial_rotary_factor", rope.partial_rotary_factor));
  }
  const std::string_view type_key = scaling.has("rope_type") ? "rope_type" : "type";
  ZINF_ASSIGN_OR_RETURN(const std::optional<std::string> type, scaling.optional_string(type_key));
  const std::string kind = type.value_or("default");
  if (kind == "default") return Status::ok();
  if (kind == "linear") {
    rope.scaling = RopeScalingKind::kLinear;
  } else if (kind == "llama3") {
    rope.scaling = RopeScalingKind::kLlama3;
    ZINF_ASSIGN_OR_RETURN(rope.low_freq_factor, number_or(scaling, "low_freq_factor", 1.0));
    ZINF_ASSIGN_OR_RETURN(rope.high_freq_factor, number_or(scaling, "high_freq_factor", 4.0));
    ZINF_ASSIGN_OR_RETURN(rope.original_max_positions, number_or(scaling, "original_max_position_embeddings", 8192.0));
  } else {
    return Status::invalid_argument(fmt::format("{}: {} is not supported (allowed: default, linear, llama3)",
                                                scaling.field_path(type_key), zinf::quoted(kind)));
  }
  ZINF_ASSIGN_OR_RETURN(const std::optional<double> factor, scaling.optional_number("factor"));
  if (!factor) {
    return Status::invalid_argument(
        fmt::format("{}: required for rope_type {} (a positive number)", scaling.field_path("factor"), kind));
  }
  rope.factor = *factor;
  return Status::ok();
}

// GPT-2 (modeling_gpt2.py): LayerNorm with bias, learned positions, Conv1D projections that all carry
// a bias, GELU MLP of n_inner (None → 4·n_embd), lm_head tied to wte unless tie_word_embeddings is false.
Result<ModelShape> gpt2_shape(const JsonObject& config) {
  ModelShape shape;
  ZINF_ASSIGN_OR_RETURN(shape.layers, config.positive_int("n_layer"));
  ZINF_ASSIGN_OR_RETURN(shape.hidden, config.positive_int("n_embd"));
  ZINF_ASSIGN_OR_RETURN(shape.heads, config.positive_int("n_head"));
  ZINF_ASSIGN_OR_RETURN(const std::optional<std::int64_t> inner, config.optional_positive_int("n_inner"));
  ZINF_ASSIGN_OR_RETURN(shape.vocab, config.positive_int("vocab_size"));
  ZINF_ASSIGN_OR_RETURN(shape.max_positions, config.positive_int("n_positions"));
  ZINF_ASSIGN_OR_RETURN(shape.tied_embeddings, bool_or(config, "tie_word_embeddings", true));
  ZINF_RETURN_IF_ERROR(check_divides(config, "n_head", shape.heads, "n_embd", shape.hidden,
                                     "GPT-2 splits n_embd evenly over its heads"));
  shape.kv_heads = shape.heads;
  shape.head_dim = shape.hidden / shape.heads;
  shape.ffn_hidden = inner.value_or(4 * shape.hidden);
  shape.norm = NormKind::kLayerNorm;
  shape.mlp = MlpKind::kGelu;
  shape.position = PositionKind::kLearned;
  shape.qkv_bias = shape.attn_out_bias = shape.mlp_bias = true;
  ZINF_ASSIGN_OR_RETURN(shape.norm_eps, number_or(config, "layer_norm_epsilon", 1e-5));
  return shape;
}

// GPT-NeoX / Pythia (modeling_gpt_neox.py): LayerNorm with bias, rotary (no position table), fused
// query_key_value and dense with bias (attention_bias, default true), biased GELU MLP, and a separate
// embed_out head (tie_word_embeddings default false). use_parallel_residual rewires, adds nothing.
Result<ModelShape> gpt_neox_shape(const JsonObject& config) {
  ModelShape shape;
  ZINF_ASSIGN_OR_RETURN(shape.layers, config.positive_int("num_hidden_layers"));
  ZINF_ASSIGN_OR_RETURN(shape.hidden, config.positive_int("hidden_size"));
  ZINF_ASSIGN_OR_RETURN(shape.heads, config.positive_int("num_attention_heads"));
  ZINF_ASSIGN_OR_RETURN(shape.ffn_hidden, config.positive_int("intermediate_size"));
  ZINF_ASSIGN_OR_RETURN(shape.vocab, config.positive_int("vocab_size"));
  ZINF_ASSIGN_OR_RETURN(shape.max_positions, config.positive_int("max_position_embeddings"));
  ZINF_ASSIGN_OR_RETURN(shape.tied_embeddings, bool_or(config, "tie_word_embeddings", false));
  ZINF_ASSIGN_OR_RETURN(const bool attention_bias, bool_or(config, "attention_bias", true));
  ZINF_RETURN_IF_ERROR(check_divides(config, "num_attention_heads", shape.heads, "hidden_size", shape.hidden,
                                     "GPT-NeoX splits hidden_size evenly over its heads"));
  shape.kv_heads = shape.heads;
  shape.head_dim = shape.hidden / shape.heads;
  shape.norm = NormKind::kLayerNorm;
  shape.mlp = MlpKind::kGelu;
  shape.position = PositionKind::kRotary;
  shape.qkv_bias = shape.attn_out_bias = attention_bias;
  shape.mlp_bias = true;
  // GPT-NeoX rotates rotary_pct of each head (default 0.25) with base rotary_emb_base (10000).
  ZINF_ASSIGN_OR_RETURN(shape.norm_eps, number_or(config, "layer_norm_eps", 1e-5));
  ZINF_ASSIGN_OR_RETURN(shape.rope.theta, number_or(config, "rotary_emb_base", 10000.0));
  ZINF_ASSIGN_OR_RETURN(shape.rope.partial_rotary_factor, number_or(config, "rotary_pct", 0.25));
  return shape;
}

// Where a LLaMA-like family's biases come from.
enum class LlamaBiases {
  kFromConfig,  // llama: attention_bias on q, k, v and o; mlp_bias on gate, up and down (default false)
  kNone,        // mistral: its modules hard-code bias=False and it has no such keys
  kQkvOnly,     // qwen2: q, k, v biased, o and the MLP not (hard-coded as well)
};

// LLaMA, Mistral and Qwen2 (modeling_llama/mistral/qwen2.py): RMSNorm (weight only), rotary, gated
// SiLU MLP, grouped-query attention, untied head by default. They differ only in biases.
Result<ModelShape> llama_like_shape(const JsonObject& config, LlamaBiases biases) {
  ModelShape shape;
  ZINF_ASSIGN_OR_RETURN(shape.layers, config.positive_int("num_hidden_layers"));
  ZINF_ASSIGN_OR_RETURN(shape.hidden, config.positive_int("hidden_size"));
  ZINF_ASSIGN_OR_RETURN(shape.heads, config.positive_int("num_attention_heads"));
  ZINF_ASSIGN_OR_RETURN(const std::optional<std::int64_t> kv_heads,
                        config.optional_positive_int("num_key_value_heads"));
  ZINF_ASSIGN_OR_RETURN(const std::optional<std::int64_t> head_dim, config.optional_positive_int("head_dim"));
  ZINF_ASSIGN_OR_RETURN(shape.ffn_hidden, config.positive_int("intermediate_size"));
  ZINF_ASSIGN_OR_RETURN(shape.vocab, config.positive_int("vocab_size"));
  ZINF_ASSIGN_OR_RETURN(shape.max_positions, config.positive_int("max_position_embeddings"));
  ZINF_ASSIGN_OR_RETURN(shape.tied_embeddings, bool_or(config, "tie_word_embeddings", false));

  shape.kv_heads = kv_heads.value_or(shape.heads);
  ZINF_RETURN_IF_ERROR(check_divides(config, "num_key_value_heads", shape.kv_heads, "num_attention_heads", shape.heads,
                                     "grouped-query attention shares each key/value head among a whole number of "
                                     "query heads"));
  if (head_dim) {
    // An explicit head_dim decouples the attention width from hidden_size (Mistral-Nemo, Llama variants).
    shape.head_dim = *head_dim;
  } else {
    ZINF_RETURN_IF_ERROR(check_divides(config, "num_attention_heads", shape.heads, "hidden_size", shape.hidden,
                                       "without head_dim each head is hidden_size / num_attention_heads wide"));
    shape.head_dim = shape.hidden / shape.heads;
  }
  shape.norm = NormKind::kRmsNorm;
  shape.norm_bias = false;
  shape.mlp = MlpKind::kGated;
  shape.position = PositionKind::kRotary;
  // LlamaConfig, MistralConfig and Qwen2Config all default rms_norm_eps to 1e-6 and rope_theta to
  // 10000.0.
  ZINF_ASSIGN_OR_RETURN(shape.norm_eps, number_or(config, "rms_norm_eps", 1e-6));
  ZINF_RETURN_IF_ERROR(read_rope(config, 10000.0, shape.rope));
  switch (biases) {
    case LlamaBiases::kFromConfig: {
      ZINF_ASSIGN_OR_RETURN(const bool attention_bias, bool_or(config, "attention_bias", false));
      ZINF_ASSIGN_OR_RETURN(shape.mlp_bias, bool_or(config, "mlp_bias", false));
      shape.qkv_bias = shape.attn_out_bias = attention_bias;
      break;
    }
    case LlamaBiases::kNone:
      shape.qkv_bias = shape.attn_out_bias = shape.mlp_bias = false;
      break;
    case LlamaBiases::kQkvOnly:
      shape.qkv_bias = true;
      shape.attn_out_bias = shape.mlp_bias = false;
      break;
  }
  return shape;
}

Result<ModelShape> family_shape(const JsonObject& config, Family family) {
  switch (family) {
    case Family::kGpt2:
      return gpt2_shape(config);
    case Family::kGptNeox:
      return gpt_neox_shape(config);
    case Family::kLlama:
      return llama_like_shape(config, LlamaBiases::kFromConfig);
    case Family::kMistral:
      return llama_like_shape(config, LlamaBiases::kNone);
    case Family::kQwen2:
      return llama_like_shape(config, LlamaBiases::kQkvOnly);
  }
  return Status::internal("model_shape_from_hf_config: unhandled model family");
}

// The conversion without the source prefix; errors name fields relative to the config's top level.
Result<ModelShape> convert(const JsonObject& config) {
  ZINF_RETURN_IF_ERROR(reject_mixture_of_experts(config));
  ZINF_ASSIGN_OR_RETURN(const FamilyName family, find_family(config));
  ZINF_ASSIGN_OR_RETURN(ModelShape shape, family_shape(config, family.family));
  ZINF_ASSIGN_OR_RETURN(const std::optional<std::string> name_or_path,
                        config.optional_printable_string("_name_or_path"));
  shape.name = name_or_path && !name_or_path->empty() ? *name_or_path : std::string(family.model_type);
  // The per-key checks above cover sign and divisibility; this adds ModelShape's size limits.
  ZINF_RETURN_IF_ERROR(validate(shape));
  return shape;
}

}  // namespace

Result<ModelShape> model_shape_from_hf_config(const nlohmann::json& config, std::string_view source) {
  // A top-level non-object is named by the source itself ("<source>: expected a JSON object, ...").
  if (!config.is_object()) return JsonObject::wrap(config, std::string(source)).status();
  // An empty path makes field paths the bare keys, as they appear in the file.
  const JsonObject root = JsonObject::wrap(config, "").value();
  Result<ModelShape> shape = convert(root);
  if (!shape.is_ok()) return shape.status().with_context(source);
  return shape;
}

Result<ModelShape> load_hf_config(const std::string& path) {
  // read_json_file's errors already start with the path (and line:column for syntax errors).
  ZINF_ASSIGN_OR_RETURN(const nlohmann::json config, read_json_file(path));
  return model_shape_from_hf_config(config, path);
}

}  // namespace zinf::spec
