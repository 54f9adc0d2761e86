// SafetensorsStateSource against the real model's parameter table: an HF file whose every element
// holds its zinf whole-parameter index (written in HF layout, transposes included) is served to
// every rank of 1..3-rank partitions of a tiled and untiled GPT, each element where the model
// expects it; Adam moments come back zero; missing, extra and mis-shaped tensors are refused with
// one line naming the tensor. And the checkpoint's model record reads back as the same table.
#include "libengine/train/weights_source.h"

#include <algorithm>
#include <vector>

#include "libengine/device/cpu_device.h"
#include "libengine/model/gpt.h"
#include "libengine/spec/scenario.h"
#include "libengine/spec/scenario_model.h"
#include "libengine/train/checkpoint_model.h"
#include "libengine/train/safetensors_writer.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::train {
namespace {

namespace fs = std::filesystem;
using zinf::testing::TempDir;

// Every field of two shapes (ModelShape has no operator==; its arch form writes all but the
// derived norm_bias and the rope fields a scaling type does not use).
bool same_shape(const spec::ModelShape& a, const spec::ModelShape& b) {
  return spec::decoder_model_json(a) == spec::decoder_model_json(b) && a.rope == b.rope && a.norm_bias == b.norm_bias;
}

// A Llama-family shape with every non-default field set (GQA, untied head, llama3 rope scaling),
// so a record that drops or mistranslates one of them reads back different.
spec::ModelShape tiny_llama_shape() {
  spec::ModelShape s;
  s.name = "tiny-llama";
  s.layers = 1, s.hidden = 16, s.heads = 4, s.kv_heads = 2, s.head_dim = 4, s.ffn_hidden = 20, s.vocab = 23;
  s.max_positions = 32;
  s.norm = spec::NormKind::kRmsNorm, s.norm_bias = false, s.norm_eps = 1e-6;
  s.mlp = spec::MlpKind::kGated;
  s.position = spec::PositionKind::kRotary;
  s.qkv_bias = s.attn_out_bias = s.mlp_bias = false;
  s.tied_embeddings = false;
  s.rope.theta = 500000.0;
  s.rope.scaling = spec::RopeScalingKind::kLlama3;
  s.rope.factor = 8.0, s.rope.low_freq_factor = 1.5, s.rope.high_freq_factor = 4.5;
  s.rope.original_max_positions = 16.0;
  return s;
}

spec::ModelShape shape_of(bool tied) {
  spec::ModelShape s = spec::gpt_like_shape(2, 8, 2, 11, 5);
  s.ffn_hidden = 12;
  s.tied_embeddings = tied;
  return s;
}

// Writes every HF tensor of `shape` (minus `skip`, plus `extra`) with element i = the zinf whole
// index it maps to, + 1000 * (position of its parameter): exact in fp32 for these sizes.
void write_indexed(const fs::path& path, const spec::ModelShape& shape, const std::string& skip = {},
                   const std::string& extra = {}, bool bad_shape = false) {
  const std::vector<model::HfTensor> tensors = model::hf_tensors(shape).value();
  std::vector<SafetensorsEntry> entries;
  for (const model::HfTensor& t : tensors) {
    if (t.name == skip) continue;
    std::vector<std::int64_t> dims = t.shape;
    if (bad_shape && t.name == "transformer.h.1.mlp.c_fc.weight") dims = {t.shape[1], t.shape[0]};
    entries.push_back({t.name, DType::kF32, dims});
  }
  if (!extra.empty()) entries.push_back({extra, DType::kF32, {1}});
  auto writer = SafetensorsWriter::create(path, entries).value();
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const model::HfTensor& t = tensors[k];
    if (t.name == skip) continue;
    std::vector<float> values(static_cast<std::size_t>(t.numel()));
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      values[static_cast<std::size_t>(i)] =
          static_cast<float>(t.param_element(i) + 1000 * static_cast<std::int64_t>(k));
    }
    REQUIRE(writer->append(values).is_ok());
  }
  if (!extra.empty()) REQUIRE(writer->append(std::vector<float>{1.0f}).is_ok());
  REQUIRE(writer->commit().is_ok());
}

