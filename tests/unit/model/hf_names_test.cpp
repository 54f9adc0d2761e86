// The Hugging Face name map against the model it describes: for GPT-2 shapes (tied and untied,
// tiled), every element of every parameter of the real Gpt's table is covered exactly once, the
// transposes index as GPT-2's Conv1D stores [in, out], and the config.json reads back (through the
// project's own HF config import) as the same shape.
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

TEST_CASE("hf_names: GPT-2 tensors cover every element of the Gpt's parameters exactly once", "[hf_names]") {
  const bool tied = GENERATE(true, false);
  const std::int64_t tiling = GENERATE(1, 3);
  GptConfig config;
  config.shape = small_shape(tied);
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
  CHECK(tensors.value().back().name == (tied ? "transformer.ln_f.bias" : "lm_head.weight"));
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
  spec::ModelShape llama = small_shape(true);
  llama.norm = spec::NormKind::kRmsNorm;
  CHECK_THAT(hf_tensors(llama).status().message(), Catch::Contains("model:"));
}

}  // namespace
}  // namespace zinf::model
