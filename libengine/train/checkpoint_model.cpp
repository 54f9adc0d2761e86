#include "libengine/train/checkpoint_model.h"

#include <fmt/format.h>

#include "libengine/spec/json_input.h"

namespace zinf::train {
namespace {

using nlohmann::json;

// The enums as their names, so the record reads without the source at hand.
constexpr const char* kNorms[] = {"layernorm", "rmsnorm"};
constexpr const char* kMlps[] = {"gelu", "gated"};
constexpr const char* kPositions[] = {"learned", "rotary"};
constexpr const char* kRopeScalings[] = {"none", "linear", "llama3"};

template <std::size_t N>
std::optional<int> index_of(const char* const (&names)[N], const json& value) {
  if (!value.is_string()) return std::nullopt;
  for (std::size_t i = 0; i < N; ++i) {
    if (value.get<std::string>() == names[i]) return static_cast<int>(i);
  }
  return std::nullopt;
}

}  // namespace

json checkpoint_model_json(const spec::ModelShape& s, const model::ParamTable& table) {
  json params = json::array();
  for (const model::ParamInfo& info : table.params()) {
    json dims = json::array();
    for (int axis = 0; axis < info.shape.rank(); ++axis) dims.push_back(info.shape[axis]);
    params.push_back({info.name, std::move(dims)});
  }
  const json shape = {{"name", s.name},
                      {"layers", s.layers},
                      {"hidden", s.hidden},
                      {"heads", s.heads},
                      {"kv_heads", s.kv_heads},
                      {"head_dim", s.head_dim},
                      {"ffn_hidden", s.ffn_hidden},
                      {"vocab", s.vocab},
                      {"max_positions", s.max_positions},
                      {"norm", kNorms[static_cast<int>(s.norm)]},
                      {"mlp", kMlps[static_cast<int>(s.mlp)]},
                      {"position", kPositions[static_cast<int>(s.position)]},
                      {"qkv_bias", s.qkv_bias},
                      {"attn_out_bias", s.attn_out_bias},
                      {"mlp_bias", s.mlp_bias},
                      {"tied_embeddings", s.tied_embeddings},
                      {"norm_bias", s.norm_bias},
                      {"norm_eps", s.norm_eps},
                      {"rope",
                       {{"theta", s.rope.theta},
                        {"scaling", kRopeScalings[static_cast<int>(s.rope.scaling)]},
                        {"factor", s.rope.factor},
                        {"low_freq_factor", s.rope.low_freq_factor},
                        {"high_freq_factor", s.rope.high_freq_factor},
                        {"original_max_positions", s.rope.original_max_positions},
                        {"partial_rotary_factor", s.rope.partial_rotary_factor}}}};
  return {{"shape", shape}, {"params", std::move(params)}};
}

Result<CheckpointModel> read_checkpoint_model(const json& extra, const std::string& file) {
  const auto bad = [&](std::string why) {
    return Status::invalid_argument(fmt::format("checkpoint {}: {}", file, why));
  };
  if (!extra.is_object() || !extra.contains("model")) {
    return bad(
        "records no model (it was written by a zinf before export existed); resume it with this zinf and save "
        "again to export it");
  }
  const json& model = extra["model"];
  if (!model.is_object() || !model.contains("shape") || !model.contains("params") || !model["shape"].is_object() ||
      !model["params"].is_array()) {
    return bad("its model record is not {\"shape\", \"params\"}");
  }
  const json& s = model["shape"];
  CheckpointModel out;
  const auto integer = [&](const char* key, std::int64_t& into) -> Status {
    const std::optional<std::int64_t> v = spec::exact_int64(s.value(key, json()));
    if (!v) return bad(fmt::format("model.shape.{} is missing or not an integer", key));
    into = *v;
    return Status::ok();
  };
  const auto flag = [&](const char* key, bool& into) -> Status {
    if (!s.contains(key) || !s[key].is_boolean()) return bad(fmt::format("model.shape.{} is not a boolean", key));
    into = s[key].get<bool>();
    return Status::ok();
  };
  spec::ModelShape& shape = out.shape;
  shape.name = s.value("name", json("")).is_string() ? s.value("name", std::string()) : std::string();
  ZINF_RETURN_IF_ERROR(integer("layers", shape.layers));
  ZINF_RETURN_IF_ERROR(integer("hidden", shape.hidden));
  ZINF_RETURN_IF_ERROR(integer("heads", shape.heads));
  ZINF_RETURN_IF_ERROR(integer("kv_heads", shape.kv_heads));
  ZINF_RETURN_IF_ERROR(integer("head_dim", shape.head_dim));
  ZINF_RETURN_IF_ERROR(integer("ffn_hidden", shape.ffn_hidden));
  ZINF_RETURN_IF_ERROR(integer("vocab", shape.vocab));
  ZINF_RETURN_IF_ERROR(integer("max_positions", shape.max_positions));
  const std::optional<int> norm = index_of(kNorms, s.value("norm", json()));
  const std::optional<int> mlp = index_of(kMlps, s.value("mlp", json()));
  const std::optional<int> position = index_of(kPositions, s.value("position", json()));
  if (!norm || !mlp || !position) return bad("model.shape.norm, mlp or position is not a known kind");
  shape.norm = static_cast<spec::NormKind>(*norm);
  shape.mlp = static_cast<spec::MlpKind>(*mlp);
  shape.position = static_cast<spec::PositionKind>(*position);
  ZINF_RETURN_IF_ERROR(flag("qkv_bias", shape.qkv_bias));
  ZINF_RETURN_IF_ERROR(flag("attn_out_bias", shape.attn_out_bias));
  ZINF_RETURN_IF_ERROR(flag("mlp_bias", shape.mlp_bias));
  ZINF_RETURN_IF_ERROR(flag("tied_embeddings", shape.tied_embeddings));
  // norm_bias, norm_eps and rope are recorded since the Llama-family options. A checkpoint without
  // them was written either before those options (GPT-2 shapes only: LayerNorm with bias, eps 1e-5,
  // learned positions — the ModelShape defaults) or by the first zinf that had them, whose record
  // of an RMSNorm or rotary model lacks what its config.json needs; the latter is refused.
  if (!s.contains("norm_eps")) {
    if (shape.norm != spec::NormKind::kLayerNorm || shape.position != spec::PositionKind::kLearned) {
      return bad(
          "records no model.shape.norm_eps / rope (written by a zinf that did not record them for rmsnorm or "
          "rotary models); resume it with this zinf and save again to export it");
    }
    shape.norm_bias = true;
  } else {
    const auto number = [&](const json& object, const char* key, double& into) -> Status {
      if (!object.contains(key) || !object[key].is_number()) {
        return bad(fmt::format("model.shape.{} is missing or not a number", key));
      }
      into = object[key].get<double>();
      return Status::ok();
    };
    ZINF_RETURN_IF_ERROR(flag("norm_bias", shape.norm_bias));
    ZINF_RETURN_IF_ERROR(number(s, "norm_eps", shape.norm_eps));
    if (!s.contains("rope") || !s["rope"].is_object()) return bad("model.shape.rope is missing or not an object");
    const json& rope = s["rope"];
    const std::optional<int> scaling = index_of(kRopeScalings, rope.value("scaling", json()));
    if (!scaling) return bad("model.shape.rope.scaling is not none, linear or llama3");
    shape.rope.scaling = static_cast<spec::RopeScalingKind>(*scaling);
    ZINF_RETURN_IF_ERROR(number(rope, "theta", shape.rope.theta));
    ZINF_RETURN_IF_ERROR(number(rope, "factor", shape.rope.factor));
    ZINF_RETURN_IF_ERROR(number(rope, "low_freq_factor", shape.rope.low_freq_factor));
    ZINF_RETURN_IF_ERROR(number(rope, "high_freq_factor", shape.rope.high_freq_factor));
    ZINF_RETURN_IF_ERROR(number(rope, "original_max_positions", shape.rope.original_max_positions));
    ZINF_RETURN_IF_ERROR(number(rope, "partial_rotary_factor", shape.rope.partial_rotary_factor));
  }
  if (const Status valid = spec::validate(shape); !valid.is_ok()) return bad(valid.message());
  for (const json& param : model["params"]) {
    if (!param.is_array() || param.size() != 2 || !param[0].is_string() || !param[1].is_array() ||
        param[1].size() < 1 || param[1].size() > 4) {
      return bad(fmt::format("model.params entry {} is not [name, [dims]]", param.dump()));
    }
    std::int64_t d[4] = {0, 0, 0, 0};
    for (std::size_t i = 0; i < param[1].size(); ++i) {
      const std::optional<std::int64_t> v = spec::exact_int64(param[1][i]);
      if (!v || *v < 0) return bad(fmt::format("model.params entry {} has a bad dimension", param.dump()));
      d[i] = *v;
    }
    const std::size_t rank = param[1].size();
    const Shape dims = rank == 1   ? Shape{d[0]}
                       : rank == 2 ? Shape{d[0], d[1]}
                       : rank == 3 ? Shape{d[0], d[1], d[2]}
                                   : Shape{d[0], d[1], d[2], d[3]};
    out.table.add({.name = param[0].get<std::string>(), .shape = dims});
  }
  return out;
}

}  // namespace zinf::train
