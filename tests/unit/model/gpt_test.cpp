// zinf::model::Gpt against the PyTorch reference (tests/fixtures/gpt_tiny, float64 TorchGPT):
// loss and every parameter gradient, tied and untied; checkpointing on/off bit-identical; tiling
// 1 vs 4; determinism; memory budget; validation errors; the ParamSource/GradSink discipline.
#include "libengine/model/gpt.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "libengine/device/cpu_device.h"
#include "tests/catch.h"
#include "tests/unit/model/model_test_support.h"

namespace zinf::model {
namespace {

using testing::GptFixture;
using testing::RecordingGrads;
using testing::RecordingParams;

GptConfig fixture_config(const GptFixture& f) {
  GptConfig config;
  const auto& m = f.manifest;
  config.shape = spec::gpt_like_shape(m["layers"], m["hidden"], m["heads"], m["vocab"], m["max_positions"]);
  config.shape.tied_embeddings = m["tied_embeddings"];
  if (m.contains("attn_out_bias")) config.shape.attn_out_bias = m["attn_out_bias"];
  config.batch = m["batch"];
  config.seq = m["seq"];
  return config;
}

struct Run {
  double loss = 0;
  std::map<std::string, std::vector<double>> grads;
  std::vector<std::vector<float>> raw;  // per ParamId
};

// Builds the model for `config` with the fixture's values, runs forward_backward once, checks the
// call discipline, and returns loss and gradients.
Run run_model(const GptConfig& config, const GptFixture& f, float loss_scale = 1.0f) {
  auto device = device::make_cpu_device({});
  auto gpt = Gpt::create(config, *device);
  REQUIRE(gpt.is_ok());
  const ParamTable& table = gpt.value()->params();
  RecordingParams params(table);
  RecordingGrads grads(table);
  testing::set_params_by_name(table, params, f.values);
  auto loss = gpt.value()->forward_backward(f.tokens, f.targets, params, grads, loss_scale);
  REQUIRE(loss.is_ok());
  // acquire → release discipline: nothing acquired twice at once, everything released.
  CHECK(params.double_acquires == 0);
  CHECK(params.unmatched_releases == 0);
  CHECK(params.still_held() == 0);
  CHECK(params.max_held <= 2);  // a weight and its bias (or wte and wpe) at most
  // grad_buffer → commit discipline: every gradient committed exactly once, never touched after.
  CHECK(grads.use_after_commit == 0);
  for (ParamId id = 0; id < table.size(); ++id) {
    INFO(table[id].name);
    CHECK(grads.commits(id) == 1);
  }
  Run run;
  run.loss = loss.value();
  run.grads = testing::grads_by_name(table, grads);
  for (ParamId id = 0; id < table.size(); ++id) run.raw.push_back(grads.grad(id));
  return run;
}

void check_against_fixture(const GptFixture& f, const Run& run) {
  CHECK(std::abs(run.loss - f.loss) <= 1e-5 * std::abs(f.loss));
  REQUIRE(run.grads.size() == f.grads.size());
  for (const auto& [name, ref] : f.grads) {
    INFO(name);
    REQUIRE(run.grads.count(name) == 1);
    const std::vector<double>& got = run.grads.at(name);
    REQUIRE(got.size() == ref.size());
    double diff2 = 0, ref2 = 0, ref_max = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      diff2 += (got[i] - ref[i]) * (got[i] - ref[i]);
      ref2 += ref[i] * ref[i];
      ref_max = std::max(ref_max, std::abs(ref[i]));
    }
    REQUIRE(ref2 > 0);  // every parameter of the fixture gets a gradient
    CHECK(std::sqrt(diff2 / ref2) <= 1e-4);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      if (std::abs(got[i] - ref[i]) > 1e-4 * ref_max + 1e-4 * std::abs(ref[i])) ++bad;
    }
    CHECK(bad == 0);
  }
}

// Every gradient of `got` within `tolerance` (relative L2) of `ref`'s, by name.
void check_grads_close(const Run& got, const Run& ref, double tolerance) {
  for (const auto& [name, want] : ref.grads) {
    INFO(name);
    const std::vector<double>& have = got.grads.at(name);
    double diff2 = 0, ref2 = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      diff2 += (have[i] - want[i]) * (have[i] - want[i]);
      ref2 += want[i] * want[i];
    }
    CHECK(std::sqrt(diff2 / ref2) <= tolerance);
  }
}

