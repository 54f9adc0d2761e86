// Shape rule: the GPT-like shape zinf uses when a user gives only a parameter count (--params 1T).
//
// The rule, documented in docs/planner.md: head_dim 128, hidden a multiple of 128, and about as deep as
// GPT-3 175B is wide-to-deep (hidden/layers ≈ 128): layers ≈ (P / (12·128²))^(1/3). Among layer
// counts within ±50% of that, the shape whose exact parameter count (embeddings included) is
// closest to P wins; shapes within 1% of P are ranked by how close hidden/layers is to 128.
// Everything else is GPT-2 style (gpt_like_shape): ffn 4·hidden, LayerNorm, learned positions
// (max_positions = seq), tied head.
#pragma once

#include <cstdint>

#include "libengine/core/status.h"
#include "libengine/spec/model_shape.h"
#include "planner/field_names.h"

namespace zinf::planner {

inline constexpr std::int64_t kShapeRuleHeadDim = 128;
inline constexpr std::int64_t kDefaultVocab = 50257;  // GPT-2's tokenizer

// Fails with InvalidArgument when `target_params` is below the smallest shape (1 layer, hidden 128)
// or so large that hidden would exceed the shape limits; the message names field::kParams (and
// field::kShape for the alternative) as `name_field` calls them.
Result<spec::ModelShape> shape_for_params(std::uint64_t target_params, std::int64_t vocab, std::int64_t seq,
                                          const FieldNamer& name_field = own_field_name);

}  // namespace zinf::planner
