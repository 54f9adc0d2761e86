#include "libengine/spec/model_shape.h"

#include "tests/catch.h"

namespace zinf::spec {
namespace {

TEST_CASE("gpt_like_shape reproduces GPT-2 small's published 124,439,808 parameters") {
  const ModelShape gpt2 = gpt_like_shape(12, 768, 12, 50257, 1024);
  REQUIRE(validate(gpt2).is_ok());
  const ParameterCount count = count_parameters(gpt2);
  CHECK(count.total == 124'439'808ULL);
  // By hand: wte 50257*768 + wpe 1024*768.
  CHECK(count.embeddings == 50257ULL * 768 + 1024ULL * 768);
  CHECK(count.head == 0);
  // One block: 2 LayerNorms (4h) + qkv (3h^2 + 3h) + proj (h^2 + h) + fc (4h^2 + 4h) + proj (4h^2 + h).
  const std::uint64_t h = 768;
  CHECK(count.per_layer == 12 * h * h + 13 * h);
  CHECK(count.largest_operator == 50257ULL * 768);  // the embedding table dominates at this size
}

TEST_CASE("the paper's 12*nl*hd^2 approximates the exact count for large shapes") {
  const ModelShape shape = gpt_like_shape(128, 25600, 200, 50257, 1024);
  const ParameterCount count = count_parameters(shape);
  const double paper = 12.0 * 128 * 25600.0 * 25600.0;
  CHECK(static_cast<double>(count.total) / paper == Approx(1.0).epsilon(0.002));
  CHECK(count.largest_operator == 4ULL * 25600 * 25600);  // the MLP matrix, 4*hd^2
}

TEST_CASE("a LLaMA-style shape counts gated MLP, GQA, RMSNorm and an untied head") {
  ModelShape shape;
  shape.layers = 2;
  shape.hidden = 64;
  shape.heads = 8;
  shape.kv_heads = 2;
  shape.head_dim = 8;
  shape.ffn_hidden = 172;
  shape.vocab = 100;
  shape.max_positions = 128;
  shape.norm = NormKind::kRmsNorm;
  shape.mlp = MlpKind::kGated;
  shape.position = PositionKind::kRotary;
  shape.qkv_bias = shape.attn_out_bias = shape.mlp_bias = false;
  shape.tied_embeddings = false;
  REQUIRE(validate(shape).is_ok());
  const ParameterCount count = count_parameters(shape);
  const std::uint64_t attention = 64 * 64 + 2 * (64 * 16) + 64 * 64;  // q, k, v (2 heads x 8), o
  const std::uint64_t mlp = 3ULL * 64 * 172;
  CHECK(count.per_layer == attention + mlp + 2 * 64);
  CHECK(count.total == 100 * 64 + 2 * (attention + mlp + 128) + 64 + 100 * 64);
}

TEST_CASE("validate names the field and the value") {
  ModelShape shape = gpt_like_shape(-3, 1024, 16, 50257, 1024);
  CHECK(validate(shape).message() == "model.layers: -3 is not a positive integer");
  shape = gpt_like_shape(4, 1024, 16, 50257, 1024);
  shape.kv_heads = 5;
  CHECK(validate(shape).message().find("model.kv_heads: 5 does not divide heads 16") == 0);
  shape = gpt_like_shape(4, 1 << 25, 16, 50257, 1024);
  CHECK(validate(shape).message().find("model.hidden") == 0);
}

}  // namespace
}  // namespace zinf::spec