TEST_CASE("Gpt matches the PyTorch fixture: loss and every gradient, tied embeddings") {
  const GptFixture f = testing::load_gpt_fixture("tied");
  GptConfig config = fixture_config(f);
  REQUIRE(config.shape.tied_embeddings);
  check_against_fixture(f, run_model(config, f));
}

TEST_CASE("Gpt matches the PyTorch fixture: loss and every gradient, untied head without attention-output bias") {
  const GptFixture f = testing::load_gpt_fixture("untied");
  GptConfig config = fixture_config(f);
  REQUIRE_FALSE(config.shape.tied_embeddings);
  REQUIRE_FALSE(config.shape.attn_out_bias);
  check_against_fixture(f, run_model(config, f));
}

TEST_CASE("Gpt with activation checkpointing gives the same bits as without, and is deterministic") {
  for (const char* variant : {"tied", "untied"}) {
    INFO(variant);
    const GptFixture f = testing::load_gpt_fixture(variant);
    GptConfig config = fixture_config(f);
    const Run plain = run_model(config, f);
    const Run again = run_model(config, f);
    config.activation_checkpointing = true;
    const Run checkpointed = run_model(config, f);
    CHECK(std::memcmp(&plain.loss, &checkpointed.loss, sizeof(double)) == 0);
    CHECK(std::memcmp(&plain.loss, &again.loss, sizeof(double)) == 0);
    REQUIRE(plain.raw.size() == checkpointed.raw.size());
    for (std::size_t id = 0; id < plain.raw.size(); ++id) {
      CHECK(plain.raw[id] == checkpointed.raw[id]);
      CHECK(plain.raw[id] == again.raw[id]);
    }
  }
}

TEST_CASE("Gpt checkpointing keeps one block's activations instead of L") {
  const GptFixture f = testing::load_gpt_fixture("tied");
  GptConfig config = fixture_config(f);
  auto device = device::make_cpu_device({});
  auto plain = Gpt::create(config, *device);
  REQUIRE(plain.is_ok());
  config.activation_checkpointing = true;
  auto checkpointed = Gpt::create(config, *device);
  REQUIRE(checkpointed.is_ok());
  TensorCarver counter(nullptr);
  Block::carve_activations(counter, config.shape, config.batch, config.seq);
  // L = 2: exactly one block's activation buffer fewer.
  CHECK(plain.value()->activation_bytes() - checkpointed.value()->activation_bytes() == counter.bytes());
  CHECK(device->memory().usage().current_bytes ==
        plain.value()->activation_bytes() + checkpointed.value()->activation_bytes());
}

TEST_CASE("Gpt with tiling 4 agrees with tiling 1 (MLP linears and the untied head)") {
  const GptFixture f = testing::load_gpt_fixture("untied");
  GptConfig config = fixture_config(f);
  const Run whole = run_model(config, f);
  config.tiling = 4;
  auto device = device::make_cpu_device({});
  auto tiled_model = Gpt::create(config, *device);
  REQUIRE(tiled_model.is_ok());
  std::size_t tiles = 0;
  for (const ParamInfo& info : tiled_model.value()->params().params()) {
    if (info.name.find(".tile") != std::string::npos) ++tiles;
  }
  // Per block fc.weight, fc.bias, proj.weight, proj.bias; and head.weight: 4 tiles each.
  CHECK(tiles == (2 * 4 + 1) * 4);
  CHECK(tiled_model.value()->params().total_numel() ==
        Gpt::create(fixture_config(f), *device).value()->params().total_numel());
  const Run tiled = run_model(config, f);
  CHECK(std::abs(tiled.loss - whole.loss) <= 1e-6 * std::abs(whole.loss));
  check_grads_close(tiled, whole, 1e-5);
}

TEST_CASE("Gpt with the token table tiled over the vocabulary: bit-identical untied, close tied") {
  for (const char* variant : {"untied", "tied"}) {
    INFO(variant);
    const GptFixture f = testing::load_gpt_fixture(variant);
    GptConfig config = fixture_config(f);
    const bool tied = config.shape.tied_embeddings;
    const Run whole = run_model(config, f);
    // Untied, only the embedding: each position is written by one tile with the same addition,
    // each gradient row gets the same additions in the same order — the same bits. Tied, the head
    // splits over the same tiles, and its input gradient sums the tiles' products one after another
    // (fp32 reassociation of the V-long dot products), so it agrees to rounding.
    config.operator_tiling = spec::OperatorTiling{1, 1, tied ? 3 : 1, 3};
    const Run tiled = run_model(config, f);
    if (!tied) {
      CHECK(std::memcmp(&tiled.loss, &whole.loss, sizeof(double)) == 0);
      for (const auto& [name, ref] : whole.grads) {
        INFO(name);
        CHECK(tiled.grads.at(name) == ref);
      }
      continue;
    }
    CHECK(std::abs(tiled.loss - whole.loss) <= 1e-6 * std::abs(whole.loss));
    check_grads_close(tiled, whole, 1e-5);
  }
}

