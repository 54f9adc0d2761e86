#include "probes/block_kernel_probe.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <limits>
#include <vector>

#include "kernels/attention.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/residual.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

namespace zinf::probes {
namespace {

double seconds_of(const auto& work) {
  const auto t0 = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

BlockKernelSeconds probe_block_kernels(const spec::Scenario& scenario) {
  namespace k = kernels::cpu;
  const spec::ModelShape& s = scenario.shape;
  const auto b = static_cast<std::size_t>(scenario.batch), t = static_cast<std::size_t>(scenario.seq);
  const auto c = static_cast<std::size_t>(s.hidden), f = static_cast<std::size_t>(s.ffn_hidden);
  const auto heads = static_cast<std::size_t>(s.heads), kv_heads = static_cast<std::size_t>(s.kv_heads);
  const auto hd = static_cast<std::size_t>(s.head_dim), a = heads * hd;
  const bool rms = s.norm == spec::NormKind::kRmsNorm, gated = s.mlp == spec::MlpKind::kGated;
  const bool rotary = s.position == spec::PositionKind::kRotary;
  const std::size_t r = b * t, packed = (heads + 2 * kv_heads) * hd;
  const auto rd = static_cast<std::size_t>(rotary ? spec::rotary_dim(s) : 2);
  const k::RopeShape rope{b, t, packed, heads + kv_heads, hd, rd, 0};
  // Values that keep every kernel on its ordinary path (no NaNs, no saturated GELU).
  std::vector<float> x(r * c, 0.1f), y(r * c, 0.2f), out(r * c), mean(r), rstd(r, 1.0f), weight(c, 1.0f), bias(c);
  std::vector<float> dweight(c), dbias(c), dqkv(r * packed), lse(b * heads * t);
  std::vector<float> attn(r * a), dattn(r * a, 0.2f), qkv_packed(r * packed, 0.01f), cos(t * rd / 2, 1.0f),
      sin(t * rd / 2);
  std::vector<float> wide(r * f, 0.1f), wide2(gated ? r * f : 0, 0.1f), dwide(r * f), dwide2(wide2.size()),
      wide_out(r * f);
  // The block's kernels other than its matmuls, in model/block.cpp's choice of kernels.
  const auto norm_forward = [&] {
    if (rms) {
      k::rmsnorm_forward(out.data(), rstd.data(), x.data(), weight.data(), r, c);
    } else {
      k::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), weight.data(), bias.data(), r, c);
    }
  };
  const auto norm_backward = [&] {
    if (rms) {
      k::rmsnorm_backward(out.data(), dweight.data(), y.data(), x.data(), weight.data(), rstd.data(), r, c);
    } else {
      k::layernorm_backward(out.data(), dweight.data(), dbias.data(), y.data(), x.data(), weight.data(), mean.data(),
                            rstd.data(), r, c);
    }
  };
  const auto forward = [&] {
    for (int i = 0; i < 2; ++i) {
      norm_forward();
      k::residual_forward(out.data(), out.data(), y.data(), r * c);
    }
    if (rotary) k::rope_forward(qkv_packed.data(), qkv_packed.data(), cos.data(), sin.data(), rope);
    k::attention_forward(attn.data(), lse.data(), qkv_packed.data(), b, t, a, heads, kv_heads);
    if (gated) {
      k::swiglu_forward(wide_out.data(), wide.data(), wide2.data(), r * f);
    } else {
      k::gelu_forward(wide_out.data(), wide.data(), r * f);
    }
  };
  const auto backward = [&] {
    for (int i = 0; i < 2; ++i) {
      norm_backward();
      k::residual_backward(out.data(), x.data(), y.data(), r * c);
    }
    k::attention_backward(dqkv.data(), dattn.data(), qkv_packed.data(), attn.data(), lse.data(), b, t, a, heads,
                          kv_heads);
    if (rotary) k::rope_backward(dqkv.data(), dqkv.data(), cos.data(), sin.data(), rope);
    if (gated) {
      k::swiglu_backward(dwide.data(), dwide2.data(), wide_out.data(), wide.data(), wide2.data(), r * f);
    } else {
      k::gelu_backward(dwide.data(), wide.data(), wide_out.data(), r * f);
    }
  };
  forward();  // the warm-up also fills lse for the backward
  backward();
  BlockKernelSeconds best{std::numeric_limits<double>::max(), std::numeric_limits<double>::max()};
  for (int i = 0; i < 3; ++i) {
    best.forward = std::min(best.forward, seconds_of(forward));
    best.backward = std::min(best.backward, seconds_of(backward));
  }
  return best;
}

}  // namespace zinf::probes
