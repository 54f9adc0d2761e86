#include "libengine/spec/model_shape.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "libengine/core/check.h"

namespace zinf::spec {

std::int64_t max_tiling(const ModelShape& shape) {
  std::int64_t max = std::min(shape.hidden, shape.ffn_hidden);
  if (!shape.tied_embeddings) max = std::min(max, shape.vocab);
  return max;
}

std::int64_t rotary_dim(const ModelShape& shape) {
  return static_cast<std::int64_t>(static_cast<double>(shape.head_dim) * shape.rope.partial_rotary_factor);
}

ModelShape gpt_like_shape(std::int64_t layers, std::int64_t hidden, std::int64_t heads, std::int64_t vocab,
                          std::int64_t max_positions) {
  ModelShape shape;
  shape.name = "gpt-like";
  shape.layers = layers;
  shape.hidden = hidden;
  shape.heads = heads;
  shape.kv_heads = heads;
  shape.head_dim = heads > 0 ? hidden / heads : 0;
  shape.ffn_hidden = 4 * hidden;
  shape.vocab = vocab;
  shape.max_positions = max_positions;
  return shape;
}

Status validate(const ModelShape& shape) {
  const auto positive = [](std::string_view field, std::int64_t value) -> Status {
    if (value <= 0)
      return Status::invalid_argument(fmt::format("model.{}: {} is not a positive integer", field, value));
    return Status::ok();
  };
  ZINF_RETURN_IF_ERROR(positive("layers", shape.layers));
  ZINF_RETURN_IF_ERROR(positive("hidden", shape.hidden));
  ZINF_RETURN_IF_ERROR(positive("heads", shape.heads));
  ZINF_RETURN_IF_ERROR(positive("kv_heads", shape.kv_heads));
  ZINF_RETURN_IF_ERROR(positive("head_dim", shape.head_dim));
  ZINF_RETURN_IF_ERROR(positive("ffn_hidden", shape.ffn_hidden));
  ZINF_RETURN_IF_ERROR(positive("vocab", shape.vocab));
  ZINF_RETURN_IF_ERROR(positive("max_positions", shape.max_positions));
  if (shape.heads % shape.kv_heads != 0) {
    return Status::invalid_argument(fmt::format(
        "model.kv_heads: {} does not divide heads {}; grouped-query attention needs heads to be a multiple of kv_heads",
        shape.kv_heads, shape.heads));
  }
  // Dimensions beyond 2^24 (16M hidden) make no sense for a transformer and would overflow the count.
  constexpr std::int64_t kMaxDim = std::int64_t{1} << 24;
  for (auto [field, value] : {std::pair{"hidden", shape.hidden}, std::pair{"ffn_hidden", shape.ffn_hidden},
                              std::pair{"vocab", shape.vocab}, std::pair{"max_positions", shape.max_positions},
                              std::pair{"head_dim", shape.head_dim}, std::pair{"heads", shape.heads}}) {
    if (value > kMaxDim) {
      return Status::invalid_argument(fmt::format("model.{}: {} is too large (at most {})", field, value, kMaxDim));
    }
  }
  if (!(shape.norm_eps > 0.0) || !(shape.norm_eps < 1.0)) {
    return Status::invalid_argument(fmt::format("model.norm_eps: {} is not in (0, 1)", shape.norm_eps));
  }
  if (shape.position == PositionKind::kRotary) {
    const RopeSettings& r = shape.rope;
    if (!(r.theta > 1.0) || !std::isfinite(r.theta)) {
      return Status::invalid_argument(fmt::format("model.rope_theta: {} is not a finite number above 1", r.theta));
    }
    if (!(r.partial_rotary_factor > 0.0 && r.partial_rotary_factor <= 1.0) || rotary_dim(shape) < 2 ||
        rotary_dim(shape) % 2 != 0) {
      return Status::invalid_argument(
          fmt::format("model.partial_rotary_factor: {} with head_dim {} does not give an even number of rotating "
                      "dimensions (allowed: (0, 1] with int(head_dim * factor) even and >= 2)",
                      r.partial_rotary_factor, shape.head_dim));
    }
    if (r.scaling != RopeScalingKind::kNone && !(r.factor > 0.0 && std::isfinite(r.factor))) {
      return Status::invalid_argument(fmt::format("model.rope_scaling.factor: {} is not a positive number", r.factor));
    }
    if (r.scaling == RopeScalingKind::kLlama3 &&
        (!(r.low_freq_factor > 0.0) || !(r.high_freq_factor > r.low_freq_factor) || !(r.original_max_positions > 0))) {
      return Status::invalid_argument(
          fmt::format("model.rope_scaling: llama3 needs 0 < low_freq_factor < high_freq_factor and "
                      "original_max_position_embeddings > 0 (given {}, {}, {})",
                      r.low_freq_factor, r.high_freq_factor, r.original_max_positions));
    }
  }
  if (shape.layers > 100000) {
    return Status::invalid_argument(fmt::format("model.layers: {} is too large (at most 100000)", shape.layers));
  }
  return Status::ok();
}

ParameterCount count_parameters(const ModelShape& shape) {
  ZINF_CHECK(validate(shape).is_ok(), "count_parameters needs a validated shape");
  using u64 = std::uint64_t;
  const u64 h = static_cast<u64>(shape.hidden);
  const u64 q_width = static_cast<u64>(shape.heads * shape.head_dim);
  const u64 kv_width = static_cast<u64>(shape.kv_heads * shape.head_dim);
  const u64 ffn = static_cast<u64>(shape.ffn_hidden);
  const u64 vocab = static_cast<u64>(shape.vocab);
  const u64 layers = static_cast<u64>(shape.layers);

  const u64 norm_params = shape.norm == NormKind::kLayerNorm && shape.norm_bias ? 2 * h : h;
  const u64 qkv_weight = h * (q_width + 2 * kv_width);
  const u64 qkv_bias = shape.qkv_bias ? q_width + 2 * kv_width : 0;
  const u64 out_proj = q_width * h + (shape.attn_out_bias ? h : 0);
  const u64 attention_per_layer = qkv_weight + qkv_bias + out_proj;

  const u64 up_matrices = shape.mlp == MlpKind::kGated ? 2 : 1;  // gated adds the gate projection
  const u64 mlp_per_layer = up_matrices * h * ffn + ffn * h + (shape.mlp_bias ? up_matrices * ffn + h : 0);

  ParameterCount count;
  count.embeddings =
      vocab * h + (shape.position == PositionKind::kLearned ? static_cast<u64>(shape.max_positions) * h : 0);
  count.attention = layers * attention_per_layer;
  count.mlp = layers * mlp_per_layer;
  count.norms = layers * 2 * norm_params + norm_params;
  count.head = shape.tied_embeddings ? 0 : vocab * h;
  count.per_layer = attention_per_layer + mlp_per_layer + 2 * norm_params;
  count.total = count.embeddings + count.attention + count.mlp + count.norms + count.head;
  count.largest_operator = std::max({vocab * h, qkv_weight, q_width * h, h * ffn});
  return count;
}

}  // namespace zinf::spec