TEST_CASE("Gpt tiled parameters start from the untiled model's values") {
  for (const char* variant : {"tied", "untied"}) {
    INFO(variant);
    const GptFixture f = testing::load_gpt_fixture(variant);
    GptConfig config = fixture_config(f);
    auto device = device::make_cpu_device({});
    auto whole = Gpt::create(config, *device);
    REQUIRE(whole.is_ok());
    const bool tied = config.shape.tied_embeddings;
    config.operator_tiling = spec::OperatorTiling{2, 3, tied ? 5 : 4, 5};
    auto tiled = Gpt::create(config, *device);
    REQUIRE(tiled.is_ok());
    const ParamTable& w = whole.value()->params();
    const ParamTable& t = tiled.value()->params();
    CHECK(t.size() > w.size());
    std::map<std::string, std::vector<float>> joined;
    for (ParamId id = 0; id < t.size(); ++id) {
      std::vector<float> values(static_cast<std::size_t>(t[id].numel));
      t.init_values(7, id, 0, values);
      std::vector<float>& dst = joined[testing::untiled_name(t[id].name)];
      dst.insert(dst.end(), values.begin(), values.end());
    }
    REQUIRE(joined.size() == static_cast<std::size_t>(w.size()));
    for (ParamId id = 0; id < w.size(); ++id) {
      INFO(w[id].name);
      std::vector<float> values(static_cast<std::size_t>(w[id].numel));
      w.init_values(7, id, 0, values);
      CHECK(joined.at(w[id].name) == values);
    }
  }
}

TEST_CASE("Gpt keeps its checkpoints in host memory: bit-identical, three device slots, bytes each way") {
  for (const char* variant : {"tied", "untied"}) {
    INFO(variant);
    const GptFixture f = testing::load_gpt_fixture(variant);
    GptConfig config = fixture_config(f);
    config.shape.layers = 2;
    config.activation_checkpointing = true;
    const Run device_run = run_model(config, f);
    config.offload_checkpoints = true;
    // L = 2: three checkpoints fit the ring of three slots, nothing goes to host memory.
    auto device = device::make_cpu_device({});
    auto shallow = Gpt::create(config, *device);
    REQUIRE(shallow.is_ok());
    CHECK_FALSE(shallow.value()->checkpoints().offloaded());
    CHECK(run_model(config, f).raw == device_run.raw);
  }
  // Deeper: the fixture's values do not cover more layers, so compare two runs of the same model
  // over identical parameters with the checkpoints on the device and in host memory.
  const GptFixture f = testing::load_gpt_fixture("tied");
  GptConfig config = fixture_config(f);
  config.shape.layers = 6;
  config.activation_checkpointing = true;
  std::vector<std::vector<float>> grads[2];
  double losses[2] = {0, 0};
  CheckpointTraffic traffic[2];
  for (const int offload : {0, 1}) {
    config.offload_checkpoints = offload == 1;
    auto device = device::make_cpu_device({});
    auto gpt = Gpt::create(config, *device);
    REQUIRE(gpt.is_ok());
    const ParamTable& table = gpt.value()->params();
    RecordingParams params(table);
    RecordingGrads sink(table);
    for (ParamId id = 0; id < table.size(); ++id) {
      std::vector<float>& values = params.values(id);
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.05f * std::sin(static_cast<float>(31 * id + i));
    }
    auto loss = gpt.value()->forward_backward(f.tokens, f.targets, params, sink);
    REQUIRE(loss.is_ok());
    // A forward-only pass moves nothing.
    const CheckpointTraffic before = gpt.value()->checkpoints().traffic();
    REQUIRE(gpt.value()->forward(f.tokens, f.targets, params).is_ok());
    CHECK(gpt.value()->checkpoints().traffic().to_host_bytes == before.to_host_bytes);
    losses[offload] = loss.value();
    traffic[offload] = before;
    for (ParamId id = 0; id < table.size(); ++id) grads[offload].push_back(sink.grad(id));
    if (offload == 1) {
      // 7 checkpoints, 3 device slots: checkpoints 0..3 are overwritten in the forward pass.
      CHECK(gpt.value()->checkpoints().host_checkpoints() == 4);
      CHECK(gpt.value()->checkpoints().device_slots() == 3);
    }
  }
  const std::uint64_t checkpoint_bytes =
      static_cast<std::uint64_t>(config.batch * config.seq * config.shape.hidden) * 4;
  CHECK(traffic[0].to_host_bytes == 0);
  CHECK(traffic[1].to_host_bytes == 4 * checkpoint_bytes);
  CHECK(traffic[1].to_device_bytes == 4 * checkpoint_bytes);
  CHECK(std::memcmp(&losses[0], &losses[1], sizeof(double)) == 0);
  CHECK(grads[0] == grads[1]);
}

