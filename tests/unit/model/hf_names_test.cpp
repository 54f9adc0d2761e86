// The Hugging Face name map against the model it describes: for GPT-2 shapes and Llama / Mistral /
// Qwen2 shapes (tied and untied, tiled, GQA, q/k/v biases), every element of every parameter of the
// real Gpt's table is covered exactly once, the transposes index as GPT-2's Conv1D stores [in, out],
// q/k/v are the row ranges gpt.h documents, and the config.json reads back (through the project's
// own HF config import) as the same shape. (The values against transformers' own classes:
// tests/cli/hf_truth_test.py.)
#include "libengine/model/hf_names.h"

#include <algorithm>
#include <map>
#include <vector>

#include "libengine/device/cpu_device.h"
#include "libengine/model/gpt.h"
#include "libengine/spec/hf_config.h"
#include "tests/catch.h"

namespace zinf::model {
namespace {

spec::ModelShape small_shape(bool tied) {
  spec::ModelShape s = spec::gpt_like_shape(2, 8, 2, 11, 5);
  s.ffn_hidden = 12;
  s.tied_embeddings = tied;
  return s;
}

// A Llama-family shape: GQA (4 query heads over 2 KV heads), head_dim 6 (not hidden / heads), an
// odd intermediate size; `qwen2` adds q/k/v biases.
spec::ModelShape llama_shape(bool tied, bool qwen2) {
  spec::ModelShape s;
  s.name = "tiny";
  s.layers = 2, s.hidden = 16, s.heads = 4, s.kv_heads = 2, s.head_dim = 6, s.ffn_hidden = 20, s.vocab = 23;
  s.max_positions = 32;
  s.norm = spec::NormKind::kRmsNorm, s.norm_bias = false, s.norm_eps = 1e-6;
  s.mlp = spec::MlpKind::kGated;
  s.position = spec::PositionKind::kRotary;
  s.rope.theta = 500000.0;
  s.qkv_bias = qwen2;
  s.attn_out_bias = s.mlp_bias = false;
  s.tied_embeddings = tied;
  return s;
}

void check_cover(const spec::ModelShape& shape, std::int64_t tiling) {
  GptConfig config;
  config.shape = shape;
  config.seq = 1;
  config.tiling = tiling;
  auto device = device::make_cpu_device({});
  auto gpt = Gpt::create(config, *device);
  REQUIRE(gpt.is_ok());
  const ParamTable& table = gpt.value()->params();
  auto tensors = hf_tensors(config.shape);
  REQUIRE(tensors.is_ok());
  std::map<std::string, std::vector<int>> hits;  // whole param -> times each element is covered
  for (ParamId id = 0; id < table.size(); ++id) {
    const std::string whole = whole_name(table[id].name);
    auto& h = hits[whole];
    h.resize(h.size() + static_cast<std::size_t>(table[id].numel), 0);
  }
  for (const HfTensor& t : tensors.value()) {
    INFO(t.name);
    std::int64_t numel = 1;
    for (std::int64_t d : t.shape) numel *= d;
    CHECK(numel == t.numel());
    REQUIRE(hits.contains(t.param));
    const std::vector<ParamPiece> pieces = pieces_of(table, t.param);
    REQUIRE_FALSE(pieces.empty());
    std::int64_t whole_numel = 0;
    for (const ParamPiece& p : pieces) {
      CHECK(p.whole_offset == whole_numel);  // tiles back to back
      whole_numel += p.numel;
    }
    CHECK(whole_numel == t.param_rows * t.cols);
    for (std::int64_t i = 0; i < t.numel(); ++i) ++hits[t.param].at(static_cast<std::size_t>(t.param_element(i)));
  }
  for (const auto& [name, h] : hits) {
    INFO(name);
    CHECK(std::all_of(h.begin(), h.end(), [](int n) { return n == 1; }));
  }
}

TEST_CASE("hf_names: GPT-2 tensors cover every element of the Gpt's parameters exactly once", "[hf_names]") {
  const bool tied = GENERATE(true, false);
  const std::int64_t tiling = GENERATE(1, 3);
  check_cover(small_shape(tied), tiling);
  CHECK(hf_tensors(small_shape(tied)).value().back().name == (tied ? "transformer.ln_f.bias" : "lm_head.weight"));
}

TEST_CASE("hf_names: Llama-family tensors cover every element of the Gpt's parameters exactly once", "[hf_names]") {
  const bool tied = GENERATE(true, false);
  const bool qwen2 = GENERATE(true, false);
  const std::int64_t tiling = GENERATE(1, 3);
  INFO("tied " << tied << " qwen2 " << qwen2 << " tiling " << tiling);
  spec::ModelShape shape = llama_shape(tied, qwen2);
  check_cover(shape, tiling);
  // Llama with every bias (attention_bias and mlp_bias) is covered too.
  shape.qkv_bias = shape.attn_out_bias = shape.mlp_bias = true;
  check_cover(shape, tiling);
}

TEST_CASE("hf_names: Llama q/k/v are row ranges [q | k | v] of the fused qkv, in HF's order", "[hf_names]") {
  auto tensors = hf_tensors(llama_shape(false, true));
  REQUIRE(tensors.is_ok());
  std::vector<std::string> names;
  std::map<std::string, HfTensor> by_name;
  for (const HfTensor& t : tensors.value()) {
    names.push_back(t.name);
    by_name[t.name] = t;
  }
  // transformers' module order (the order save_pretrained lists them in).
  const std::vector<std::string> layer0 = {"model.embed_tokens.weight",
                                           "model.layers.0.input_layernorm.weight",
                                           "model.layers.0.self_attn.q_proj.weight",
                                           "model.layers.0.self_attn.q_proj.bias",
                                           "model.layers.0.self_attn.k_proj.weight",
                                           "model.layers.0.self_attn.k_proj.bias",
                                           "model.layers.0.self_attn.v_proj.weight",
                                           "model.layers.0.self_attn.v_proj.bias",
                                           "model.layers.0.self_attn.o_proj.weight",
                                           "model.layers.0.post_attention_layernorm.weight",
                                           "model.layers.0.mlp.gate_proj.weight",
                                           "model.layers.0.mlp.up_proj.weight",
                                           "model.layers.0.mlp.down_proj.weight"};
  REQUIRE(names.size() == 1 + 2 * 12 + 2);
  CHECK(std::vector<std::string>(names.begin(), names.begin() + 13) == layer0);
  CHECK(names[names.size() - 2] == "model.norm.weight");
  CHECK(names.back() == "lm_head.weight");
  // Q = 4 heads x 6, K = V = 2 heads x 6: qkv is [48, 16].
  const HfTensor& k = by_name.at("model.layers.1.self_attn.k_proj.weight");
  CHECK(k.param == "blocks.1.attn.qkv.weight");
  CHECK(k.shape == std::vector<std::int64_t>{12, 16});
  CHECK(k.param_rows == 48);
  CHECK(k.row_begin == 24);
  CHECK(k.param_element(0) == 24 * 16);
  CHECK(k.param_element(12 * 16 - 1) == 36 * 16 - 1);
  const HfTensor& vb = by_name.at("model.layers.1.self_attn.v_proj.bias");
  CHECK(vb.param == "blocks.1.attn.qkv.bias");
  CHECK(vb.shape == std::vector<std::int64_t>{12});
  CHECK(vb.param_element(5) == 36 + 5);
  const HfTensor& o = by_name.at("model.layers.0.self_attn.o_proj.weight");
  CHECK(o.shape == std::vector<std::int64_t>{16, 24});  // [hidden, heads * head_dim], as nn.Linear
  CHECK(by_name.at("model.layers.0.mlp.gate_proj.weight").param == "blocks.0.mlp.gate.weight");
  CHECK(by_name.at("model.layers.0.mlp.up_proj.weight").param == "blocks.0.mlp.fc.weight");
  CHECK(by_name.at("model.layers.0.mlp.down_proj.weight").shape == std::vector<std::int64_t>{16, 20});
  // Tied: no lm_head (transformers does not save the shared tensor twice).
  CHECK(hf_tensors(llama_shape(true, false)).value().back().name == "model.norm.weight");
}

TEST_CASE("hf_names: Conv1D weights are the transpose of zinf's [out, in]", "[hf_names]") {
  auto tensors = hf_tensors(small_shape(true));
  REQUIRE(tensors.is_ok());
  const HfTensor* fc = nullptr;
  for (const HfTensor& t : tensors.value()) {
    if (t.name == "transformer.h.1.mlp.c_fc.weight") fc = &t;
  }
  REQUIRE(fc != nullptr);
  CHECK(fc->param == "blocks.1.mlp.fc.weight");
  CHECK(fc->shape == std::vector<std::int64_t>{8, 12});  // [in = hidden, out = ffn]
  CHECK(fc->alt_name == "h.1.mlp.c_fc.weight");
  // HF element [2, 5] (in 2, out 5) is zinf's weight[5][2]: 5 * 8 + 2.
  CHECK(fc->param_element(2 * 12 + 5) == 5 * 8 + 2);
}

TEST_CASE("hf_names: config.json reads back as the same shape, other families are refused by field", "[hf_names]") {
  for (const bool tied : {true, false}) {
    const spec::ModelShape shape = small_shape(tied);
    auto config = hf_config_json(shape);
    REQUIRE(config.is_ok());
    auto back = spec::model_shape_from_hf_config(config.value(), "config.json");
    REQUIRE(back.is_ok());
    CHECK(spec::count_parameters(back.value()).total == spec::count_parameters(shape).total);
    CHECK(back.value().ffn_hidden == 12);
    CHECK(back.value().tied_embeddings == tied);
  }
  spec::ModelShape mixed = small_shape(true);
  mixed.norm = spec::NormKind::kRmsNorm;
  CHECK_THAT(hf_tensors(mixed).status().message(), Catch::Contains("this shape mixes them"));
}

TEST_CASE("hf_names: Llama-family config.json reads back as the same shape", "[hf_names]") {
  struct Case {
    const char* model_type;
    spec::ModelShape shape;
  };
  std::vector<Case> cases;
  cases.push_back({"llama", llama_shape(false, false)});
  cases.push_back({"qwen2", llama_shape(true, true)});
  spec::ModelShape biased = llama_shape(true, false);
  biased.qkv_bias = biased.attn_out_bias = biased.mlp_bias = true;
  cases.push_back({"llama", biased});
  spec::ModelShape scaled = llama_shape(false, false);
  scaled.rope.scaling = spec::RopeScalingKind::kLlama3;
  scaled.rope.factor = 8.0, scaled.rope.low_freq_factor = 1.0, scaled.rope.high_freq_factor = 4.0;
  scaled.rope.original_max_positions = 8192.0;
  scaled.norm_eps = 1e-5;
  cases.push_back({"llama", scaled});
  spec::ModelShape linear = llama_shape(false, true);
  linear.rope.scaling = spec::RopeScalingKind::kLinear;
  linear.rope.factor = 2.0;
  cases.push_back({"qwen2", linear});
  for (const Case& c : cases) {
    auto config = hf_config_json(c.shape);
    REQUIRE(config.is_ok());
    INFO(config.value().dump());
    CHECK(config.value().at("model_type") == c.model_type);
    auto back = spec::model_shape_from_hf_config(config.value(), "config.json");
    REQUIRE(back.is_ok());
    spec::ModelShape want = c.shape;
    want.name = c.model_type;  // the config has no _name_or_path
    const spec::ModelShape& got = back.value();
    CHECK(got.layers == want.layers);
    CHECK(got.hidden == want.hidden);
    CHECK(got.heads == want.heads);
    CHECK(got.kv_heads == want.kv_heads);
    CHECK(got.head_dim == want.head_dim);
    CHECK(got.ffn_hidden == want.ffn_hidden);
    CHECK(got.vocab == want.vocab);
    CHECK(got.max_positions == want.max_positions);
    CHECK(got.norm == want.norm);
    CHECK(got.mlp == want.mlp);
    CHECK(got.position == want.position);
    CHECK(got.qkv_bias == want.qkv_bias);
    CHECK(got.attn_out_bias == want.attn_out_bias);
    CHECK(got.mlp_bias == want.mlp_bias);
    CHECK(got.tied_embeddings == want.tied_embeddings);
    CHECK(got.norm_eps == want.norm_eps);
    CHECK(got.rope == want.rope);
  }
  // Qwen2's sliding window stays off; llama's biases are explicit.
  CHECK(hf_config_json(llama_shape(true, true)).value().at("use_sliding_window") == false);
  CHECK(hf_config_json(llama_shape(true, false)).value().at("attention_bias") == false);
}

TEST_CASE("hf_names: Llama-family shapes with no Hugging Face form are refused by field", "[hf_names]") {
  spec::ModelShape partial = llama_shape(false, false);
  partial.rope.partial_rotary_factor = 0.5;
  const Status p = hf_tensors(partial).status();
  CHECK_THAT(p.message(), Catch::Contains("model.partial_rotary_factor: 0.5"));
  CHECK(hf_config_json(partial).status().message() == p.message());
  spec::ModelShape out_only = llama_shape(false, false);
  out_only.attn_out_bias = true;
  CHECK_THAT(hf_tensors(out_only).status().message(), Catch::Contains("output-projection bias"));
}

}  // namespace
}  // namespace zinf::model
