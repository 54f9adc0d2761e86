// The decoder forms of a scenario's "model" (scenarios/README.md):
//   {"hf_config": "path/config.json", <overrides>}   a Hugging Face config (hf_config.h), path
//                                                    relative to the scenario file, any field below
//                                                    overriding what the config says;
//   {"arch": "llama" | "mistral" | "qwen2" | "gpt2", <fields>}   the fields written out, each
//                                                    defaulting to the family's choice.
// Fields (zinf's names): name, layers, hidden, heads, kv_heads, head_dim, ffn_hidden, vocab,
// max_positions, tied_embeddings, norm ("layernorm" | "rmsnorm"), norm_eps, mlp ("gelu" |
// "swiglu"), position ("learned" | "rotary"), rope_theta, rope_scaling ({"type": "linear" |
// "llama3", "factor", "low_freq_factor", "high_freq_factor", "original_max_positions"} or null),
// partial_rotary_factor, qkv_bias, attn_out_bias, mlp_bias, bias (all three at once).
// The GPT-2-like form without "arch" ({"layers", "hidden", "heads", ...}) and {"params"} stay in
// scenario.cpp. Errors are one line naming scenario.model.<field>, the value and what is allowed.
#pragma once

#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "libengine/core/status.h"
#include "libengine/spec/json_input.h"
#include "libengine/spec/model_shape.h"

namespace zinf::spec {

// Whether `model` is in one of the forms above (has "hf_config" or "arch").
bool is_decoder_model(const JsonObject& model);

// The shape of a decoder-form model; `scenario_dir` resolves a relative hf_config path, `seq` is
// max_positions' default in the arch form. Validated (validate(ModelShape)); GPT-NeoX configs are
// refused (their parallel residual is not the model's wiring: they plan, they do not train).
Result<ModelShape> parse_decoder_model(const JsonObject& model, std::string_view scenario_dir, std::int64_t seq);

// Whether the GPT-2-like form ({"layers", "hidden", "heads", "vocab", "max_positions",
// "tied_embeddings", "bias"}) describes `shape` exactly, name included.
bool is_gpt_like(const ModelShape& shape);

// The arch form with every field written, so that parse_decoder_model(decoder_model_json(s)) == s.
nlohmann::json decoder_model_json(const ModelShape& shape);

}  // namespace zinf::spec
