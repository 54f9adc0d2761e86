// The decoder with Llama-family options (RMSNorm, SwiGLU, RoPE, grouped-query attention, explicit
// head_dim, q/k/v biases, untied head): loss and every parameter gradient of tiny models against an
// fp64 reference written here from the formulas (HF transformers' LlamaForCausalLM / Qwen2's
// module math: rotate_half RoPE, repeat_kv, silu(gate) * up), the gradients from central finite
// differences of that reference; the parameter count equals spec::count_parameters for small
// configs of all five HF families; checkpointing is bit-identical and tiling agrees.
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/device/cpu_device.h"
#include "libengine/model/gpt.h"
#include "libengine/spec/hf_config.h"
#include "tests/catch.h"
#include "tests/unit/model/model_test_support.h"

namespace zinf::model {
namespace {

using Params = std::map<std::string, std::vector<double>>;
using testing::RecordingGrads;
using testing::RecordingParams;

struct Tiny {
  spec::ModelShape shape;
  std::int64_t batch = 2, seq = 5;
};

// Qwen2-like: GQA 4 query / 2 K/V heads, head_dim 6 (heads * hd != hidden), q/k/v biases, untied.
Tiny qwen_like() {
  Tiny t;
  spec::ModelShape& s = t.shape;
  s.name = "tiny-qwen2";
  s.layers = 2, s.hidden = 16, s.heads = 4, s.kv_heads = 2, s.head_dim = 6, s.ffn_hidden = 20, s.vocab = 23;
  s.max_positions = 8;
  s.norm = spec::NormKind::kRmsNorm, s.norm_bias = false, s.norm_eps = 1e-6;
  s.mlp = spec::MlpKind::kGated, s.position = spec::PositionKind::kRotary;
  s.qkv_bias = true, s.attn_out_bias = false, s.mlp_bias = false, s.tied_embeddings = false;
  return t;
}

// Llama-like MQA (one K/V head), head_dim 10, half of each head rotating, linear rope scaling, tied.
Tiny mqa_like() {
  Tiny t = qwen_like();
  spec::ModelShape& s = t.shape;
  s.name = "tiny-mqa";
  s.heads = 2, s.kv_heads = 1, s.head_dim = 10, s.ffn_hidden = 13;
  s.qkv_bias = false, s.tied_embeddings = true;
  s.rope.partial_rotary_factor = 0.4;  // rd = 4
  s.rope.scaling = spec::RopeScalingKind::kLinear;
  s.rope.factor = 2.0;
  s.rope.theta = 500.0;
  return t;
}

const std::vector<double>& at(const Params& p, const std::string& name) { return p.at(name); }

// y [R,OUT] = x [R,IN] · W[OUT,IN]ᵀ (+ b)
std::vector<double> linear(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>* b,
                           std::size_t rows, std::size_t in, std::size_t out) {
  std::vector<double> y(rows * out);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t o = 0; o < out; ++o) {
      double sum = b != nullptr ? (*b)[o] : 0.0;
      for (std::size_t i = 0; i < in; ++i) sum += x[r * in + i] * w[o * in + i];
      y[r * out + o] = sum;
    }
  }
  return y;
}

std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& w, std::size_t rows, std::size_t c,
                            double eps) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (std::size_t i = 0; i < c; ++i) ss += x[r * c + i] * x[r * c + i];
    const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(c) + eps);
    for (std::size_t i = 0; i < c; ++i) y[r * c + i] = x[r * c + i] * rstd * w[i];
  }
  return y;
}

