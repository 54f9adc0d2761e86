#include "libengine/train/checkpoint_model.h"

#include <fmt/format.h>

#include <functional>
#include <optional>

#include "libengine/spec/json_input.h"
#include "libengine/spec/scenario_model.h"

namespace zinf::train {
namespace {

using nlohmann::json;

// A record written before checkpoints used the scenario's arch form ({"norm", "mlp": "gated",
// "position", "norm_bias", "norm_eps", "rope": {...}}) as that form, so one parser reads both.
// A record without norm_eps was written either before the Llama-family options (GPT-2 shapes only:
// LayerNorm with bias, eps 1e-5, learned positions — the gpt2 family's defaults) or by the first
// zinf that had them, whose record of an RMSNorm or rotary model lacks what its config.json needs;
// the latter is refused.
Result<json> arch_form_of_legacy_record(const json& s, const std::function<Status(std::string)>& bad) {
  json out{{"arch", "gpt2"}};
  for (const char* key :
       {"name", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab", "max_positions", "norm",
        "position", "qkv_bias", "attn_out_bias", "mlp_bias", "tied_embeddings", "norm_eps"}) {
    if (s.contains(key)) out[key] = s[key];
  }
  if (s.contains("mlp")) out["mlp"] = s["mlp"] == "gated" ? json("swiglu") : s["mlp"];
  const bool layernorm = s.value("norm", json()) == "layernorm";
  if (!s.contains("norm_eps")) {
    if (!layernorm || s.value("position", json()) != "learned") {
      return bad(
          "records no model.shape.norm_eps / rope (written by a zinf that did not record them for rmsnorm or "
          "rotary models); resume it with this zinf and save again to export it");
    }
    return out;
  }
  if (s.value("norm_bias", json(layernorm)) != json(layernorm)) {
    return bad("model.shape.norm_bias must be true for layernorm and false for rmsnorm");
  }
  if (!s.contains("rope") || !s["rope"].is_object()) return bad("model.shape.rope is missing or not an object");
  const json& rope = s["rope"];
  out["rope_theta"] = rope.value("theta", json());
  out["partial_rotary_factor"] = rope.value("partial_rotary_factor", json());
  const json scaling = rope.value("scaling", json());
  if (scaling == "none") {
    out["rope_scaling"] = nullptr;
  } else {
    out["rope_scaling"] = {{"type", scaling}, {"factor", rope.value("factor", json())}};
    if (scaling == "llama3") {
      for (const char* key : {"low_freq_factor", "high_freq_factor", "original_max_positions"}) {
        out["rope_scaling"][key] = rope.value(key, json());
      }
    }
  }
  return out;
}

Result<Shape> param_dims(const json& param, const std::function<Status(std::string)>& bad) {
  if (!param.is_array() || param.size() != 2 || !param[0].is_string() || !param[1].is_array() || param[1].size() < 1 ||
      param[1].size() > 4) {
    return bad(fmt::format("model.params entry {} is not [name, [dims]]", param.dump()));
  }
  std::int64_t d[4] = {0, 0, 0, 0};
  for (std::size_t i = 0; i < param[1].size(); ++i) {
    const std::optional<std::int64_t> v = spec::exact_int64(param[1][i]);
    if (!v || *v < 0) return bad(fmt::format("model.params entry {} has a bad dimension", param.dump()));
    d[i] = *v;
  }
  const std::size_t rank = param[1].size();
  return rank == 1   ? Shape{d[0]}
         : rank == 2 ? Shape{d[0], d[1]}
         : rank == 3 ? Shape{d[0], d[1], d[2]}
                     : Shape{d[0], d[1], d[2], d[3]};
}

}  // namespace

json checkpoint_model_json(const spec::ModelShape& s, const model::ParamTable& table) {
  json params = json::array();
  for (const model::ParamInfo& info : table.params()) {
    json dims = json::array();
    for (int axis = 0; axis < info.shape.rank(); ++axis) dims.push_back(info.shape[axis]);
    params.push_back({info.name, std::move(dims)});
  }
  return {{"shape", spec::decoder_model_json(s)}, {"params", std::move(params)}};
}

Result<CheckpointModel> read_checkpoint_model(const json& extra, const std::string& file) {
  const std::function<Status(std::string)> bad = [&](std::string why) {
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
  // A record names no config file to read: the arch form only.
  if (s.contains("hf_config")) return bad("model.shape.hf_config: a checkpoint's model is recorded in the arch form");
  json legacy;
  if (!s.contains("arch")) {
    ZINF_ASSIGN_OR_RETURN(legacy, arch_form_of_legacy_record(s, bad));
  }
  const json& arch_form = s.contains("arch") ? s : legacy;
  CheckpointModel out;
  ZINF_ASSIGN_OR_RETURN(const spec::JsonObject view, spec::JsonObject::wrap(arch_form, "model.shape"));
  Result<spec::ModelShape> shape =
      spec::parse_decoder_model(view, "", arch_form.value("max_positions", std::int64_t{0}));
  if (!shape.is_ok()) return bad(shape.status().message());
  out.shape = std::move(shape).value();
  for (const json& param : model["params"]) {
    ZINF_ASSIGN_OR_RETURN(Shape dims, param_dims(param, bad));
    out.table.add({.name = param[0].get<std::string>(), .shape = dims});
  }
  return out;
}

}  // namespace zinf::train