TEST_CASE("weights_source: every rank of every partition gets its elements where the model expects them",
          "[weights_source]") {
  const bool tied = GENERATE(true, false);
  const std::int64_t tiling = GENERATE(1, 3);
  model::GptConfig config;
  config.shape = shape_of(tied);
  config.seq = 1;
  config.tiling = tiling;
  auto device = device::make_cpu_device({});
  auto gpt = model::Gpt::create(config, *device).value();
  const model::ParamTable& table = gpt->params();
  TempDir dir;
  const fs::path file = fs::path(dir.path()) / "w.safetensors";
  write_indexed(file, config.shape);
  const std::vector<model::HfTensor> tensors = model::hf_tensors(config.shape).value();
  const auto expected = [&](const std::string& whole, std::int64_t element) {
    for (std::size_t k = 0; k < tensors.size(); ++k) {
      const model::HfTensor& t = tensors[k];
      if (t.param == whole && element >= t.row_begin * t.cols && element < (t.row_begin + t.rows) * t.cols) {
        return static_cast<float>(element + 1000 * static_cast<std::int64_t>(k));
      }
    }
    return -1.0f;
  };
  for (int world = 1; world <= 3; ++world) {
    for (int rank = 0; rank < world; ++rank) {
      const zero::Partition partition(table, world, rank);
      auto source = SafetensorsStateSource::open(file, config.shape, table, world == 1 ? nullptr : &partition);
      REQUIRE(source.is_ok());
      for (model::ParamId id = 0; id < table.size(); ++id) {
        const std::int64_t begin = world == 1 ? 0 : partition[id].begin;
        const std::int64_t owned = world == 1 ? table[id].numel : partition[id].owned;
        std::vector<float> got(static_cast<std::size_t>(owned), -7.0f);
        // In two ranges, as an offloading owner streams them.
        const std::size_t half = got.size() / 2;
        REQUIRE(source.value()->read(static_cast<std::size_t>(id), 0, std::span(got).subspan(0, half)).is_ok());
        REQUIRE(source.value()->read(static_cast<std::size_t>(id), half, std::span(got).subspan(half)).is_ok());
        const std::string whole = model::whole_name(table[id].name);
        for (std::int64_t i = 0; i < owned; ++i) {
          INFO(table[id].name << " world " << world << " rank " << rank << " element " << i);
          REQUIRE(got[static_cast<std::size_t>(i)] == expected(whole, table[id].whole_offset + begin + i));
        }
        std::vector<float> m(static_cast<std::size_t>(owned), 5.0f);
        REQUIRE(source.value()->read(static_cast<std::size_t>(table.size() + id), m).is_ok());
        CHECK(std::all_of(m.begin(), m.end(), [](float x) { return x == 0.0f; }));
      }
    }
  }
}

TEST_CASE("weights_source: missing, extra and mis-shaped tensors are refused by name", "[weights_source]") {
  model::GptConfig config;
  config.shape = shape_of(true);
  config.seq = 1;
  auto device = device::make_cpu_device({});
  auto gpt = model::Gpt::create(config, *device).value();
  TempDir dir;
  const fs::path file = fs::path(dir.path()) / "w.safetensors";
  const auto error = [&] {
    return SafetensorsStateSource::open(file, config.shape, gpt->params(), nullptr).status().message();
  };
  write_indexed(file, config.shape, "transformer.h.0.ln_2.bias");
  CHECK_THAT(error(), Catch::Contains("tensor 'transformer.h.0.ln_2.bias' (the model's blocks.0.ln2.bias, shape [8]) "
                                      "is missing"));
  write_indexed(file, config.shape, "", "lm_head.weight");
  CHECK_THAT(error(), Catch::Contains("tensor 'lm_head.weight' is not a parameter of the model"));
  write_indexed(file, config.shape, "", "", true);
  CHECK_THAT(error(), Catch::Contains("tensor 'transformer.h.1.mlp.c_fc.weight' has shape [12, 8]"));
  CHECK_THAT(error(), Catch::Contains("the model needs [8, 12]"));
  // GPT-2's mask buffers are not parameters, and are skipped.
  write_indexed(file, config.shape, "", "transformer.h.0.attn.bias");
  CHECK(SafetensorsStateSource::open(file, config.shape, gpt->params(), nullptr).is_ok());
}