TEST_CASE("Gpt scales the gradients by loss_scale but returns the unscaled loss") {
  const GptFixture f = testing::load_gpt_fixture("tied");
  const GptConfig config = fixture_config(f);
  const Run plain = run_model(config, f);
  const Run scaled = run_model(config, f, 1024.0f);
  CHECK(scaled.loss == plain.loss);
  for (std::size_t id = 0; id < plain.raw.size(); ++id) {
    for (std::size_t i = 0; i < plain.raw[id].size(); ++i) {
      CHECK(scaled.raw[id][i] == Approx(1024.0 * plain.raw[id][i]).epsilon(1e-4).margin(1e-9));
    }
  }
}

TEST_CASE("Gpt::forward returns the same loss as forward_backward and touches no gradient") {
  const GptFixture f = testing::load_gpt_fixture("untied");
  const GptConfig config = fixture_config(f);
  auto device = device::make_cpu_device({});
  auto gpt = Gpt::create(config, *device);
  REQUIRE(gpt.is_ok());
  RecordingParams params(gpt.value()->params());
  testing::set_params_by_name(gpt.value()->params(), params, f.values);
  auto loss = gpt.value()->forward(f.tokens, f.targets, params);
  REQUIRE(loss.is_ok());
  CHECK(loss.value() == run_model(config, f).loss);
  CHECK(params.still_held() == 0);
}

TEST_CASE("Gpt parameter table: names, shapes, groups, init and weight decay follow GPT-2") {
  GptConfig config;
  config.shape = spec::gpt_like_shape(3, 64, 4, 100, 32);
  config.shape.tied_embeddings = false;
  config.seq = 8;
  auto device = device::make_cpu_device({});
  auto gpt = Gpt::create(config, *device);
  REQUIRE(gpt.is_ok());
  const ParamTable& t = gpt.value()->params();
  CHECK(static_cast<std::uint64_t>(t.total_numel()) == spec::count_parameters(config.shape).total);
  CHECK(t[0].name == "wte");
  CHECK(t[0].shape == Shape{100, 64});
  CHECK(t[1].name == "wpe");
  CHECK(t[1].shape == Shape{32, 64});
  const std::vector<std::string> block_names = {
      "ln1.weight", "ln1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
      "ln2.weight", "ln2.bias", "mlp.fc.weight",   "mlp.fc.bias",   "mlp.proj.weight",  "mlp.proj.bias"};
  for (std::int32_t i = 0; i < 3; ++i) {
    for (std::size_t k = 0; k < block_names.size(); ++k) {
      const ParamInfo& p = t[static_cast<ParamId>(2 + 12 * i + static_cast<std::int32_t>(k))];
      CHECK(p.name == "blocks." + std::to_string(i) + "." + block_names[k]);
      CHECK(p.group == i + 1);
      CHECK(p.weight_decay == (p.shape.rank() == 2));
    }
  }
  const ParamInfo& proj = t[2 + 4];
  CHECK(proj.init_std == Approx(0.02 / std::sqrt(6.0)));
  CHECK(t[2 + 10].init_std == Approx(0.02 / std::sqrt(6.0)));
  CHECK(t[2 + 2].init_std == Approx(0.02));
  CHECK(t[2 + 0].init == ParamInit::kOnes);
  CHECK(t[2 + 1].init == ParamInit::kZeros);
  CHECK(t[2 + 3].init == ParamInit::kZeros);
  CHECK(t[2 + 10].shape == Shape{64, 256});
  CHECK(t[38].name == "lnf.weight");
  CHECK(t[39].name == "lnf.bias");
  CHECK(t[40].name == "head.weight");
  CHECK(t[40].shape == Shape{100, 64});
  CHECK(t[40].group == 4);
  CHECK(t.size() == 41);
}

