// Scenario to JSON: to_json() writes a scenario back in the schema parse_scenario() reads (every
// default filled in), and fingerprint() hashes what decides the training curve, so a checkpoint is
// resumed only by the scenario that wrote it.
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <utility>

#include "libengine/spec/scenario.h"
#include "libengine/spec/scenario_model.h"

namespace zinf::spec {
namespace {

using nlohmann::json;

json shape_fingerprint_json(const ModelShape& s) {
  json out{{"layers", s.layers},
           {"hidden", s.hidden},
           {"heads", s.heads},
           {"kv_heads", s.kv_heads},
           {"head_dim", s.head_dim},
           {"ffn_hidden", s.ffn_hidden},
           {"vocab", s.vocab},
           {"max_positions", s.max_positions},
           {"norm", static_cast<int>(s.norm)},
           {"mlp", static_cast<int>(s.mlp)},
           {"position", static_cast<int>(s.position)},
           {"qkv_bias", s.qkv_bias},
           {"attn_out_bias", s.attn_out_bias},
           {"mlp_bias", s.mlp_bias},
           {"tied_embeddings", s.tied_embeddings}};
  // The fields a GPT-2-like shape leaves at their defaults join only for other shapes, so the
  // fingerprints of existing GPT-2 checkpoints do not change.
  // The name is not part of the identity.
  ModelShape unnamed = s;
  unnamed.name = fmt::format("gpt-like {}x{}", s.layers, s.hidden);
  if (!is_gpt_like(unnamed)) {
    out["decoder"] = decoder_model_json(s);
    out["decoder"].erase("name");
  }
  return out;
}

json data_json(const ScenarioData& d) {
  if (d.source == DataSource::kFile) return json{{"source", data_source_name(d.source)}, {"path", d.path}};
  return json{
      {"source", data_source_name(d.source)}, {"successors", d.successors}, {"skew", d.skew}, {"seed", d.chain_seed}};
}

json optimizer_json(const OptimizerConfig& o) {
  return json{{"type", optimizer_type_name(o.type)},
              {"lr", o.lr},
              {"beta1", o.beta1},
              {"beta2", o.beta2},
              {"eps", o.eps},
              {"weight_decay", o.weight_decay},
              {"grad_clip", o.grad_clip},
              {"schedule", json{{"kind", optim::lr_schedule_kind_name(o.schedule.kind)},
                                {"warmup_steps", o.schedule.warmup_steps},
                                {"min_lr_ratio", o.schedule.min_lr_ratio}}}};
}

json loss_scale_json(const LossScaleConfig& l) {
  return json{{"initial", l.initial}, {"growth_interval", l.growth_interval}};
}

}  // namespace

nlohmann::json to_json(const Scenario& s) {
  json model;
  if (s.params_requested) {
    model = json{{"params", *s.params_requested}, {"vocab", s.shape.vocab}};
  } else if (!is_gpt_like(s.shape)) {
    model = decoder_model_json(s.shape);
  } else {
    model = json{{"layers", s.shape.layers},
                 {"hidden", s.shape.hidden},
                 {"heads", s.shape.heads},
                 {"vocab", s.shape.vocab},
                 {"max_positions", s.shape.max_positions},
                 {"tied_embeddings", s.shape.tied_embeddings},
                 {"bias", s.shape.qkv_bias}};
  }
  json out{{"name", s.name},
           {"model", std::move(model)},
           {"data", data_json(s.data)},
           {"batch", s.batch},
           {"seq", s.seq},
           {"steps", s.steps},
           {"precision", dtype_name(s.precision)},
           {"optimizer", optimizer_json(s.optimizer)},
           {"seed", s.seed},
           {"device", device::device_kind_name(s.device)},
           {"threads", s.threads},
           {"activation_checkpointing", s.activation_checkpointing},
           {"tiling", s.tiling_auto ? json("auto") : json(s.tiling)},
           {"eval", json{{"every", s.eval.every}, {"batches", s.eval.batches}}}};
  if (s.precision == DType::kF16) out["loss_scale"] = loss_scale_json(s.loss_scale);
  if (s.device_memory_bytes) out["device_memory"] = *s.device_memory_bytes;
  if (!s.init.safetensors.empty()) out["init"] = json{{"safetensors", s.init.safetensors}};
  if (!s.checkpoint.dir.empty()) {
    out["checkpoint"] = json{{"dir", s.checkpoint.dir},
                             {"every", s.checkpoint.every},
                             {"keep_last", s.checkpoint.keep_last},
                             {"resume", s.checkpoint.resume},
                             {"strict", s.checkpoint.strict}};
  }
  if (s.zero != ZeroConfig{}) out["zero"] = to_json(s.zero);
  json output{{"log_every", s.output.log_every}};
  if (!s.output.record.empty()) output["record"] = s.output.record;
  out["output"] = std::move(output);
  return out;
}

std::string fingerprint(const Scenario& scenario) {
  json identity{{"version", 1},
                {"model", shape_fingerprint_json(scenario.shape)},
                {"data", data_json(scenario.data)},
                {"batch", scenario.batch},
                {"seq", scenario.seq},
                {"precision", dtype_name(scenario.precision)},
                {"optimizer", optimizer_json(scenario.optimizer)},
                {"seed", scenario.seed}};
  if (scenario.precision == DType::kF16) identity["loss_scale"] = loss_scale_json(scenario.loss_scale);
  // FNV-1a over the canonical dump (nlohmann sorts object keys): stable across runs and builds.
  std::uint64_t hash = 14695981039346656037ULL;
  for (const char c : identity.dump()) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  return fmt::format("{:016x}", hash);
}

}  // namespace zinf::spec