TEST_CASE("checkpoint_model: the record reads back as the same shape and table", "[weights_source]") {
  model::GptConfig config;
  config.shape = shape_of(false);
  config.seq = 1;
  config.tiling = 3;
  auto device = device::make_cpu_device({});
  auto gpt = model::Gpt::create(config, *device).value();
  const nlohmann::json extra = {{"model", checkpoint_model_json(config.shape, gpt->params())}};
  auto back = read_checkpoint_model(extra, "ckpt");
  REQUIRE(back.is_ok());
  CHECK(back.value().shape.ffn_hidden == 12);
  CHECK_FALSE(back.value().shape.tied_embeddings);
  REQUIRE(back.value().table.size() == gpt->params().size());
  for (model::ParamId id = 0; id < gpt->params().size(); ++id) {
    CHECK(back.value().table[id].name == gpt->params()[id].name);
    CHECK(back.value().table[id].shape == gpt->params()[id].shape);
    CHECK(back.value().table[id].whole_offset == gpt->params()[id].whole_offset);
  }
  CHECK_THAT(read_checkpoint_model(nlohmann::json::object(), "ckpt").status().message(),
             Catch::Contains("checkpoint ckpt: records no model"));
}

TEST_CASE("weights_source: the scenario's init section parses, round-trips and refuses bad input by field",
          "[weights_source]") {
  const auto doc = [](nlohmann::json init) {
    nlohmann::json d = nlohmann::json::parse(R"({"model": {"layers": 2, "hidden": 64, "heads": 4, "vocab": 128},
                                                 "steps": 10})");
    d["init"] = std::move(init);
    return d;
  };
  auto s = spec::parse_scenario(doc({{"safetensors", "runs/e1"}}), "s.json", spec::ShapeResolver{});
  REQUIRE(s.is_ok());
  CHECK(s.value().init.safetensors == "runs/e1");
  auto back = spec::parse_scenario(spec::to_json(s.value()), "s.json", spec::ShapeResolver{});
  REQUIRE(back.is_ok());
  CHECK(back.value() == s.value());
  // Starting weights do not change the fingerprint: a resumed run's states are its checkpoint's.
  auto plain = spec::parse_scenario(nlohmann::json::parse(R"({"model": {"layers": 2, "hidden": 64, "heads": 4,
                                                              "vocab": 128}, "steps": 10})"),
                                    "s.json", spec::ShapeResolver{});
  CHECK(spec::fingerprint(plain.value()) == spec::fingerprint(s.value()));
  CHECK_THAT(spec::parse_scenario(doc({{"safetensors", ""}}), "s.json", spec::ShapeResolver{}).status().message(),
             Catch::Contains("scenario.init.safetensors"));
  CHECK_THAT(spec::parse_scenario(doc({{"weights", "x"}}), "s.json", spec::ShapeResolver{}).status().message(),
             Catch::Contains("scenario.init.weights: unknown field"));
}

TEST_CASE("checkpoint_model: a Llama-family record keeps norm eps and rope settings", "[weights_source]") {
  // What `zinf export` writes into config.json: eps and rope must survive the checkpoint.
  const spec::ModelShape s = tiny_llama_shape();
  model::GptConfig config;
  config.shape = s;
  config.seq = 1;
  auto device = device::make_cpu_device({});
  auto gpt = model::Gpt::create(config, *device).value();
  nlohmann::json extra = {{"model", checkpoint_model_json(s, gpt->params())}};
  auto back = read_checkpoint_model(extra, "ckpt");
  REQUIRE(back.is_ok());
  CHECK(back.value().shape.norm_eps == 1e-6);
  CHECK_FALSE(back.value().shape.norm_bias);
  CHECK(back.value().shape.rope == s.rope);
  // The shape is the scenario's arch form, so the record is what a scenario could say.
  CHECK(extra["model"]["shape"]["arch"] == "llama");
  CHECK(same_shape(back.value().shape, s));
  CHECK_THAT(read_checkpoint_model(
                 {{"model", {{"shape", {{"hf_config", "c.json"}}}, {"params", nlohmann::json::array()}}}}, "ckpt")
                 .status()
                 .message(),
             Catch::Contains("checkpoint ckpt: model.shape.hf_config"));
  extra["model"]["shape"]["layers"] = 0;
  CHECK_THAT(read_checkpoint_model(extra, "ckpt").status().message(),
             Catch::Contains("checkpoint ckpt: model.shape.layers"));
}

