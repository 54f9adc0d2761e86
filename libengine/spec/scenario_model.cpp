#include "libengine/spec/scenario_model.h"

#include <array>
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "libengine/core/quote.h"
#include "libengine/spec/hf_config.h"
#include "libengine/spec/scenario.h"

namespace zinf::spec {
namespace {

using nlohmann::json;

constexpr std::int64_t kMaxDim = std::int64_t{1} << 24;
constexpr std::int64_t kMaxLayers = 100000;

const std::vector<std::string_view> kFieldKeys{"hf_config",
                                               "arch",
                                               "name",
                                               "layers",
                                               "hidden",
                                               "heads",
                                               "kv_heads",
                                               "head_dim",
                                               "ffn_hidden",
                                               "vocab",
                                               "max_positions",
                                               "tied_embeddings",
                                               "norm",
                                               "norm_eps",
                                               "mlp",
                                               "position",
                                               "rope_theta",
                                               "rope_scaling",
                                               "partial_rotary_factor",
                                               "qkv_bias",
                                               "attn_out_bias",
                                               "mlp_bias",
                                               "bias"};
const std::vector<std::string_view> kScalingKeys{"type", "factor", "low_freq_factor", "high_freq_factor",
                                                 "original_max_positions"};

bool given(const JsonObject& object, std::string_view key) {
  return object.has(key) && !object.raw().at(key).is_null();
}

Status not_allowed(const JsonObject& object, std::string_view key, std::string_view allowed) {
  return Status::invalid_argument(fmt::format("{}: expected {}, found {}", object.field_path(key), allowed,
                                              describe_json_value(object.raw().at(key))));
}

Status set_int(const JsonObject& object, std::string_view key, std::int64_t max, std::int64_t& field) {
  ZINF_ASSIGN_OR_RETURN(const std::optional<std::int64_t> value, object.optional_positive_int(key));
  if (!value) return Status::ok();
  if (*value > max) {
    return Status::invalid_argument(
        fmt::format("{}: {} is too large (at most {})", object.field_path(key), *value, max));
  }
  field = *value;
  return Status::ok();
}

Status set_bool(const JsonObject& object, std::string_view key, bool& field) {
  ZINF_ASSIGN_OR_RETURN(const std::optional<bool> value, object.optional_bool(key));
  if (value) field = *value;
  return Status::ok();
}

Status set_positive(const JsonObject& object, std::string_view key, double& field) {
  ZINF_ASSIGN_OR_RETURN(const std::optional<double> value, object.optional_number(key));
  if (!value) return Status::ok();
  if (!(*value > 0)) return not_allowed(object, key, "a positive number");
  field = *value;
  return Status::ok();
}

// One of `names` (index into them), or nullopt when absent.
Result<std::optional<std::size_t>> name_of(const JsonObject& object, std::string_view key,
                                           const std::vector<std::string_view>& names) {
  if (!given(object, key)) return std::optional<std::size_t>{};
  const json& value = object.raw().at(key);
  if (value.is_string()) {
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (names[i] == value.get<std::string>()) return std::optional<std::size_t>(i);
    }
  }
  std::string listed;
  for (std::string_view name : names) listed += fmt::format("{}\"{}\"", listed.empty() ? "" : ", ", name);
  return not_allowed(object, key, fmt::format("one of {}", listed));
}

const std::vector<std::string_view> kArchNames{"gpt2", "llama", "mistral", "qwen2"};

// The family's defaults for the arch form, before the fields are read.
ModelShape arch_defaults(std::size_t arch) {
  ModelShape s;
  if (arch == 0) return s;  // gpt2: ModelShape's own defaults are GPT-2's
  s.norm = NormKind::kRmsNorm;
  s.norm_bias = false;
  s.norm_eps = 1e-6;
  s.mlp = MlpKind::kGated;
  s.position = PositionKind::kRotary;
  s.qkv_bias = arch == 3;  // qwen2 biases q, k and v only
  s.attn_out_bias = s.mlp_bias = false;
  s.tied_embeddings = false;
  return s;
}

Status read_rope_scaling(const JsonObject& model, RopeSettings& rope) {
  if (!model.has("rope_scaling")) return Status::ok();
  if (model.raw().at("rope_scaling").is_null()) {
    rope.scaling = RopeScalingKind::kNone;
    return Status::ok();
  }
  ZINF_ASSIGN_OR_RETURN(const JsonObject scaling, model.object("rope_scaling"));
  ZINF_RETURN_IF_ERROR(scaling.reject_unknown_keys(kScalingKeys));
  ZINF_ASSIGN_OR_RETURN(const std::optional<std::size_t> type, name_of(scaling, "type", {"none", "linear", "llama3"}));
  if (!type) {
    return Status::invalid_argument(fmt::format(
        "{}: required field is missing; one of \"none\", \"linear\", \"llama3\"", scaling.field_path("type")));
  }
  rope.scaling = *type == 0 ? RopeScalingKind::kNone : *type == 1 ? RopeScalingKind::kLinear : RopeScalingKind::kLlama3;
  ZINF_RETURN_IF_ERROR(set_positive(scaling, "factor", rope.factor));
  ZINF_RETURN_IF_ERROR(set_positive(scaling, "low_freq_factor", rope.low_freq_factor));
  ZINF_RETURN_IF_ERROR(set_positive(scaling, "high_freq_factor", rope.high_freq_factor));
  return set_positive(scaling, "original_max_positions", rope.original_max_positions);
}

// Every field given in `model` over `s`.
Status apply_fields(const JsonObject& model, ModelShape& s) {
  if (given(model, "name")) {
    ZINF_ASSIGN_OR_RETURN(s.name, model.printable_string("name"));
  }
  ZINF_RETURN_IF_ERROR(set_int(model, "layers", kMaxLayers, s.layers));
  ZINF_RETURN_IF_ERROR(set_int(model, "hidden", kMaxDim, s.hidden));
  ZINF_RETURN_IF_ERROR(set_int(model, "heads", kMaxDim, s.heads));
  ZINF_RETURN_IF_ERROR(set_int(model, "kv_heads", kMaxDim, s.kv_heads));
  ZINF_RETURN_IF_ERROR(set_int(model, "head_dim", kMaxDim, s.head_dim));
  ZINF_RETURN_IF_ERROR(set_int(model, "ffn_hidden", kMaxDim, s.ffn_hidden));
  ZINF_RETURN_IF_ERROR(set_int(model, "vocab", kMaxDim, s.vocab));
  ZINF_RETURN_IF_ERROR(set_int(model, "max_positions", kMaxDim, s.max_positions));
  ZINF_RETURN_IF_ERROR(set_bool(model, "tied_embeddings", s.tied_embeddings));
  ZINF_ASSIGN_OR_RETURN(const std::optional<std::size_t> norm, name_of(model, "norm", {"layernorm", "rmsnorm"}));
  if (norm) {
    s.norm = *norm == 0 ? NormKind::kLayerNorm : NormKind::kRmsNorm;
    s.norm_bias = *norm == 0;
  }
  ZINF_RETURN_IF_ERROR(set_positive(model, "norm_eps", s.norm_eps));
  ZINF_ASSIGN_OR_RETURN(const std::optional<std::size_t> mlp, name_of(model, "mlp", {"gelu", "swiglu"}));
  if (mlp) s.mlp = *mlp == 0 ? MlpKind::kGelu : MlpKind::kGated;
  ZINF_ASSIGN_OR_RETURN(const std::optional<std::size_t> position, name_of(model, "position", {"learned", "rotary"}));
  if (position) s.position = *position == 0 ? PositionKind::kLearned : PositionKind::kRotary;
  ZINF_RETURN_IF_ERROR(set_positive(model, "rope_theta", s.rope.theta));
  ZINF_RETURN_IF_ERROR(read_rope_scaling(model, s.rope));
  ZINF_RETURN_IF_ERROR(set_positive(model, "partial_rotary_factor", s.rope.partial_rotary_factor));
  if (given(model, "bias")) {
    ZINF_ASSIGN_OR_RETURN(const std::optional<bool> bias, model.optional_bool("bias"));
    s.qkv_bias = s.attn_out_bias = s.mlp_bias = bias.value_or(true);
  }
  ZINF_RETURN_IF_ERROR(set_bool(model, "qkv_bias", s.qkv_bias));
  ZINF_RETURN_IF_ERROR(set_bool(model, "attn_out_bias", s.attn_out_bias));
  return set_bool(model, "mlp_bias", s.mlp_bias);
}

// validate(ModelShape) names fields "model.<field>"; here they live under the object's path.
Status in_model(const JsonObject& model, const Status& status) {
  if (status.is_ok()) return status;
  if (status.message().rfind("model.", 0) == 0) {
    return {status.code(), fmt::format("{}.{}", model.path(), status.message().substr(6))};
  }
  return status.with_context(model.path());
}

}  // namespace

