// Hugging Face config.json import: turns the config of a GPT-2, GPT-NeoX (Pythia), LLaMA or
// Mistral-style model into a ModelShape whose count_parameters() equals the published parameter
// count exactly (embeddings, norms, biases, gated MLPs, tied/untied heads, grouped-query attention).
// Anything it cannot represent faithfully (mixture-of-experts, an unknown model_type without the
// standard keys) is an error naming the field, never a silent approximation.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "libengine/core/status.h"
#include "libengine/spec/model_shape.h"

namespace zinf::spec {

// `source` names the config in errors (usually its path): "<source>: num_attention_heads: ...".
Result<ModelShape> model_shape_from_hf_config(const nlohmann::json& config, std::string_view source);

// Reads the file and converts it; syntax errors carry the file's line (see json_input.h).
Result<ModelShape> load_hf_config(const std::string& path);

}  // namespace zinf::spec