TEST_CASE("Gpt honours the bias flags and the tied head") {
  GptConfig config;
  config.shape = spec::gpt_like_shape(1, 32, 4, 50, 16);
  config.shape.qkv_bias = false;
  config.shape.mlp_bias = false;
  config.seq = 4;
  auto device = device::make_cpu_device({});
  auto gpt = Gpt::create(config, *device);
  REQUIRE(gpt.is_ok());
  std::vector<std::string> names;
  for (const ParamInfo& p : gpt.value()->params().params()) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{
                     "wte", "wpe", "blocks.0.ln1.weight", "blocks.0.ln1.bias", "blocks.0.attn.qkv.weight",
                     "blocks.0.attn.proj.weight", "blocks.0.attn.proj.bias", "blocks.0.ln2.weight", "blocks.0.ln2.bias",
                     "blocks.0.mlp.fc.weight", "blocks.0.mlp.proj.weight", "lnf.weight", "lnf.bias"});
  CHECK(static_cast<std::uint64_t>(gpt.value()->params().total_numel()) == spec::count_parameters(config.shape).total);
}

TEST_CASE("Gpt::create fails with OutOfMemory naming the buffer that did not fit") {
  const GptFixture f = testing::load_gpt_fixture("tied");
  const GptConfig config = fixture_config(f);
  const std::int64_t r = config.batch * config.seq, c = config.shape.hidden;
  TensorCarver block(nullptr);
  Block::carve_activations(block, config.shape, config.batch, config.seq);
  // Token ids and the L+1 block inputs, then room for block 0's activations only.
  const std::uint64_t fits = 2 * r * 4 + (config.shape.layers + 1) * r * c * 4 + block.bytes();
  auto device = device::make_cpu_device({.memory_budget_bytes = fits + 64});
  auto gpt = Gpt::create(config, *device);
  REQUIRE_FALSE(gpt.is_ok());
  CHECK(gpt.status().code() == ErrorCode::kOutOfMemory);
  CHECK_THAT(gpt.status().message(), Catch::Contains("activations of block 1"));
  CHECK(device->memory().usage().current_bytes == 0);  // everything allocated so far was returned

  // With checkpointing the same budget holds the one shared block buffer; what fails is the next one.
  GptConfig checkpointed = config;
  checkpointed.activation_checkpointing = true;
  auto gpt2 = Gpt::create(checkpointed, *device);
  REQUIRE_FALSE(gpt2.is_ok());
  CHECK_THAT(gpt2.status().message(), Catch::Contains("final layer norm activations"));
}

TEST_CASE("Gpt config validation names the field") {
  const auto error_of = [](GptConfig config) {
    const Status status = validate(config);
    CHECK(status.code() == ErrorCode::kInvalidArgument);
    return status.message();
  };
  GptConfig good;
  good.shape = spec::gpt_like_shape(2, 64, 4, 100, 32);
  good.seq = 32;
  CHECK(validate(good).is_ok());

  // The Llama-family options are the model's own now; what it does not implement is refused.
  GptConfig c = good;
  c.shape.norm = spec::NormKind::kRmsNorm;
  c.shape.position = spec::PositionKind::kRotary;
  c.shape.mlp = spec::MlpKind::kGated;
  c.shape.kv_heads = 2;
  c.shape.head_dim = 8;
  CHECK(validate(c).is_ok());
  c = good;
  c.shape.norm_bias = false;
  CHECK_THAT(error_of(c), Catch::StartsWith("model.norm_bias: false is not implemented for layernorm"));
  c = good;
  c.shape.kv_heads = 3;
  CHECK_THAT(error_of(c), Catch::StartsWith("model.kv_heads: 3 does not divide heads 4"));
  c = good;
  c.seq = 33;
  CHECK_THAT(error_of(c), Catch::StartsWith("seq: 33 is not in 1..32"));
  c = good;
  c.seq = 0;
  CHECK_THAT(error_of(c), Catch::StartsWith("seq: 0"));
  c = good;
  c.batch = 0;
  CHECK_THAT(error_of(c), Catch::StartsWith("batch: 0"));
  c = good;
  c.tiling = 0;
  CHECK_THAT(error_of(c), Catch::StartsWith("tiling: 0"));
  c = good;
  c.tiling = 65;
  CHECK_THAT(error_of(c), Catch::StartsWith("tiling: 65 is not in 1..64"));

  auto device = device::make_cpu_device({});
  c = good;
  c.shape.layers = -3;
  auto gpt = Gpt::create(c, *device);
  REQUIRE_FALSE(gpt.is_ok());
  CHECK_THAT(gpt.status().message(), Catch::StartsWith("model.layers: -3"));
}