bool is_decoder_model(const JsonObject& model) { return model.has("hf_config") || model.has("arch"); }

Result<ModelShape> parse_decoder_model(const JsonObject& model, std::string_view scenario_dir, std::int64_t seq) {
  ZINF_RETURN_IF_ERROR(model.reject_unknown_keys(kFieldKeys));
  ModelShape shape;
  if (model.has("hf_config")) {
    if (model.has("arch")) {
      return Status::invalid_argument(fmt::format(
          "{}: not allowed together with hf_config (the config names its family)", model.field_path("arch")));
    }
    ZINF_ASSIGN_OR_RETURN(const std::string given_path, model.printable_string("hf_config"));
    std::filesystem::path path(given_path);
    if (path.is_relative() && !scenario_dir.empty()) path = std::filesystem::path(std::string(scenario_dir)) / path;
    ZINF_ASSIGN_OR_RETURN(const json config, read_json_file(path.string()));
    if (config.is_object() && config.value("model_type", std::string()) == "gpt_neox") {
      return Status::invalid_argument(fmt::format(
          "{}: {} is a gpt_neox config; GPT-NeoX's parallel residual is not implemented by the model (it plans with "
          "zinf plan --hf-config, it does not train; trainable: gpt2, llama, mistral, qwen2)",
          model.field_path("hf_config"), zinf::quoted(given_path)));
    }
    Result<ModelShape> from_config = model_shape_from_hf_config(config, path.string());
    if (!from_config.is_ok()) return from_config.status().with_context(model.field_path("hf_config"));
    shape = std::move(from_config).value();
  } else {
    ZINF_ASSIGN_OR_RETURN(const std::optional<std::size_t> arch, name_of(model, "arch", kArchNames));
    shape = arch_defaults(*arch);
    for (std::string_view key : {"layers", "hidden", "heads"}) {
      if (!given(model, key)) {
        return Status::invalid_argument(fmt::format(
            "{}: required field is missing; the arch form needs layers, hidden and heads", model.field_path(key)));
      }
    }
    shape.vocab = kScenarioDefaultVocab;
    shape.max_positions = seq;
    shape.name =
        fmt::format("{} {}x{}", kArchNames[*arch], model.raw().at("layers").dump(), model.raw().at("hidden").dump());
  }
  ZINF_RETURN_IF_ERROR(apply_fields(model, shape));
  if (!model.has("hf_config")) {
    // Fields left out follow the ones given: one K/V head per query head, hd = hidden / heads, 4C MLP.
    if (!given(model, "kv_heads")) shape.kv_heads = shape.heads;
    if (!given(model, "head_dim")) {
      if (shape.hidden % shape.heads != 0) {
        return Status::invalid_argument(fmt::format("{}: {} does not divide model.hidden {} (or give head_dim)",
                                                    model.field_path("heads"), shape.heads, shape.hidden));
      }
      shape.head_dim = shape.hidden / shape.heads;
    }
    if (!given(model, "ffn_hidden")) shape.ffn_hidden = 4 * shape.hidden;
  }
  ZINF_RETURN_IF_ERROR(in_model(model, validate(shape)));
  return shape;
}