// The mean next-token cross-entropy of the reference model.
double reference_loss(const Tiny& t, const Params& p, const std::vector<std::int32_t>& tokens,
                      const std::vector<std::int32_t>& targets) {
  const spec::ModelShape& s = t.shape;
  const auto B = static_cast<std::size_t>(t.batch), T = static_cast<std::size_t>(t.seq);
  const auto C = static_cast<std::size_t>(s.hidden), NH = static_cast<std::size_t>(s.heads);
  const auto NKV = static_cast<std::size_t>(s.kv_heads), hd = static_cast<std::size_t>(s.head_dim);
  const auto F = static_cast<std::size_t>(s.ffn_hidden), V = static_cast<std::size_t>(s.vocab);
  const std::size_t R = B * T, Q = (NH + 2 * NKV) * hd, A = NH * hd;
  const auto rd = static_cast<std::size_t>(spec::rotary_dim(s)), half = rd / 2;
  std::vector<double> x(R * C);
  for (std::size_t r = 0; r < R; ++r) {
    for (std::size_t i = 0; i < C; ++i) x[r * C + i] = at(p, "wte")[static_cast<std::size_t>(tokens[r]) * C + i];
  }
  for (std::int64_t layer = 0; layer < s.layers; ++layer) {
    const std::string pre = "blocks." + std::to_string(layer);
    const std::vector<double> h = rmsnorm(x, at(p, pre + ".ln1.weight"), R, C, s.norm_eps);
    std::vector<double> qkv =
        linear(h, at(p, pre + ".attn.qkv.weight"), s.qkv_bias ? &at(p, pre + ".attn.qkv.bias") : nullptr, R, C, Q);
    // RoPE on the NH query heads and the NKV key heads (rotate_half: j pairs with j + rd/2).
    for (std::size_t r = 0; r < R; ++r) {
      const double pos = static_cast<double>(r % T);
      for (std::size_t head = 0; head < NH + NKV; ++head) {
        double* v = qkv.data() + r * Q + head * hd;
        for (std::size_t j = 0; j < half; ++j) {
          double inv_freq = 1.0 / std::pow(s.rope.theta, 2.0 * static_cast<double>(j) / static_cast<double>(rd));
          if (s.rope.scaling == spec::RopeScalingKind::kLinear) inv_freq /= s.rope.factor;
          const double c = std::cos(pos * inv_freq), sn = std::sin(pos * inv_freq);
          const double a = v[j], b = v[j + half];
          v[j] = a * c - b * sn;
          v[j + half] = b * c + a * sn;
        }
      }
    }
    std::vector<double> attn(R * A, 0.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    for (std::size_t b = 0; b < B; ++b) {
      for (std::size_t head = 0; head < NH; ++head) {
        const std::size_t g = head / (NH / NKV);
        for (std::size_t i = 0; i < T; ++i) {
          std::vector<double> w(i + 1);
          double max = -1e300;
          for (std::size_t j = 0; j <= i; ++j) {
            double d = 0;
            for (std::size_t k = 0; k < hd; ++k) {
              d += qkv[(b * T + i) * Q + head * hd + k] * qkv[(b * T + j) * Q + NH * hd + g * hd + k];
            }
            w[j] = d * scale;
            max = std::max(max, w[j]);
          }
          double sum = 0;
          for (double& v : w) sum += (v = std::exp(v - max));
          for (std::size_t k = 0; k < hd; ++k) {
            double o = 0;
            for (std::size_t j = 0; j <= i; ++j) o += w[j] / sum * qkv[(b * T + j) * Q + (NH + NKV) * hd + g * hd + k];
            attn[(b * T + i) * A + head * hd + k] = o;
          }
        }
      }
    }
    const std::vector<double> o = linear(attn, at(p, pre + ".attn.proj.weight"), nullptr, R, A, C);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    const std::vector<double> h2 = rmsnorm(x, at(p, pre + ".ln2.weight"), R, C, s.norm_eps);
    const std::vector<double> gate = linear(h2, at(p, pre + ".mlp.gate.weight"), nullptr, R, C, F);
    std::vector<double> act = linear(h2, at(p, pre + ".mlp.fc.weight"), nullptr, R, C, F);
    for (std::size_t i = 0; i < act.size(); ++i) act[i] *= gate[i] / (1.0 + std::exp(-gate[i]));
    const std::vector<double> down = linear(act, at(p, pre + ".mlp.proj.weight"), nullptr, R, F, C);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += down[i];
  }
  const std::vector<double> hf = rmsnorm(x, at(p, "lnf.weight"), R, C, s.norm_eps);
  const std::vector<double> logits = linear(hf, at(p, s.tied_embeddings ? "wte" : "head.weight"), nullptr, R, C, V);
  double loss = 0;
  for (std::size_t r = 0; r < R; ++r) {
    double max = -1e300;
    for (std::size_t v = 0; v < V; ++v) max = std::max(max, logits[r * V + v]);
    double sum = 0;
    for (std::size_t v = 0; v < V; ++v) sum += std::exp(logits[r * V + v] - max);
    loss += max + std::log(sum) - logits[r * V + static_cast<std::size_t>(targets[r])];
  }
  return loss / static_cast<double>(R);
}

GptConfig config_of(const Tiny& t) {
  GptConfig config;
  config.shape = t.shape;
  config.batch = t.batch;
  config.seq = t.seq;
  return config;
}

// Random values for every parameter of `table` (norm weights near 1), by whole-tensor name.
Params random_params(const ParamTable& table, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 0.3);
  Params out;
  for (ParamId id = 0; id < table.size(); ++id) {
    std::vector<double>& v = out[testing::untiled_name(table[id].name)];
    const bool norm = table[id].name.find("ln") != std::string::npos;
    for (std::int64_t i = 0; i < table[id].numel; ++i) {
      // fp32-representable, so the fp64 reference sees exactly the model's values.
      v.push_back(static_cast<float>(norm ? 1.0 + 0.1 * normal(rng) : normal(rng)));
    }
  }
  return out;
}

