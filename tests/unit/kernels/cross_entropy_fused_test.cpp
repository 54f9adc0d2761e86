// The fused softmax cross-entropy pass (cross_entropy_forward_backward) against the two separate
// passes it replaces in the training step: the same mean loss and the same gradient, bit for bit,
// for every instruction-set variant and thread count, in place and not, with vocabulary sizes that
// leave vector tails and logits large enough that some exps flush to zero. The separate passes
// are themselves checked against fp64 and finite differences in model_kernels_test.cpp.
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cross_entropy.h"
#include "tests/catch.h"
#include "tests/unit/kernels/kernel_test_support.h"

namespace zinf::kernels {
namespace {

using cpu::Isa;
using test_support::supported_isas;
using test_support::uniform_values;

std::vector<std::int32_t> targets_for(std::size_t rows, std::size_t vocab, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int32_t> dist(0, static_cast<std::int32_t>(vocab) - 1);
  std::vector<std::int32_t> targets(rows);
  for (auto& t : targets) t = dist(rng);
  return targets;
}

TEST_CASE("cross_entropy: the fused pass gives the separate passes' loss and gradient bits", "[model][cross_entropy]") {
  struct Case {
    std::size_t rows, vocab;
    float range, dloss;
  };
  // 8192 is the peers' benchmark vocabulary; 1 and 7 have no full vector; 2053 a tail of 5; 1e3
  // logits make most exps exactly 0.
  const Case cases[] = {
      {37, 2053, 20.0f, 1.0f}, {16, 8192, 8.0f, 0.5f}, {5, 1, 3.0f, 1.0f}, {9, 7, 3.0f, 2.0f}, {11, 300, 1e3f, 1.0f}};
  std::mt19937_64 rng(71);
  for (const Case& c : cases) {
    const auto logits = uniform_values(c.rows * c.vocab, -c.range, c.range, rng);
    const auto targets = targets_for(c.rows, c.vocab, rng);
    for (Isa isa : supported_isas()) {
      for (int threads : {1, 2, 3}) {
        INFO(cpu::isa_name(isa) << ", " << threads << " threads, " << c.rows << " x " << c.vocab);
        const double want_loss =
            cpu::cross_entropy_forward(isa, nullptr, logits.data(), targets.data(), c.rows, c.vocab, threads);
        std::vector<float> want_grad(logits.size());
        cpu::cross_entropy_backward(isa, want_grad.data(), logits.data(), targets.data(), c.dloss, c.rows, c.vocab,
                                    threads);

        std::vector<float> grad(logits.size(), -1.0f);
        CHECK(cpu::cross_entropy_forward_backward(isa, grad.data(), logits.data(), targets.data(), c.dloss, c.rows,
                                                  c.vocab, threads) == want_loss);
        CHECK(grad == want_grad);

        std::vector<float> in_place = logits;
        CHECK(cpu::cross_entropy_forward_backward(isa, in_place.data(), in_place.data(), targets.data(), c.dloss,
                                                  c.rows, c.vocab, threads) == want_loss);
        CHECK(in_place == want_grad);
      }
    }
  }
  // No rows: a mean of nothing is 0 and nothing is written.
  CHECK(cpu::cross_entropy_forward_backward(nullptr, nullptr, nullptr, 1.0f, 0, 8, 1) == 0.0);
}

}  // namespace
}  // namespace zinf::kernels