bool is_gpt_like(const ModelShape& s) {
  ModelShape like = gpt_like_shape(s.layers, s.hidden, s.heads, s.vocab, s.max_positions);
  like.name = fmt::format("gpt-like {}x{}", s.layers, s.hidden);
  like.tied_embeddings = s.tied_embeddings;
  like.qkv_bias = like.attn_out_bias = like.mlp_bias = s.qkv_bias;
  return s.heads > 0 && s.hidden % s.heads == 0 && s.name == like.name && s.kv_heads == like.kv_heads &&
         s.head_dim == like.head_dim && s.ffn_hidden == like.ffn_hidden && s.norm == like.norm &&
         s.norm_bias == like.norm_bias && s.norm_eps == like.norm_eps && s.mlp == like.mlp &&
         s.position == like.position && s.attn_out_bias == like.attn_out_bias && s.mlp_bias == like.mlp_bias;
}

json decoder_model_json(const ModelShape& s) {
  const RopeSettings& r = s.rope;
  json scaling = nullptr;
  if (r.scaling != RopeScalingKind::kNone) {
    scaling = json{{"type", r.scaling == RopeScalingKind::kLinear ? "linear" : "llama3"}, {"factor", r.factor}};
    if (r.scaling == RopeScalingKind::kLlama3) {
      scaling["low_freq_factor"] = r.low_freq_factor;
      scaling["high_freq_factor"] = r.high_freq_factor;
      scaling["original_max_positions"] = r.original_max_positions;
    }
  }
  // "llama" as the base: every field is written, so the family's defaults do not matter.
  return json{{"arch", "llama"},
              {"name", s.name},
              {"layers", s.layers},
              {"hidden", s.hidden},
              {"heads", s.heads},
              {"kv_heads", s.kv_heads},
              {"head_dim", s.head_dim},
              {"ffn_hidden", s.ffn_hidden},
              {"vocab", s.vocab},
              {"max_positions", s.max_positions},
              {"tied_embeddings", s.tied_embeddings},
              {"norm", s.norm == NormKind::kLayerNorm ? "layernorm" : "rmsnorm"},
              {"norm_eps", s.norm_eps},
              {"mlp", s.mlp == MlpKind::kGelu ? "gelu" : "swiglu"},
              {"position", s.position == PositionKind::kLearned ? "learned" : "rotary"},
              {"rope_theta", r.theta},
              {"rope_scaling", scaling},
              {"partial_rotary_factor", r.partial_rotary_factor},
              {"qkv_bias", s.qkv_bias},
              {"attn_out_bias", s.attn_out_bias},
              {"mlp_bias", s.mlp_bias}};
}

}  // namespace zinf::spec
