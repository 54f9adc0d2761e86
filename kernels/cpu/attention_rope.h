// The rotary embedding the CPU attention applies while it loads query and key rows
// (attention_forward/backward with an AttentionRope, kernels/attention.h): one head's row rotated
// by kernels/rope.h's formulas, in the same fp32 operations (two products and one add or subtract
// per output, never fused: kernels/ is built with -ffp-contract=off), so a fused pass has the bits
// of the separate RoPE pass followed by the attention. Included once by attention.cpp, above the
// per-ISA bodies; always inlined so each ISA's body vectorises it for its own instruction set.
#pragma once

#include <cstddef>

#include "kernels/attention.h"

namespace zinf::kernels::cpu::attention_rope {

// dst[0, hs) = the rotation of src[0, hs) at `position`: by +theta (kForward, rope_forward's) or
// by -theta (rope_backward's, the transpose); dimensions rd..hs-1 copied. dst and src are
// distinct rows.
template <bool kForward>
[[gnu::always_inline]] inline void rotate(float* dst, const float* src, const AttentionRope& rope, std::size_t position,
                                          std::size_t hs) {
  const std::size_t half = rope.rotary_dim / 2;
  const float* c = rope.cos + position * half;
  const float* sn = rope.sin + position * half;
  const float* x1 = src;
  const float* x2 = src + half;
  float* __restrict y1 = dst;
  float* __restrict y2 = dst + half;
  for (std::size_t i = 0; i < half; ++i) {
    if constexpr (kForward) {
      y1[i] = x1[i] * c[i] - x2[i] * sn[i];
      y2[i] = x2[i] * c[i] + x1[i] * sn[i];
    } else {
      y1[i] = x1[i] * c[i] + x2[i] * sn[i];
      y2[i] = x2[i] * c[i] - x1[i] * sn[i];
    }
  }
  for (std::size_t i = rope.rotary_dim; i < hs; ++i) dst[i] = src[i];
}

}  // namespace zinf::kernels::cpu::attention_rope
