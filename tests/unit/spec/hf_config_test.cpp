// Hugging Face config import: the published config.json of real models (tests/fixtures/hf, see its
// README for the hand calculations) must give their published parameter counts exactly, and bad
// configs must fail with messages that name the file, the key, the value and what is allowed.
#include "libengine/spec/hf_config.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "libengine/spec/json_input.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::spec {
namespace {

std::string fixture_path(std::string_view name) { return fmt::format("{}/hf/{}", ZINF_FIXTURES_DIR, name); }

nlohmann::json fixture_json(std::string_view name) { return read_json_file(fixture_path(name)).value(); }

// The message of a conversion that must fail.
std::string error_of(const nlohmann::json& config) {
  const Result<ModelShape> shape = model_shape_from_hf_config(config, "config.json");
  REQUIRE_FALSE(shape.is_ok());
  CHECK(shape.status().code() == ErrorCode::kInvalidArgument);
  return shape.status().message();
}

using testing::TempDir;

TEST_CASE("gpt2 and gpt2-xl give their published counts") {
  const ModelShape gpt2 = load_hf_config(fixture_path("gpt2.json")).value();
  CHECK(gpt2.name == "gpt2");  // no _name_or_path: the model_type
  CHECK(gpt2.layers == 12);
  CHECK(gpt2.hidden == 768);
  CHECK(gpt2.heads == 12);
  CHECK(gpt2.kv_heads == 12);
  CHECK(gpt2.head_dim == 64);
  CHECK(gpt2.ffn_hidden == 3072);  // n_inner absent: 4 * n_embd
  CHECK(gpt2.vocab == 50257);
  CHECK(gpt2.max_positions == 1024);
  CHECK(gpt2.norm == NormKind::kLayerNorm);
  CHECK(gpt2.mlp == MlpKind::kGelu);
  CHECK(gpt2.position == PositionKind::kLearned);
  CHECK((gpt2.qkv_bias && gpt2.attn_out_bias && gpt2.mlp_bias));
  CHECK(gpt2.tied_embeddings);
  CHECK(count_parameters(gpt2).total == 124'439'808ULL);

  const ModelShape xl = load_hf_config(fixture_path("gpt2-xl.json")).value();
  CHECK(xl.layers == 48);
  CHECK(xl.hidden == 1600);
  CHECK(xl.heads == 25);
  CHECK(xl.head_dim == 64);
  CHECK(xl.ffn_hidden == 6400);
  CHECK(xl.tied_embeddings);
  CHECK(count_parameters(xl).total == 1'557'611'200ULL);
}

TEST_CASE("pythia-160m (GPT-NeoX) gives its published count with an untied head") {
  const ModelShape pythia = load_hf_config(fixture_path("pythia-160m.json")).value();
  CHECK(pythia.name == "gpt_neox");
  CHECK(pythia.layers == 12);
  CHECK(pythia.hidden == 768);
  CHECK(pythia.heads == 12);
  CHECK(pythia.kv_heads == 12);
  CHECK(pythia.head_dim == 64);
  CHECK(pythia.ffn_hidden == 3072);
  CHECK(pythia.vocab == 50304);
  CHECK(pythia.position == PositionKind::kRotary);
  CHECK(pythia.norm == NormKind::kLayerNorm);
  CHECK((pythia.qkv_bias && pythia.attn_out_bias && pythia.mlp_bias));
  CHECK_FALSE(pythia.tied_embeddings);
  const ParameterCount count = count_parameters(pythia);
  CHECK(count.total == 162'322'944ULL);
  CHECK(count.head == 50304ULL * 768);
}

TEST_CASE("Llama-2-7b, Mistral-7B and TinyLlama give their published counts") {
  const ModelShape llama = load_hf_config(fixture_path("Llama-2-7b-hf.json")).value();
  CHECK(llama.name == "meta-llama/Llama-2-7b-hf");  // from _name_or_path
  CHECK(llama.layers == 32);
  CHECK(llama.hidden == 4096);
  CHECK(llama.heads == 32);
  CHECK(llama.kv_heads == 32);
  CHECK(llama.head_dim == 128);
  CHECK(llama.ffn_hidden == 11008);
  CHECK(llama.max_positions == 4096);
  CHECK(llama.norm == NormKind::kRmsNorm);
  CHECK(llama.mlp == MlpKind::kGated);
  CHECK(llama.position == PositionKind::kRotary);
  CHECK_FALSE((llama.qkv_bias || llama.attn_out_bias || llama.mlp_bias));
  CHECK_FALSE(llama.tied_embeddings);
  CHECK(count_parameters(llama).total == 6'738'415'616ULL);

  const ModelShape mistral = load_hf_config(fixture_path("Mistral-7B-v0.1.json")).value();
  CHECK(mistral.name == "mistral");
  CHECK(mistral.layers == 32);
  CHECK(mistral.heads == 32);
  CHECK(mistral.kv_heads == 8);
  CHECK(mistral.head_dim == 128);
  CHECK(mistral.ffn_hidden == 14336);
  CHECK_FALSE(mistral.tied_embeddings);
  CHECK(count_parameters(mistral).total == 7'241'732'096ULL);

  const ModelShape tiny = load_hf_config(fixture_path("TinyLlama-1.1B-Chat-v1.0.json")).value();
  CHECK(tiny.layers == 22);
  CHECK(tiny.hidden == 2048);
  CHECK(tiny.heads == 32);
  CHECK(tiny.kv_heads == 4);
  CHECK(tiny.head_dim == 64);
  CHECK(tiny.ffn_hidden == 5632);
  CHECK_FALSE(tiny.tied_embeddings);
  CHECK(count_parameters(tiny).total == 1'100'048'384ULL);
}

TEST_CASE("Qwen2-0.5B gives its published count: biased q/k/v, unbiased o, tied head") {
  const ModelShape qwen = load_hf_config(fixture_path("Qwen2-0.5B.json")).value();
  CHECK(qwen.layers == 24);
  CHECK(qwen.hidden == 896);
  CHECK(qwen.heads == 14);
  CHECK(qwen.kv_heads == 2);
  CHECK(qwen.head_dim == 64);
  CHECK(qwen.ffn_hidden == 4864);
  CHECK(qwen.qkv_bias);
  CHECK_FALSE(qwen.attn_out_bias);
  CHECK_FALSE(qwen.mlp_bias);
  CHECK(qwen.tied_embeddings);
  CHECK(count_parameters(qwen).total == 494'032'768ULL);
}

TEST_CASE("optional keys take the Transformers defaults") {
  SECTION("gpt2: n_inner null is 4 * n_embd, an explicit n_inner is used") {
    nlohmann::json config = fixture_json("gpt2.json");
    config["n_inner"] = nullptr;
    CHECK(model_shape_from_hf_config(config, "gpt2").value().ffn_hidden == 3072);
    config["n_inner"] = 1000;
    CHECK(model_shape_from_hf_config(config, "gpt2").value().ffn_hidden == 1000);
  }
  SECTION("gpt2: tie_word_embeddings false adds an lm_head") {
    nlohmann::json config = fixture_json("gpt2.json");
    config["tie_word_embeddings"] = false;
    CHECK(count_parameters(model_shape_from_hf_config(config, "gpt2").value()).total ==
          124'439'808ULL + 50257ULL * 768);
  }
  SECTION("llama: num_key_value_heads absent or null means one per query head") {
    nlohmann::json config = fixture_json("TinyLlama-1.1B-Chat-v1.0.json");
    config.erase("num_key_value_heads");
    CHECK(model_shape_from_hf_config(config, "tiny").value().kv_heads == 32);
    config["num_key_value_heads"] = nullptr;
    CHECK(model_shape_from_hf_config(config, "tiny").value().kv_heads == 32);
  }
  SECTION("llama: attention_bias covers q, k, v and o; mlp_bias gate, up and down") {
    nlohmann::json config = fixture_json("Llama-2-7b-hf.json");
    config["attention_bias"] = true;
    CHECK(count_parameters(model_shape_from_hf_config(config, "llama").value()).total ==
          6'738'415'616ULL + 32ULL * 4 * 4096);
    config["attention_bias"] = false;
    config["mlp_bias"] = true;
    CHECK(count_parameters(model_shape_from_hf_config(config, "llama").value()).total ==
          6'738'415'616ULL + 32ULL * (2 * 11008 + 4096));
  }
  SECTION("an explicit head_dim decouples attention width from hidden_size") {
    // Mistral-Nemo's shape: 5120 hidden, 32 heads of 128 (4096 wide), 8 kv heads. By hand, per layer
    // q 5120*4096 + k, v 2*5120*1024 + o 4096*5120 + MLP 3*5120*14336 + norms 2*5120 = 272,640,000;
    // embeddings and head 2*131072*5120 = 1,342,177,280; final norm 5120.
    nlohmann::json config = fixture_json("Mistral-7B-v0.1.json");
    config["hidden_size"] = 5120;
    config["head_dim"] = 128;
    config["num_hidden_layers"] = 40;
    config["vocab_size"] = 131072;
    const ModelShape nemo = model_shape_from_hf_config(config, "nemo").value();
    CHECK(nemo.head_dim == 128);
    CHECK(count_parameters(nemo).total == 12'247'782'400ULL);
  }
  SECTION("without model_type the architectures list picks the family") {
    nlohmann::json config = fixture_json("gpt2.json");
    config.erase("model_type");
    const ModelShape shape = model_shape_from_hf_config(config, "gpt2").value();
    CHECK(shape.name == "gpt2");
    CHECK(count_parameters(shape).total == 124'439'808ULL);
  }
  SECTION("MoE keys that are null or 1 do not make a model MoE") {
    nlohmann::json config = fixture_json("Mistral-7B-v0.1.json");
    config["num_local_experts"] = 1;
    config["num_experts"] = nullptr;
    CHECK(model_shape_from_hf_config(config, "mistral").is_ok());
  }
}

TEST_CASE("bad configs name the file, the key, the value and what is allowed") {
  nlohmann::json config = fixture_json("Mistral-7B-v0.1.json");
  SECTION("missing required key") {
    config.erase("intermediate_size");
    CHECK(error_of(config) == "config.json: intermediate_size: required field is missing");
  }
  SECTION("negative heads") {
    config["num_attention_heads"] = -1;
    CHECK(error_of(config) == "config.json: num_attention_heads: expected a positive integer, found -1 (number)");
  }
  SECTION("a string where a number belongs") {
    config["hidden_size"] = "4096";
    CHECK(error_of(config) == "config.json: hidden_size: expected a positive integer, found \"4096\" (string)");
  }
  SECTION("a fractional count") {
    config["num_hidden_layers"] = 32.5;
    CHECK(error_of(config) == "config.json: num_hidden_layers: expected a positive integer, found 32.5 (number)");
  }
  SECTION("a non-boolean flag") {
    config["tie_word_embeddings"] = "no";
    CHECK(error_of(config) == "config.json: tie_word_embeddings: expected true or false, found \"no\" (string)");
  }
  SECTION("mixture-of-experts") {
    config["model_type"] = "mixtral";
    config["num_local_experts"] = 8;
    CHECK(error_of(config) ==
          "config.json: num_local_experts: 8 experts; mixture-of-experts is not supported "
          "(only dense models: gpt2, gpt_neox, llama, mistral, qwen2)");
  }
  SECTION("an expert count that is not a number is refused, not skipped (issue 15)") {
    config["num_local_experts"] = "8";
    CHECK(error_of(config) ==
          "config.json: num_local_experts: expected an expert count (a number, or null), found \"8\" (string)");
  }
  SECTION("a name with a control character (issue 15)") {
    config["_name_or_path"] = "evil\x1b[2J";
    CHECK(error_of(config).find("config.json: _name_or_path: ") == 0);
    CHECK(error_of(config).find("holds a control character (0x1b at byte 4)") != std::string::npos);
  }
  SECTION("unknown model_type") {
    config["model_type"] = "t5";
    CHECK(error_of(config) ==
          "config.json: model_type: 't5' is not supported; supported: gpt2, gpt_neox, llama, "
          "mistral, qwen2");
  }
  SECTION("no model_type and no supported architecture") {
    config.erase("model_type");
    config["architectures"] = {"T5ForConditionalGeneration"};
    CHECK(error_of(config) ==
          "config.json: model_type: required field is missing and architectures "
          "[\"T5ForConditionalGeneration\"] (array) names no supported model; supported model_type: "
          "gpt2, gpt_neox, llama, mistral, qwen2");
  }
  SECTION("kv heads not dividing the query heads") {
    config["num_key_value_heads"] = 5;
    CHECK(error_of(config) ==
          "config.json: num_key_value_heads: 5 does not divide num_attention_heads 32; "
          "grouped-query attention shares each key/value head among a whole number of query heads");
  }
  SECTION("heads not dividing hidden_size without head_dim") {
    config["num_attention_heads"] = 24;
    config["num_key_value_heads"] = 8;
    CHECK(error_of(config) ==
          "config.json: num_attention_heads: 24 does not divide hidden_size 4096; without "
          "head_dim each head is hidden_size / num_attention_heads wide");
  }
  SECTION("gpt2 heads not dividing n_embd") {
    config = fixture_json("gpt2.json");
    config["n_head"] = 7;
    CHECK(error_of(config) ==
          "config.json: n_head: 7 does not divide n_embd 768; GPT-2 splits n_embd evenly over "
          "its heads");
  }
  SECTION("a top level that is not an object") {
    CHECK(error_of(nlohmann::json::array()) == "config.json: expected a JSON object, found [] (array)");
  }
}

TEST_CASE("load_hf_config prefixes errors with the path") {
  const TempDir dir;
  SECTION("malformed JSON gives path, line and column") {
    const std::string path = dir.path() + "/config.json";
    std::ofstream(path) << "{\n  \"model_type\": \"gpt2\",\n  \"n_layer\": ,\n}\n";
    const Result<ModelShape> shape = load_hf_config(path);
    REQUIRE_FALSE(shape.is_ok());
    CHECK(shape.status().message().rfind(path + ":3:14: malformed JSON", 0) == 0);
  }
  SECTION("a bad field gives path and key") {
    const std::string path = dir.path() + "/bad.json";
    std::ofstream(path) << R"({"model_type": "gpt2", "n_layer": 0})";
    const Result<ModelShape> shape = load_hf_config(path);
    REQUIRE_FALSE(shape.is_ok());
    CHECK(shape.status().message() == path + ": n_layer: expected a positive integer, found 0 (number)");
  }
  SECTION("a missing file is NotFound") {
    const std::string path = dir.path() + "/absent.json";
    const Result<ModelShape> shape = load_hf_config(path);
    REQUIRE_FALSE(shape.is_ok());
    CHECK(shape.status().code() == ErrorCode::kNotFound);
    CHECK(shape.status().message() == path + ": no such file");
  }
}

}  // namespace
}  // namespace zinf::spec

namespace zinf::spec {
namespace {

TEST_CASE("the math keys: norm eps, rope_theta, rope_scaling and partial_rotary_factor with each module's defaults") {
  const ModelShape llama = load_hf_config(fixture_path("Llama-2-7b-hf.json")).value();
  CHECK(llama.norm_eps == 1e-5);  // rms_norm_eps in the file
  CHECK(llama.rope.theta == 10000.0);
  CHECK(llama.rope.scaling == RopeScalingKind::kNone);
  CHECK(llama.rope.partial_rotary_factor == 1.0);
  CHECK(rotary_dim(llama) == 128);
  CHECK(load_hf_config(fixture_path("gpt2.json")).value().norm_eps == 1e-5);
  const ModelShape pythia = load_hf_config(fixture_path("pythia-160m.json")).value();
  CHECK(pythia.rope.partial_rotary_factor == 0.25);  // rotary_pct
  CHECK(rotary_dim(pythia) == 16);

  nlohmann::json config = fixture_json("Llama-2-7b-hf.json");
  config.erase("rms_norm_eps");
  config.erase("rope_theta");
  CHECK(model_shape_from_hf_config(config, "c").value().norm_eps == 1e-6);  // LlamaConfig's default
  config["rope_theta"] = 500000.0;
  config["rope_scaling"] = {{"rope_type", "llama3"},
                            {"factor", 8.0},
                            {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0},
                            {"original_max_position_embeddings", 8192}};
  ModelShape l3 = model_shape_from_hf_config(config, "c").value();
  CHECK(l3.rope.theta == 500000.0);
  CHECK(l3.rope.scaling == RopeScalingKind::kLlama3);
  CHECK(l3.rope.factor == 8.0);
  CHECK(l3.rope.original_max_positions == 8192.0);
  config["rope_scaling"] = {{"type", "linear"}, {"factor", 2}};  // the older key
  l3 = model_shape_from_hf_config(config, "c").value();
  CHECK(l3.rope.scaling == RopeScalingKind::kLinear);
  CHECK(l3.rope.factor == 2.0);
  config.erase("rope_scaling");
  config.erase("rope_theta");
  config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};  // transformers 5
  CHECK(model_shape_from_hf_config(config, "c").value().rope.theta == 1000000.0);
  config.erase("rope_parameters");
  config["partial_rotary_factor"] = 0.5;
  CHECK(rotary_dim(model_shape_from_hf_config(config, "c").value()) == 64);

  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4}};
  CHECK_THAT(error_of(config), Catch::Contains("rope_scaling.rope_type: 'yarn' is not supported (allowed: default, "
                                               "linear, llama3)"));
  config["rope_scaling"] = {{"rope_type", "linear"}};
  CHECK_THAT(error_of(config), Catch::Contains("rope_scaling.factor: required"));
  config.erase("rope_scaling");
  config["rms_norm_eps"] = "1e-6";
  CHECK_THAT(error_of(config), Catch::Contains("rms_norm_eps: expected a finite number"));
  config["rms_norm_eps"] = 1e-6;
  config["partial_rotary_factor"] = 0.3;  // 128 * 0.3 = 38.4 -> 38 dims: even, allowed
  CHECK(rotary_dim(model_shape_from_hf_config(config, "c").value()) == 38);
  config["partial_rotary_factor"] = 1.5;
  CHECK_THAT(error_of(config), Catch::Contains("model.partial_rotary_factor: 1.5"));
}

}  // namespace
}  // namespace zinf::spec