struct Data {
  std::vector<std::int32_t> tokens, targets;
};
Data random_data(const Tiny& t, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Data d;
  for (std::int64_t i = 0; i < t.batch * t.seq; ++i) {
    d.tokens.push_back(static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(t.shape.vocab)));
    d.targets.push_back(static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(t.shape.vocab)));
  }
  return d;
}

struct ModelRun {
  double loss = 0;
  Params grads;
  std::vector<std::vector<float>> raw;
};
ModelRun run_model(const GptConfig& config, const Params& values, const Data& d) {
  auto device = device::make_cpu_device({});
  auto gpt = Gpt::create(config, *device);
  INFO(gpt.status().message());
  REQUIRE(gpt.is_ok());
  const ParamTable& table = gpt.value()->params();
  RecordingParams params(table);
  RecordingGrads grads(table);
  testing::set_params_by_name(table, params, values);
  auto loss = gpt.value()->forward_backward(d.tokens, d.targets, params, grads);
  REQUIRE(loss.is_ok());
  CHECK(params.double_acquires == 0);
  CHECK(params.still_held() == 0);
  CHECK(grads.use_after_commit == 0);
  for (ParamId id = 0; id < table.size(); ++id) CHECK(grads.commits(id) == 1);
  ModelRun run;
  run.loss = loss.value();
  run.grads = testing::grads_by_name(table, grads);
  for (ParamId id = 0; id < table.size(); ++id) run.raw.push_back(grads.grad(id));
  return run;
}

TEST_CASE("Llama-family decoder: loss and every gradient match an fp64 reference", "[model][llama]") {
  const Tiny tiny = GENERATE(qwen_like(), mqa_like());
  INFO(tiny.shape.name);
  auto device = device::make_cpu_device({});
  auto gpt = Gpt::create(config_of(tiny), *device);
  REQUIRE(gpt.is_ok());
  Params values = random_params(gpt.value()->params(), 11);
  const Data data = random_data(tiny, 12);
  const ModelRun run = run_model(config_of(tiny), values, data);
  const double ref_loss = reference_loss(tiny, values, data.tokens, data.targets);
  CHECK(run.loss == Approx(ref_loss).epsilon(1e-6));
  for (auto& [name, v] : values) {
    INFO(name);
    const std::vector<double>& got = run.grads.at(name);
    double diff2 = 0, ref2 = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const double saved = v[i], h = 1e-5;
      v[i] = saved + h;
      const double up = reference_loss(tiny, values, data.tokens, data.targets);
      v[i] = saved - h;
      const double down = reference_loss(tiny, values, data.tokens, data.targets);
      v[i] = saved;
      const double fd = (up - down) / (2 * h);
      diff2 += (got[i] - fd) * (got[i] - fd);
      ref2 += fd * fd;
    }
    REQUIRE(ref2 > 0);
    CHECK(std::sqrt(diff2 / ref2) <= 1e-4);
  }
}