// The record as zinf wrote it before checkpoints used the arch form: still read, to the same shape.
nlohmann::json legacy_shape_record(const spec::ModelShape& s, bool with_eps_and_rope) {
  nlohmann::json shape = {{"name", s.name},
                          {"layers", s.layers},
                          {"hidden", s.hidden},
                          {"heads", s.heads},
                          {"kv_heads", s.kv_heads},
                          {"head_dim", s.head_dim},
                          {"ffn_hidden", s.ffn_hidden},
                          {"vocab", s.vocab},
                          {"max_positions", s.max_positions},
                          {"norm", s.norm == spec::NormKind::kLayerNorm ? "layernorm" : "rmsnorm"},
                          {"mlp", s.mlp == spec::MlpKind::kGelu ? "gelu" : "gated"},
                          {"position", s.position == spec::PositionKind::kLearned ? "learned" : "rotary"},
                          {"qkv_bias", s.qkv_bias},
                          {"attn_out_bias", s.attn_out_bias},
                          {"mlp_bias", s.mlp_bias},
                          {"tied_embeddings", s.tied_embeddings}};
  if (with_eps_and_rope) {
    const char* scaling = s.rope.scaling == spec::RopeScalingKind::kNone     ? "none"
                          : s.rope.scaling == spec::RopeScalingKind::kLinear ? "linear"
                                                                             : "llama3";
    shape["norm_bias"] = s.norm_bias;
    shape["norm_eps"] = s.norm_eps;
    shape["rope"] = {{"theta", s.rope.theta},
                     {"scaling", scaling},
                     {"factor", s.rope.factor},
                     {"low_freq_factor", s.rope.low_freq_factor},
                     {"high_freq_factor", s.rope.high_freq_factor},
                     {"original_max_positions", s.rope.original_max_positions},
                     {"partial_rotary_factor", s.rope.partial_rotary_factor}};
  }
  return {{"model", {{"shape", shape}, {"params", nlohmann::json::array({{"wte", {23, 16}}})}}}};
}

TEST_CASE("checkpoint_model: records written before the arch form still read, to the same shape", "[weights_source]") {
  const spec::ModelShape llama = tiny_llama_shape();
  auto back = read_checkpoint_model(legacy_shape_record(llama, true), "ckpt");
  REQUIRE(back.is_ok());
  CHECK(same_shape(back.value().shape, llama));
  REQUIRE(back.value().table.size() == 1);
  CHECK(back.value().table[0].name == "wte");
  // Without eps and rope: a GPT-2 shape reads with GPT-2's defaults, a rotary/RMSNorm one is refused.
  CHECK_THAT(read_checkpoint_model(legacy_shape_record(llama, false), "ckpt").status().message(),
             Catch::Contains("checkpoint ckpt: records no model.shape.norm_eps"));
  spec::ModelShape gpt2 = shape_of(true);
  auto old_back = read_checkpoint_model(legacy_shape_record(gpt2, false), "ckpt");
  REQUIRE(old_back.is_ok());
  CHECK(old_back.value().shape.norm_eps == 1e-5);
  CHECK(old_back.value().shape.norm_bias);
  CHECK(same_shape(old_back.value().shape, gpt2));
  // A LayerNorm without its bias cannot be built: refused naming the field.
  nlohmann::json no_bias = legacy_shape_record(gpt2, true);
  no_bias["model"]["shape"]["norm_bias"] = false;
  CHECK_THAT(read_checkpoint_model(no_bias, "ckpt").status().message(),
             Catch::Contains("checkpoint ckpt: model.shape.norm_bias"));
}

}  // namespace
}  // namespace zinf::train
