// CPU kernels of the GPT-like model (layer norm, GELU, softmax cross-entropy, embeddings, residual
// add): each forward pass against an fp64 reference written here, each backward pass against
// central finite differences of that fp64 reference for the scalar loss L = sum(out * probe) (probe
// random), every instruction-set variant and several thread counts bit for bit, odd sizes so the
// vector tails and uneven thread ranges run.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/simd.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/residual.h"
#include "tests/catch.h"
#include "tests/unit/kernels/kernel_test_support.h"

namespace zinf::kernels {
namespace {

using test_support::count_misses;
using test_support::finite_difference;
using test_support::scale_of;
using test_support::supported_isas;
using test_support::uniform_values;
using test_support::widen;

using cpu::Isa;

// Gradients are accumulated (+=): the tests start every gradient from these values and subtract them.
std::vector<double> minus(const std::vector<float>& got, const std::vector<float>& initial) {
  std::vector<double> out(got.size());
  for (std::size_t i = 0; i < got.size(); ++i) out[i] = static_cast<double>(got[i]) - static_cast<double>(initial[i]);
  return out;
}

// The float kernel's accumulated gradient minus its starting value, compared with the fp64
// finite-difference gradient: 1e-4 relative plus 1e-5 of the largest gradient.
std::size_t count_grad_misses(const char* what, const std::vector<float>& got, const std::vector<float>& initial,
                              const std::vector<double>& want) {
  const std::vector<double> delta = minus(got, initial);
  std::vector<float> delta_f(delta.begin(), delta.end());
  return count_misses(what, delta_f, want, 1e-4, 1e-5 * scale_of(want));
}

// ---- Layer norm ----------------------------------------------------------------------------------

std::vector<double> layernorm_reference(const std::vector<double>& x, const std::vector<double>& w,
                                        const std::vector<double>& b, std::size_t rows, std::size_t channels,
                                        double eps) {
  std::vector<double> out(rows * channels);
  for (std::size_t r = 0; r < rows; ++r) {
    const double* row = x.data() + r * channels;
    double mean = 0.0;
    for (std::size_t c = 0; c < channels; ++c) mean += row[c];
    mean /= static_cast<double>(channels);
    double var = 0.0;
    for (std::size_t c = 0; c < channels; ++c) var += (row[c] - mean) * (row[c] - mean);
    var /= static_cast<double>(channels);
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (std::size_t c = 0; c < channels; ++c) out[r * channels + c] = (row[c] - mean) * rstd * w[c] + b[c];
  }
  return out;
}

TEST_CASE("layernorm: forward matches fp64, backward matches finite differences", "[model][layernorm]") {
  const std::size_t rows = 7;
  const std::size_t channels = 37;
  const float eps = 1e-5f;
  std::mt19937_64 rng(11);
  const auto inp = uniform_values(rows * channels, -2.0f, 3.0f, rng);
  const auto weight = uniform_values(channels, 0.5f, 1.5f, rng);
  const auto bias = uniform_values(channels, -0.5f, 0.5f, rng);
  const auto probe = uniform_values(rows * channels, -1.0f, 1.0f, rng);
  const auto dinp0 = uniform_values(rows * channels, -0.1f, 0.1f, rng);
  const auto dweight0 = uniform_values(channels, -0.1f, 0.1f, rng);
  const auto dbias0 = uniform_values(channels, -0.1f, 0.1f, rng);

  std::vector<double> x = widen(inp);
  std::vector<double> w = widen(weight);
  std::vector<double> b = widen(bias);
  const std::vector<double> probe_d = widen(probe);
  const auto loss = [&] {
    const auto out = layernorm_reference(x, w, b, rows, channels, eps);
    double sum = 0.0;
    for (std::size_t i = 0; i < out.size(); ++i) sum += out[i] * probe_d[i];
    return sum;
  };
  const std::vector<double> out_ref = layernorm_reference(x, w, b, rows, channels, eps);
  const std::vector<double> dx_ref = finite_difference(x, loss);
  const std::vector<double> dw_ref = finite_difference(w, loss);
  const std::vector<double> db_ref = finite_difference(b, loss);

  for (Isa isa : supported_isas()) {
    for (int threads : {1, 3}) {
      DYNAMIC_SECTION(cpu::isa_name(isa) << ", " << threads << " threads") {
        std::vector<float> out(rows * channels);
        std::vector<float> mean(rows);
        std::vector<float> rstd(rows);
        cpu::layernorm_forward(isa, out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), rows,
                               channels, eps, threads);
        CHECK(count_misses("out", out, out_ref, 1e-5, 1e-5) == 0);
        std::vector<float> dinp = dinp0;
        std::vector<float> dweight = dweight0;
        std::vector<float> dbias = dbias0;
        cpu::layernorm_backward(isa, dinp.data(), dweight.data(), dbias.data(), probe.data(), inp.data(), weight.data(),
                                mean.data(), rstd.data(), rows, channels, threads);
        CHECK(count_grad_misses("dinp", dinp, dinp0, dx_ref) == 0);
        CHECK(count_grad_misses("dweight", dweight, dweight0, dw_ref) == 0);
        CHECK(count_grad_misses("dbias", dbias, dbias0, db_ref) == 0);
      }
    }
  }
}

TEST_CASE("layernorm: every variant and thread count gives the same bits", "[model][layernorm]") {
  // Large enough that rows and channels are both split over threads; odd so ranges are uneven.
  const std::size_t rows = 67;
  const std::size_t channels = 531;
  std::mt19937_64 rng(12);
  const auto inp = uniform_values(rows * channels, -4.0f, 4.0f, rng);
  const auto weight = uniform_values(channels, -1.5f, 1.5f, rng);
  const auto bias = uniform_values(channels, -0.5f, 0.5f, rng);
  const auto dout = uniform_values(rows * channels, -1.0f, 1.0f, rng);
  const auto out_ref = layernorm_reference(widen(inp), widen(weight), widen(bias), rows, channels, 1e-5);

  std::vector<float> first_out;
  std::vector<float> first_dinp;
  std::vector<float> first_dweight;
  std::vector<float> first_dbias;
  for (Isa isa : supported_isas()) {
    for (int threads : {1, 2, 3, 4}) {
      std::vector<float> out(rows * channels);
      std::vector<float> mean(rows);
      std::vector<float> rstd(rows);
      cpu::layernorm_forward(isa, out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), rows,
                             channels, 1e-5f, threads);
      std::vector<float> dinp(rows * channels, 0.0f);
      std::vector<float> dweight(channels, 0.0f);
      std::vector<float> dbias(channels, 0.0f);
      cpu::layernorm_backward(isa, dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(),
                              mean.data(), rstd.data(), rows, channels, threads);
      if (first_out.empty()) {
        CHECK(count_misses("out", out, out_ref, 1e-5, 1e-5) == 0);
        first_out = out;
        first_dinp = dinp;
        first_dweight = dweight;
        first_dbias = dbias;
        continue;
      }
      INFO(cpu::isa_name(isa) << ", " << threads << " threads");
      CHECK(out == first_out);
      CHECK(dinp == first_dinp);
      CHECK(dweight == first_dweight);
      CHECK(dbias == first_dbias);
    }
  }
}