TEST_CASE("Llama-family decoder: checkpointing is bit-identical, tiling agrees", "[model][llama]") {
  const Tiny tiny = qwen_like();
  auto device = device::make_cpu_device({});
  auto gpt = Gpt::create(config_of(tiny), *device);
  REQUIRE(gpt.is_ok());
  const Params values = random_params(gpt.value()->params(), 5);
  const Data data = random_data(tiny, 6);
  const ModelRun plain = run_model(config_of(tiny), values, data);
  GptConfig checkpointed = config_of(tiny);
  checkpointed.activation_checkpointing = true;
  checkpointed.offload_checkpoints = true;
  const ModelRun ckpt = run_model(checkpointed, values, data);
  CHECK(ckpt.loss == plain.loss);
  CHECK(ckpt.raw == plain.raw);
  GptConfig tiled = config_of(tiny);
  tiled.operator_tiling = spec::OperatorTiling{3, 2, 4, 2};  // gate/up, down, the untied head, wte
  const ModelRun tiles = run_model(tiled, values, data);
  CHECK(tiles.loss == Approx(plain.loss).epsilon(1e-6));
  for (const auto& [name, want] : plain.grads) {
    INFO(name);
    const std::vector<double>& have = tiles.grads.at(name);
    double diff2 = 0, ref2 = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      diff2 += (have[i] - want[i]) * (have[i] - want[i]);
      ref2 += want[i] * want[i];
    }
    CHECK(std::sqrt(diff2 / ref2) <= 1e-5);
  }
}

TEST_CASE("the decoder's parameters number spec::count_parameters for every HF family", "[model][llama]") {
  using nlohmann::json;
  const json llama = {{"model_type", "llama"},    {"num_hidden_layers", 2},        {"hidden_size", 64},
                      {"num_attention_heads", 8}, {"num_key_value_heads", 2},      {"intermediate_size", 172},
                      {"vocab_size", 301},        {"max_position_embeddings", 64}, {"attention_bias", true},
                      {"mlp_bias", true}};
  json mistral = llama;
  mistral["model_type"] = "mistral";
  mistral["head_dim"] = 12;
  mistral["tie_word_embeddings"] = true;
  json qwen2 = llama;
  qwen2["model_type"] = "qwen2";
  qwen2["num_key_value_heads"] = 1;
  const json gpt2 = {{"model_type", "gpt2"}, {"n_layer", 2},      {"n_embd", 48},
                     {"n_head", 4},          {"vocab_size", 301}, {"n_positions", 64}};
  const json neox = {{"model_type", "gpt_neox"},     {"num_hidden_layers", 2},   {"hidden_size", 64},
                     {"num_attention_heads", 4},     {"intermediate_size", 256}, {"vocab_size", 301},
                     {"max_position_embeddings", 64}};
  for (const json& config : {llama, mistral, qwen2, gpt2, neox}) {
    INFO(config.dump());
    auto shape = spec::model_shape_from_hf_config(config, "config.json");
    INFO(shape.status().message());
    REQUIRE(shape.is_ok());
    GptConfig gpt_config;
    gpt_config.shape = shape.value();
    gpt_config.seq = 16;
    auto device = device::make_cpu_device({});
    auto gpt = Gpt::create(gpt_config, *device);
    INFO(gpt.status().message());
    REQUIRE(gpt.is_ok());
    std::uint64_t total = 0;
    for (ParamId id = 0; id < gpt.value()->params().size(); ++id) {
      total += static_cast<std::uint64_t>(gpt.value()->params()[id].numel);
    }
    CHECK(total == spec::count_parameters(shape.value()).total);
  }
}

}  // namespace
}  // namespace zinf::model