TEST_CASE("Gpt rejects bad token ids and wrong lengths, naming the index and value") {
  GptConfig config;
  config.shape = spec::gpt_like_shape(1, 32, 4, 50, 16);
  config.batch = 2;
  config.seq = 4;
  auto device = device::make_cpu_device({});
  auto gpt = Gpt::create(config, *device);
  REQUIRE(gpt.is_ok());
  RecordingParams params(gpt.value()->params());
  RecordingGrads grads(gpt.value()->params());
  std::vector<std::int32_t> tokens(8, 1), targets(8, 2);
  tokens[5] = 50;
  auto r = gpt.value()->forward_backward(tokens, targets, params, grads);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(r.status().message(), Catch::StartsWith("tokens[5]: 50 is not a token id"));
  tokens[5] = 1;
  targets[7] = -1;
  auto r2 = gpt.value()->forward(tokens, targets, params);
  REQUIRE_FALSE(r2.is_ok());
  CHECK_THAT(r2.status().message(), Catch::StartsWith("targets[7]: -1"));
  std::vector<std::int32_t> short_tokens(7, 1);
  auto r3 = gpt.value()->forward(short_tokens, targets, params);
  REQUIRE_FALSE(r3.is_ok());
  CHECK_THAT(r3.status().message(), Catch::StartsWith("tokens: 7 ids given, batch*seq is 8"));
  CHECK(params.acquires == 0);  // rejected before any parameter was touched
}

TEST_CASE("Gpt::flops_per_step counts matmuls, the head and causal attention") {
  GptConfig config;
  config.shape = spec::gpt_like_shape(4, 1024, 16, 50257, 1024);
  config.batch = 8;
  config.seq = 256;
  auto device = device::make_cpu_device({});
  auto gpt = Gpt::create(config, *device);
  REQUIRE(gpt.is_ok());
  // Per token: 12·C²·L matmul MACs + V·C head MACs; per layer attention B·T²·C MACs.
  const double tokens = 8.0 * 256.0;
  const double macs = tokens * (12.0 * 1024 * 1024 * 4 + 50257.0 * 1024) + 4.0 * 8 * 256.0 * 256.0 * 1024;
  CHECK(gpt.value()->flops_per_step() == Approx(6.0 * macs).epsilon(1e-12));
}

// A whole-model finite-difference spot check in fp32 of a few parameters, independent of PyTorch.
TEST_CASE("Gpt gradient agrees with a finite difference of its own loss") {
  const GptFixture f = testing::load_gpt_fixture("untied");
  const GptConfig config = fixture_config(f);
  auto device = device::make_cpu_device({});
  auto gpt = Gpt::create(config, *device);
  REQUIRE(gpt.is_ok());
  const ParamTable& table = gpt.value()->params();
  RecordingParams params(table);
  RecordingGrads grads(table);
  testing::set_params_by_name(table, params, f.values);
  REQUIRE(gpt.value()->forward_backward(f.tokens, f.targets, params, grads).is_ok());
  for (const char* name : {"wpe", "blocks.0.attn.qkv.weight", "blocks.1.mlp.fc.bias", "head.weight"}) {
    INFO(name);
    ParamId id = -1;
    for (ParamId i = 0; i < table.size(); ++i) {
      if (table[i].name == name) id = i;
    }
    REQUIRE(id >= 0);
    // The element with the largest gradient: its difference quotient is well above fp32 noise.
    const std::vector<float>& g = grads.grad(id);
    const auto at = static_cast<std::size_t>(
        std::max_element(g.begin(), g.end(), [](float a, float b) { return std::abs(a) < std::abs(b); }) - g.begin());
    const float saved = params.values(id)[at];
    const float h = 1e-2f;
    params.values(id)[at] = saved + h;
    const double up = gpt.value()->forward(f.tokens, f.targets, params).value();
    params.values(id)[at] = saved - h;
    const double down = gpt.value()->forward(f.tokens, f.targets, params).value();
    params.values(id)[at] = saved;
    const double fd = (up - down) / (2.0 * static_cast<double>(h));
    CHECK(fd == Approx(g[at]).epsilon(2e-2));
  }
}

}  // namespace
}  // namespace zinf::model