// ---- GELU ----------------------------------------------------------------------------------------

double gelu_reference(double x) {
  const double k = std::sqrt(2.0 / std::acos(-1.0));
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

TEST_CASE("gelu: forward matches fp64, backward matches finite differences", "[model][gelu]") {
  const std::size_t n = 1001;
  std::mt19937_64 rng(21);
  auto inp = uniform_values(n, -6.0f, 6.0f, rng);
  inp[0] = 0.0f;
  inp[1] = -20.0f;
  inp[2] = 20.0f;
  const auto probe = uniform_values(n, -1.0f, 1.0f, rng);
  const auto dinp0 = uniform_values(n, -0.1f, 0.1f, rng);

  std::vector<double> x = widen(inp);
  std::vector<double> out_ref(n);
  std::vector<double> dx_ref(n);
  for (std::size_t i = 0; i < n; ++i) {
    out_ref[i] = gelu_reference(x[i]);
    // Elementwise: the finite difference of element i's own output is the whole gradient.
    std::vector<double> one{x[i]};
    dx_ref[i] = finite_difference(one, [&] { return gelu_reference(one[0]) * static_cast<double>(probe[i]); })[0];
  }

  for (Isa isa : supported_isas()) {
    for (int threads : {1, 3}) {
      DYNAMIC_SECTION(cpu::isa_name(isa) << ", " << threads << " threads") {
        std::vector<float> out(n);
        cpu::gelu_forward(isa, out.data(), inp.data(), n, threads);
        CHECK(count_misses("out", out, out_ref, 1e-5, 1e-6) == 0);
        std::vector<float> dinp = dinp0;
        cpu::gelu_backward(isa, dinp.data(), inp.data(), probe.data(), n, threads);
        CHECK(count_grad_misses("dinp", dinp, dinp0, dx_ref) == 0);
      }
    }
  }
}

TEST_CASE("gelu: infinities and NaN", "[model][gelu]") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> inp{inf, std::numeric_limits<float>::quiet_NaN(), 1e30f, -1e30f};
  for (Isa isa : supported_isas()) {
    INFO(cpu::isa_name(isa));
    std::vector<float> out(inp.size());
    cpu::gelu_forward(isa, out.data(), inp.data(), inp.size(), 1);
    CHECK(out[0] == inf);
    CHECK(std::isnan(out[1]));
    CHECK(out[2] == 1e30f);
    CHECK(out[3] == 0.0f);
  }
}

