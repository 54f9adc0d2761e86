// ModelShape: the architecture of a GPT-like decoder-only transformer, and its exact parameter count.
//
// One struct covers GPT-2 (LayerNorm with bias, learned positions, biased fused QKV, GELU MLP, tied
// head), GPT-NeoX/Pythia (rotary, untied head), and LLaMA/Mistral (RMSNorm without bias, rotary,
// gated SiLU MLP, grouped-query attention, no biases). The count is exact — every embedding, norm,
// bias and head — because users compare it with the published number of a real model.
// This is pure data: no tensors, no memory; the engine and the planner both read it.
#pragma once

#include <cstdint>
#include <string>

#include "libengine/core/status.h"

namespace zinf::spec {

enum class NormKind { kLayerNorm, kRmsNorm };   // LayerNorm has weight + bias; RMSNorm weight only
enum class MlpKind { kGelu, kGated };           // gelu: up, down; gated (SwiGLU): gate, up, down
enum class PositionKind { kLearned, kRotary };  // learned: a max_positions x hidden table; rotary: none
// HF's rope_scaling "rope_type"s the model computes frequencies for (kernels/rope.h): none
// (`default`), `linear` (positions divided by factor) and `llama3` (Llama-3.1's banded rule).
enum class RopeScalingKind { kNone, kLinear, kLlama3 };

// What a rotary model's position frequencies need (HF: rope_theta, rope_scaling,
// partial_rotary_factor). Changes no parameter count; the planner ignores it.
struct RopeSettings {
  double theta = 10000.0;
  RopeScalingKind scaling = RopeScalingKind::kNone;
  double factor = 1.0;  // linear and llama3
  // llama3 only (Llama-3.1: 1, 4, 8192).
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_positions = 8192.0;
  // The share of each head's dimensions that rotate: rotary_dim = int(head_dim * factor), even.
  double partial_rotary_factor = 1.0;
  bool operator==(const RopeSettings&) const = default;
};

struct ModelShape {
  std::string name;  // free text: "gpt2", "Llama-2-7b", "gpt-like 1T"
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;       // query heads
  std::int64_t kv_heads = 0;    // key/value heads (== heads without grouped-query attention)
  std::int64_t head_dim = 0;    // usually hidden / heads, explicit in some configs
  std::int64_t ffn_hidden = 0;  // MLP inner width
  std::int64_t vocab = 0;
  std::int64_t max_positions = 0;  // table length for learned positions; context length otherwise
  NormKind norm = NormKind::kLayerNorm;
  MlpKind mlp = MlpKind::kGelu;
  PositionKind position = PositionKind::kLearned;
  bool qkv_bias = true;         // bias on the query/key/value projections
  bool attn_out_bias = true;    // bias on the attention output projection
  bool mlp_bias = true;         // biases on the MLP projections
  bool tied_embeddings = true;  // output head shares the token embedding
  bool norm_bias = true;        // LayerNorm's bias (RMSNorm never has one)
  double norm_eps = 1e-5;       // LayerNorm's or RMSNorm's epsilon
  RopeSettings rope;            // rotary positions only
};

// The dimensions of each head that rotate: HF's int(head_dim * partial_rotary_factor); validate()
// requires it even and >= 2 (rotate_half pairs dimension i with i + rotary_dim/2).
std::int64_t rotary_dim(const ModelShape& shape);

// The GPT-2-style shape the paper's formulas assume: ffn = 4·hidden, head_dim = hidden / heads,
// LayerNorm, learned positions, biases everywhere, tied head.
ModelShape gpt_like_shape(std::int64_t layers, std::int64_t hidden, std::int64_t heads, std::int64_t vocab,
                          std::int64_t max_positions);

// Checks that every dimension is positive, that heads divide as attention requires and that the
// count fits in 64 bits. Errors name the field: "model.heads: 7 does not divide hidden 1024".
Status validate(const ModelShape& shape);

// The largest memory-centric tiling factor the GPT model accepts for this shape: every tiled linear
// (the MLP's two projections, and the head when untied) needs at least one output feature per tile,
// so at most min(hidden, ffn_hidden[, vocab]). The scenario parser and model::Gpt::create both check
// against this one rule.
std::int64_t max_tiling(const ModelShape& shape);

struct ParameterCount {
  std::uint64_t embeddings = 0;  // token (+ learned position) tables
  std::uint64_t attention = 0;   // all layers: Q, K, V, output projections and their biases
  std::uint64_t mlp = 0;         // all layers: MLP projections and their biases
  std::uint64_t norms = 0;       // all layers' norms plus the final norm (weights, and LayerNorm's biases)
  std::uint64_t head = 0;        // untied output head; 0 when tied
  std::uint64_t per_layer = 0;   // one transformer block
  std::uint64_t total = 0;
  // Parameters of the largest single operator (weight matrix or embedding table): what must be
  // resident at once to run it without tiling.
  std::uint64_t largest_operator = 0;
};

// Precondition: validate(shape) is ok.
ParameterCount count_parameters(const ModelShape& shape);

}  // namespace zinf::spec
