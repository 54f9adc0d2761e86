#include "apps/zinf/block_kernel_probe.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <limits>
#include <vector>

#include "kernels/attention.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/residual.h"

namespace zinf::cli {
namespace {

double seconds_of(const auto& work) {
  const auto t0 = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

BlockKernelSeconds probe_block_kernels(const spec::Scenario& scenario) {
  namespace k = kernels::cpu;
  const auto b = static_cast<std::size_t>(scenario.batch), t = static_cast<std::size_t>(scenario.seq);
  const auto c = static_cast<std::size_t>(scenario.shape.hidden),
             f = static_cast<std::size_t>(scenario.shape.ffn_hidden);
  const auto heads = static_cast<std::size_t>(scenario.shape.heads);
  const std::size_t r = b * t;
  // Values that keep every kernel on its ordinary path (no NaNs, no saturated GELU).
  std::vector<float> x(r * c, 0.1f), y(r * c, 0.2f), out(r * c), mean(r), rstd(r, 1.0f), weight(c, 1.0f), bias(c);
  std::vector<float> dweight(c), dbias(c), qkv(r * 3 * c, 0.01f), dqkv(r * 3 * c), lse(b * heads * t);
  std::vector<float> wide(r * f, 0.1f), dwide(r * f), wide_out(r * f);
  const auto forward = [&] {
    for (int i = 0; i < 2; ++i) {
      k::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), weight.data(), bias.data(), r, c);
      k::residual_forward(out.data(), out.data(), y.data(), r * c);
    }
    k::attention_forward(out.data(), lse.data(), qkv.data(), b, t, c, heads);
    k::gelu_forward(wide_out.data(), wide.data(), r * f);
  };
  const auto backward = [&] {
    for (int i = 0; i < 2; ++i) {
      k::layernorm_backward(out.data(), dweight.data(), dbias.data(), y.data(), x.data(), weight.data(), mean.data(),
                            rstd.data(), r, c);
      k::residual_backward(out.data(), x.data(), y.data(), r * c);
    }
    k::attention_backward(dqkv.data(), y.data(), qkv.data(), out.data(), lse.data(), b, t, c, heads);
    k::gelu_backward(dwide.data(), wide.data(), wide_out.data(), r * f);
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

}  // namespace zinf::cli