TEST_CASE("gelu: every variant and thread count gives the same bits, in place works", "[model][gelu]") {
  const std::size_t n = (std::size_t{1} << 16) + 13;
  std::mt19937_64 rng(22);
  const auto inp = uniform_values(n, -8.0f, 8.0f, rng);
  const auto dout = uniform_values(n, -1.0f, 1.0f, rng);
  std::vector<float> first_out;
  std::vector<float> first_dinp;
  for (Isa isa : supported_isas()) {
    for (int threads : {1, 2, 3}) {
      std::vector<float> out = inp;
      cpu::gelu_forward(isa, out.data(), out.data(), n, threads);
      std::vector<float> dinp(n, 0.0f);
      cpu::gelu_backward(isa, dinp.data(), inp.data(), dout.data(), n, threads);
      if (first_out.empty()) {
        first_out = out;
        first_dinp = dinp;
        continue;
      }
      INFO(cpu::isa_name(isa) << ", " << threads << " threads");
      CHECK(out == first_out);
      CHECK(dinp == first_dinp);
    }
  }
}

// ---- The shared exp approximation (kernels/cpu/simd.h) -------------------------------------------

TEST_CASE("exp_approx: within 2e-7 relative of exp over [-87, 88.37], 0 or tiny and finite beyond",
          "[model][cross_entropy][gelu]") {
  double worst = 0.0;
  const int steps = 1 << 20;
  for (int i = 0; i <= steps; ++i) {
    const float x = -100.0f + 188.0f * static_cast<float>(i) / static_cast<float>(steps);
    const float flushed = cpu::simd::exp_approx_flushed(x);
    const float clamped = cpu::simd::exp_approx(x);
    REQUIRE(std::isfinite(flushed));
    REQUIRE(std::isfinite(clamped));
    if (x < -87.0f) {
      REQUIRE(flushed == 0.0f);
      REQUIRE(clamped == cpu::simd::exp_approx(-87.0f));  // the clamp: normal, not a denormal
      continue;
    }
    REQUIRE(flushed == clamped);
    if (x > 88.3762626647949f) continue;  // clamped above too (exp would overflow just past it)
    const double exact = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(static_cast<double>(clamped) - exact) / exact);
  }
  INFO("worst relative error " << worst);
  CHECK(worst <= 2e-7);
  CHECK(std::fpclassify(cpu::simd::exp_approx(-87.0f)) == FP_NORMAL);
  CHECK(cpu::simd::exp_approx(-1e4f) == cpu::simd::exp_approx(-87.0f));
  CHECK(cpu::simd::exp_approx_flushed(-1e4f) == 0.0f);
  CHECK(cpu::simd::exp_approx_flushed(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(std::isfinite(cpu::simd::exp_approx(1e4f)));
  CHECK(cpu::simd::exp_approx_flushed(0.0f) == 1.0f);
}

// ---- Softmax cross-entropy -----------------------------------------------------------------------

std::vector<double> cross_entropy_reference(const std::vector<double>& logits, const std::vector<std::int32_t>& targets,
                                            std::size_t rows, std::size_t vocab) {
  std::vector<double> losses(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    const double* row = logits.data() + r * vocab;
    const double max = *std::max_element(row, row + vocab);
    double sum = 0.0;
    for (std::size_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - max);
    losses[r] = std::log(sum) + max - row[static_cast<std::size_t>(targets[r])];
  }
  return losses;
}

double mean_of(const std::vector<double>& values) {
  double sum = 0.0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

std::vector<std::int32_t> random_targets(std::size_t rows, std::size_t vocab, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int32_t> dist(0, static_cast<std::int32_t>(vocab) - 1);
  std::vector<std::int32_t> targets(rows);
  for (auto& t : targets) t = dist(rng);
  return targets;
}

TEST_CASE("cross_entropy: forward matches fp64, backward matches finite differences", "[model][cross_entropy]") {
  const std::size_t rows = 9;
  const std::size_t vocab = 53;
  const float dloss = 1.75f;
  std::mt19937_64 rng(31);
  const auto logits = uniform_values(rows * vocab, -5.0f, 5.0f, rng);
  const auto targets = random_targets(rows, vocab, rng);

  std::vector<double> x = widen(logits);
  const std::vector<double> losses_ref = cross_entropy_reference(x, targets, rows, vocab);
  const std::vector<double> dx_ref = finite_difference(
      x, [&] { return static_cast<double>(dloss) * mean_of(cross_entropy_reference(x, targets, rows, vocab)); });

  for (Isa isa : supported_isas()) {
    for (int threads : {1, 4}) {
      DYNAMIC_SECTION(cpu::isa_name(isa) << ", " << threads << " threads") {
        std::vector<float> losses(rows);
        const double mean =
            cpu::cross_entropy_forward(isa, losses.data(), logits.data(), targets.data(), rows, vocab, threads);
        CHECK(count_misses("losses", losses, losses_ref, 1e-6, 1e-6) == 0);
        CHECK(std::fabs(mean - mean_of(losses_ref)) <= 1e-6 * mean_of(losses_ref));
        CHECK(cpu::cross_entropy_forward(isa, nullptr, logits.data(), targets.data(), rows, vocab, threads) == mean);

        std::vector<float> dlogits(rows * vocab, 123.0f);  // overwritten, not accumulated
        cpu::cross_entropy_backward(isa, dlogits.data(), logits.data(), targets.data(), dloss, rows, vocab, threads);
        CHECK(count_misses("dlogits", dlogits, dx_ref, 1e-4, 1e-5 * scale_of(dx_ref)) == 0);

        std::vector<float> in_place = logits;
        cpu::cross_entropy_backward(isa, in_place.data(), in_place.data(), targets.data(), dloss, rows, vocab, threads);
        CHECK(in_place == dlogits);
      }
    }
  }
}

TEST_CASE("cross_entropy: logits of 1e4 give finite, correct losses and gradients", "[model][cross_entropy]") {
  const std::size_t rows = 5;
  const std::size_t vocab = 17;
  std::mt19937_64 rng(32);
  auto logits = uniform_values(rows * vocab, -1e4f, 1e4f, rng);
  const auto targets = random_targets(rows, vocab, rng);
  logits[3] = 1e4f;  // a row whose maximum is exactly the extreme value
  const std::vector<double> losses_ref = cross_entropy_reference(widen(logits), targets, rows, vocab);
  for (Isa isa : supported_isas()) {
    INFO(cpu::isa_name(isa));
    std::vector<float> losses(rows);
    const double mean = cpu::cross_entropy_forward(isa, losses.data(), logits.data(), targets.data(), rows, vocab, 1);
    CHECK(std::isfinite(mean));
    CHECK(count_misses("losses", losses, losses_ref, 1e-6, 1e-6) == 0);
    std::vector<float> dlogits(rows * vocab);
    cpu::cross_entropy_backward(isa, dlogits.data(), logits.data(), targets.data(), 1.0f, rows, vocab, 1);
    for (std::size_t r = 0; r < rows; ++r) {
      double row_sum = 0.0;
      for (std::size_t v = 0; v < vocab; ++v) {
        const float g = dlogits[r * vocab + v];
        CHECK(std::isfinite(g));
        row_sum += static_cast<double>(g);
      }
      CHECK(std::fabs(row_sum) <= 1e-6);  // softmax sums to 1, the one-hot too
    }
  }
}

TEST_CASE("cross_entropy: every variant and thread count gives the same bits", "[model][cross_entropy]") {
  const std::size_t rows = 37;
  const std::size_t vocab = 2053;
  std::mt19937_64 rng(33);
  const auto logits = uniform_values(rows * vocab, -20.0f, 20.0f, rng);
  const auto targets = random_targets(rows, vocab, rng);
  std::vector<float> first_losses;
  std::vector<float> first_dlogits;
  double first_mean = 0.0;
  for (Isa isa : supported_isas()) {
    for (int threads : {1, 2, 3, 4}) {
      std::vector<float> losses(rows);
      const double mean =
          cpu::cross_entropy_forward(isa, losses.data(), logits.data(), targets.data(), rows, vocab, threads);
      std::vector<float> dlogits(rows * vocab);
      cpu::cross_entropy_backward(isa, dlogits.data(), logits.data(), targets.data(), 1.0f, rows, vocab, threads);
      if (first_losses.empty()) {
        first_losses = losses;
        first_dlogits = dlogits;
        first_mean = mean;
        continue;
      }
      INFO(cpu::isa_name(isa) << ", " << threads << " threads");
      CHECK(mean == first_mean);
      CHECK(losses == first_losses);
      CHECK(dlogits == first_dlogits);
    }
  }
}

// ---- Embedding -----------------------------------------------------------------------------------

std::vector<double> embedding_reference(const std::vector<std::int32_t>& tokens, const std::vector<double>& wte,
                                        const std::vector<double>& wpe, std::size_t batch, std::size_t seq_len,
                                        std::size_t channels) {
  std::vector<double> out(batch * seq_len * channels);
  for (std::size_t i = 0; i < batch * seq_len; ++i) {
    const auto token = static_cast<std::size_t>(tokens[i]);
    for (std::size_t c = 0; c < channels; ++c) {
      out[i * channels + c] = wte[token * channels + c] + wpe[(i % seq_len) * channels + c];
    }
  }
  return out;
}

TEST_CASE("embedding: forward matches fp64, backward matches finite differences", "[model][embedding]") {
  const std::size_t batch = 3;
  const std::size_t seq_len = 5;
  const std::size_t max_seq_len = 7;  // the rows past seq_len get no gradient
  const std::size_t vocab = 11;       // 15 positions: tokens repeat
  const std::size_t channels = 21;
  std::mt19937_64 rng(41);
  const auto tokens = random_targets(batch * seq_len, vocab, rng);
  const auto wte = uniform_values(vocab * channels, -1.0f, 1.0f, rng);
  const auto wpe = uniform_values(max_seq_len * channels, -1.0f, 1.0f, rng);
  const auto probe = uniform_values(batch * seq_len * channels, -1.0f, 1.0f, rng);
  const auto dwte0 = uniform_values(vocab * channels, -0.1f, 0.1f, rng);
  const auto dwpe0 = uniform_values(max_seq_len * channels, -0.1f, 0.1f, rng);

  std::vector<double> wte_d = widen(wte);
  std::vector<double> wpe_d = widen(wpe);
  const std::vector<double> probe_d = widen(probe);
  const auto loss = [&] {
    const auto out = embedding_reference(tokens, wte_d, wpe_d, batch, seq_len, channels);
    double sum = 0.0;
    for (std::size_t i = 0; i < out.size(); ++i) sum += out[i] * probe_d[i];
    return sum;
  };
  const std::vector<double> out_ref = embedding_reference(tokens, wte_d, wpe_d, batch, seq_len, channels);
  const std::vector<double> dwte_ref = finite_difference(wte_d, loss);
  const std::vector<double> dwpe_ref = finite_difference(wpe_d, loss);

  for (Isa isa : supported_isas()) {
    for (int threads : {1, 3}) {
      DYNAMIC_SECTION(cpu::isa_name(isa) << ", " << threads << " threads") {
        std::vector<float> out(batch * seq_len * channels);
        cpu::embedding_forward(isa, out.data(), tokens.data(), wte.data(), wpe.data(), batch, seq_len, channels,
                               threads);
        CHECK(count_misses("out", out, out_ref, 1e-7, 0.0) == 0);
        std::vector<float> dwte = dwte0;
        std::vector<float> dwpe = dwpe0;
        cpu::embedding_backward(isa, dwte.data(), dwpe.data(), probe.data(), tokens.data(), batch, seq_len, channels,
                                threads);
        CHECK(count_grad_misses("dwte", dwte, dwte0, dwte_ref) == 0);
        CHECK(count_grad_misses("dwpe", dwpe, dwpe0, dwpe_ref) == 0);
      }
    }
  }
}

TEST_CASE("embedding: every variant and thread count gives the same bits", "[model][embedding]") {
  // Few tokens over many positions, so every thread's channel range adds into the same rows.
  const std::size_t batch = 4;
  const std::size_t seq_len = 67;
  const std::size_t vocab = 9;
  const std::size_t channels = 197;
  std::mt19937_64 rng(42);
  const auto tokens = random_targets(batch * seq_len, vocab, rng);
  const auto wte = uniform_values(vocab * channels, -1.0f, 1.0f, rng);
  const auto wpe = uniform_values(seq_len * channels, -1.0f, 1.0f, rng);
  const auto dout = uniform_values(batch * seq_len * channels, -1.0f, 1.0f, rng);
  std::vector<float> first_out;
  std::vector<float> first_dwte;
  std::vector<float> first_dwpe;
  for (Isa isa : supported_isas()) {
    for (int threads : {1, 2, 3, 4}) {
      std::vector<float> out(batch * seq_len * channels);
      cpu::embedding_forward(isa, out.data(), tokens.data(), wte.data(), wpe.data(), batch, seq_len, channels, threads);
      std::vector<float> dwte(vocab * channels, 0.0f);
      std::vector<float> dwpe(seq_len * channels, 0.0f);
      cpu::embedding_backward(isa, dwte.data(), dwpe.data(), dout.data(), tokens.data(), batch, seq_len, channels,
                              threads);
      if (first_out.empty()) {
        first_out = out;
        first_dwte = dwte;
        first_dwpe = dwpe;
        continue;
      }
      INFO(cpu::isa_name(isa) << ", " << threads << " threads");
      CHECK(out == first_out);
      CHECK(dwte == first_dwte);
      CHECK(dwpe == first_dwpe);
    }
  }
}

TEST_CASE("embedding rows: tiles over the vocabulary give the whole table's bits", "[model][embedding]") {
  // Tiles of 3, 4 and 4 rows over an 11-token vocabulary (the split TiledEmbedding makes for 3).
  const std::size_t batch = 3, seq_len = 29, vocab = 11, channels = 37;
  std::mt19937_64 rng(44);
  const auto tokens = random_targets(batch * seq_len, vocab, rng);
  const auto wte = uniform_values(vocab * channels, -1.0f, 1.0f, rng);
  const auto wpe = uniform_values(seq_len * channels, -1.0f, 1.0f, rng);
  const auto dout = uniform_values(batch * seq_len * channels, -1.0f, 1.0f, rng);
  std::vector<float> out(batch * seq_len * channels), dwte(vocab * channels, 0.25f), dwpe(seq_len * channels, 0.5f);
  cpu::embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), batch, seq_len, channels);
  cpu::embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), batch, seq_len, channels);

  const std::size_t begins[] = {0, 3, 7, vocab};
  std::vector<float> tiled_out(out.size(), -7.0f), tiled_dwte(dwte.size(), 0.25f), tiled_dwpe(dwpe.size(), 0.5f);
  for (std::size_t k = 0; k < 3; ++k) {
    const std::size_t rows = begins[k + 1] - begins[k];
    cpu::embedding_forward_rows(tiled_out.data(), tokens.data(), wte.data() + begins[k] * channels, begins[k], rows,
                                wpe.data(), batch, seq_len, channels, 2);
    cpu::embedding_backward_rows(tiled_dwte.data() + begins[k] * channels, begins[k], rows,
                                 k == 2 ? tiled_dwpe.data() : nullptr, dout.data(), tokens.data(), batch, seq_len,
                                 channels, 2);
  }
  CHECK(tiled_out == out);  // every position written once (none left at -7)
  CHECK(tiled_dwte == dwte);
  CHECK(tiled_dwpe == dwpe);
  // A tile writes only its own tokens' positions and rows.
  std::vector<float> one(out.size(), -7.0f);
  cpu::embedding_forward_rows(one.data(), tokens.data(), wte.data() + 3 * channels, 3, 4, wpe.data(), batch, seq_len,
                              channels);
  for (std::size_t i = 0; i < batch * seq_len; ++i) {
    const bool mine = tokens[i] >= 3 && tokens[i] < 7;
    INFO("position " << i << " token " << tokens[i]);
    CHECK((one[i * channels] == -7.0f) == !mine);
  }
}

// ---- Residual ------------------------------------------------------------------------------------

TEST_CASE("residual: forward adds, backward accumulates dout into both inputs", "[model][residual]") {
  const std::size_t n = (std::size_t{1} << 16) + 7;
  std::mt19937_64 rng(51);
  const auto inp1 = uniform_values(n, -1.0f, 1.0f, rng);
  const auto inp2 = uniform_values(n, -1.0f, 1.0f, rng);
  const auto dout = uniform_values(n, -1.0f, 1.0f, rng);
  const auto dinp1_0 = uniform_values(n, -0.1f, 0.1f, rng);
  const auto dinp2_0 = uniform_values(n, -0.1f, 0.1f, rng);
  std::vector<float> out_ref(n);
  std::vector<float> dinp1_ref(n);
  std::vector<float> dinp2_ref(n);
  for (std::size_t i = 0; i < n; ++i) {
    out_ref[i] = inp1[i] + inp2[i];  // one fp32 addition: exact reference
    dinp1_ref[i] = dinp1_0[i] + dout[i];
    dinp2_ref[i] = dinp2_0[i] + dout[i];
  }
  for (Isa isa : supported_isas()) {
    for (int threads : {1, 3}) {
      INFO(cpu::isa_name(isa) << ", " << threads << " threads");
      std::vector<float> out(n);
      cpu::residual_forward(isa, out.data(), inp1.data(), inp2.data(), n, threads);
      CHECK(out == out_ref);
      std::vector<float> in_place = inp1;
      cpu::residual_forward(isa, in_place.data(), in_place.data(), inp2.data(), n, threads);
      CHECK(in_place == out_ref);
      std::vector<float> dinp1 = dinp1_0;
      std::vector<float> dinp2 = dinp2_0;
      cpu::residual_backward(isa, dinp1.data(), dinp2.data(), dout.data(), n, threads);
      CHECK(dinp1 == dinp1_ref);
      CHECK(dinp2 == dinp2_ref);
    }
  }
}

}  // namespace
}  // namespace zinf::kernels
