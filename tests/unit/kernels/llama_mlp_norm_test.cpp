// CPU RMSNorm and fused SwiGLU (kernels/rmsnorm.h, kernels/swiglu.h): each forward pass against an
// fp64 reference written here, each backward pass against central finite differences of that fp64
// reference for the scalar loss L = sum(out * probe) (probe random) on small shapes and against the
// fp64 analytic gradient on larger ones, every instruction-set variant and several thread counts bit
// for bit, odd sizes (C = 6, 18, 37; N = 37 and 5632 + 37) so the vector tails and uneven thread
// ranges run, one row.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/simd.h"
#include "kernels/rmsnorm.h"
#include "kernels/swiglu.h"
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

// The accumulated gradient minus its starting value, against an fp64 gradient: 1e-4 relative plus
// 1e-5 of the largest gradient.
std::size_t count_grad_misses(const char* what, const std::vector<float>& got, const std::vector<float>& initial,
                              const std::vector<double>& want) {
  std::vector<float> delta(got.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    delta[i] = static_cast<float>(static_cast<double>(got[i]) - static_cast<double>(initial[i]));
  }
  return count_misses(what, delta, want, 1e-4, 1e-5 * scale_of(want));
}

// ---- RMSNorm -------------------------------------------------------------------------------------

std::vector<double> rmsnorm_reference(const std::vector<double>& x, const std::vector<double>& w, std::size_t rows,
                                      std::size_t channels, double eps) {
  std::vector<double> out(rows * channels);
  for (std::size_t r = 0; r < rows; ++r) {
    const double* row = x.data() + r * channels;
    double squares = 0.0;
    for (std::size_t c = 0; c < channels; ++c) squares += row[c] * row[c];
    const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(channels) + eps);
    for (std::size_t c = 0; c < channels; ++c) out[r * channels + c] = row[c] * rstd * w[c];
  }
  return out;
}

// The analytic fp64 gradients of L = sum(out * dout) (dx and dw), for shapes too large for finite
// differences.
void rmsnorm_grad_reference(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& dy,
                            std::size_t rows, std::size_t channels, double eps, std::vector<double>& dx,
                            std::vector<double>& dw) {
  dx.assign(rows * channels, 0.0);
  dw.assign(channels, 0.0);
  const auto n = static_cast<double>(channels);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t o = r * channels;
    double squares = 0.0;
    for (std::size_t c = 0; c < channels; ++c) squares += x[o + c] * x[o + c];
    const double rstd = 1.0 / std::sqrt(squares / n + eps);
    double dot = 0.0;
    for (std::size_t c = 0; c < channels; ++c) dot += dy[o + c] * w[c] * x[o + c] * rstd;
    for (std::size_t c = 0; c < channels; ++c) {
      const double norm = x[o + c] * rstd;
      dx[o + c] = rstd * (dy[o + c] * w[c] - norm * dot / n);
      dw[c] += dy[o + c] * norm;
    }
  }
}

TEST_CASE("rmsnorm: forward matches fp64, backward matches finite differences", "[model][rmsnorm]") {
  struct Shape {
    std::size_t rows, channels;
  };
  for (const Shape s : {Shape{7, 37}, Shape{1, 18}, Shape{3, 6}}) {
    const float eps = 1e-6f;
    std::mt19937_64 rng(31 + s.channels);
    const std::size_t n = s.rows * s.channels;
    const auto inp = uniform_values(n, -2.0f, 3.0f, rng);
    const auto weight = uniform_values(s.channels, 0.5f, 1.5f, rng);
    const auto probe = uniform_values(n, -1.0f, 1.0f, rng);
    const auto dinp0 = uniform_values(n, -0.1f, 0.1f, rng);
    const auto dweight0 = uniform_values(s.channels, -0.1f, 0.1f, rng);

    std::vector<double> x = widen(inp);
    std::vector<double> w = widen(weight);
    const std::vector<double> probe_d = widen(probe);
    const auto loss = [&] {
      const auto out = rmsnorm_reference(x, w, s.rows, s.channels, eps);
      double sum = 0.0;
      for (std::size_t i = 0; i < out.size(); ++i) sum += out[i] * probe_d[i];
      return sum;
    };
    const std::vector<double> out_ref = rmsnorm_reference(x, w, s.rows, s.channels, eps);
    const std::vector<double> dx_ref = finite_difference(x, loss);
    const std::vector<double> dw_ref = finite_difference(w, loss);

    for (Isa isa : supported_isas()) {
      for (int threads : {1, 3}) {
        INFO(cpu::isa_name(isa) << ", " << threads << " threads, R " << s.rows << " C " << s.channels);
        std::vector<float> out(n);
        std::vector<float> rstd(s.rows);
        cpu::rmsnorm_forward(isa, out.data(), rstd.data(), inp.data(), weight.data(), s.rows, s.channels, eps, threads);
        CHECK(count_misses("out", out, out_ref, 1e-6, 1e-6) == 0);
        std::vector<float> dinp = dinp0;
        std::vector<float> dweight = dweight0;
        cpu::rmsnorm_backward(isa, dinp.data(), dweight.data(), probe.data(), inp.data(), weight.data(), rstd.data(),
                              s.rows, s.channels, threads);
        CHECK(count_grad_misses("dinp", dinp, dinp0, dx_ref) == 0);
        CHECK(count_grad_misses("dweight", dweight, dweight0, dw_ref) == 0);
      }
    }
  }
}

TEST_CASE("rmsnorm: Llama-sized rows match the fp64 forward and analytic backward", "[model][rmsnorm]") {
  // TinyLlama's hidden size 2048 over 33 rows (threads split rows and channels), and an odd width.
  struct Shape {
    std::size_t rows, channels;
  };
  for (const Shape s : {Shape{33, 2048}, Shape{19, 1001}}) {
    std::mt19937_64 rng(41 + s.channels);
    const std::size_t n = s.rows * s.channels;
    const auto inp = uniform_values(n, -3.0f, 3.0f, rng);
    const auto weight = uniform_values(s.channels, -1.5f, 1.5f, rng);
    const auto dout = uniform_values(n, -1.0f, 1.0f, rng);
    const double eps = 1e-5;
    const auto out_ref = rmsnorm_reference(widen(inp), widen(weight), s.rows, s.channels, eps);
    std::vector<double> dx_ref;
    std::vector<double> dw_ref;
    rmsnorm_grad_reference(widen(inp), widen(weight), widen(dout), s.rows, s.channels, eps, dx_ref, dw_ref);
    for (Isa isa : supported_isas()) {
      INFO(cpu::isa_name(isa) << ", R " << s.rows << " C " << s.channels);
      std::vector<float> out(n);
      std::vector<float> rstd(s.rows);
      cpu::rmsnorm_forward(isa, out.data(), rstd.data(), inp.data(), weight.data(), s.rows, s.channels, 1e-5f, 2);
      CHECK(count_misses("out", out, out_ref, 1e-6, 1e-6) == 0);
      std::vector<float> dinp(n, 0.0f);
      std::vector<float> dweight(s.channels, 0.0f);
      cpu::rmsnorm_backward(isa, dinp.data(), dweight.data(), dout.data(), inp.data(), weight.data(), rstd.data(),
                            s.rows, s.channels, 2);
      CHECK(count_misses("dinp", dinp, dx_ref, 1e-5, 1e-6 * scale_of(dx_ref)) == 0);
      CHECK(count_misses("dweight", dweight, dw_ref, 1e-5, 1e-6 * scale_of(dw_ref)) == 0);
    }
  }
}

TEST_CASE("rmsnorm: every variant and thread count gives the same bits, rstd optional", "[model][rmsnorm]") {
  const std::size_t rows = 67;
  const std::size_t channels = 531;
  std::mt19937_64 rng(32);
  const auto inp = uniform_values(rows * channels, -4.0f, 4.0f, rng);
  const auto weight = uniform_values(channels, -1.5f, 1.5f, rng);
  const auto dout = uniform_values(rows * channels, -1.0f, 1.0f, rng);
  std::vector<float> first_out;
  std::vector<float> first_dinp;
  std::vector<float> first_dweight;
  for (Isa isa : supported_isas()) {
    for (int threads : {1, 2, 3, 4}) {
      INFO(cpu::isa_name(isa) << ", " << threads << " threads");
      std::vector<float> out(rows * channels);
      std::vector<float> rstd(rows);
      cpu::rmsnorm_forward(isa, out.data(), rstd.data(), inp.data(), weight.data(), rows, channels, 1e-6f, threads);
      std::vector<float> out_unsaved(rows * channels);
      cpu::rmsnorm_forward(isa, out_unsaved.data(), nullptr, inp.data(), weight.data(), rows, channels, 1e-6f, threads);
      CHECK(out_unsaved == out);
      std::vector<float> dinp(rows * channels, 0.0f);
      std::vector<float> dweight(channels, 0.0f);
      cpu::rmsnorm_backward(isa, dinp.data(), dweight.data(), dout.data(), inp.data(), weight.data(), rstd.data(), rows,
                            channels, threads);
      if (first_out.empty()) {
        first_out = out;
        first_dinp = dinp;
        first_dweight = dweight;
        continue;
      }
      CHECK(out == first_out);
      CHECK(dinp == first_dinp);
      CHECK(dweight == first_dweight);
    }
  }
}

// ---- SwiGLU --------------------------------------------------------------------------------------

double silu_reference(double g) { return g / (1.0 + std::exp(-g)); }

// SwiGLU's exp (Estrin's polynomial): the same bound and clamp as simd::exp_approx, over the same
// sweep as that one's test, plus a dense run of the reduced range where the polynomial matters most.
TEST_CASE("exp_approx_estrin: within 2e-7 relative of exp over [-87, 88.37], clamped beyond", "[model][swiglu]") {
  double worst = 0.0;
  const auto check = [&](float x) {
    const float got = cpu::simd::exp_approx_estrin(x);
    REQUIRE(std::isfinite(got));
    if (x < -87.0f || x > 88.3762626647949f) {
      REQUIRE(got == cpu::simd::exp_approx_estrin(x < 0.0f ? -87.0f : 88.3762626647949f));
      return;
    }
    const double exact = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(static_cast<double>(got) - exact) / exact);
  };
  const int steps = 1 << 20;
  for (int i = 0; i <= steps; ++i) check(-100.0f + 188.0f * static_cast<float>(i) / static_cast<float>(steps));
  for (int i = 0; i <= steps; ++i) check(-1.0f + 2.0f * static_cast<float>(i) / static_cast<float>(steps));
  INFO("worst relative error " << worst);
  CHECK(worst <= 2e-7);
  CHECK(std::fpclassify(cpu::simd::exp_approx_estrin(-87.0f)) == FP_NORMAL);
  CHECK(cpu::simd::exp_approx_estrin(-1e4f) == cpu::simd::exp_approx_estrin(-87.0f));
  CHECK(std::isfinite(cpu::simd::exp_approx_estrin(1e4f)));
  CHECK(cpu::simd::exp_approx_estrin(0.0f) == 1.0f);
}

TEST_CASE("swiglu: forward matches fp64, backward matches finite differences", "[model][swiglu]") {
  for (const std::size_t n : {std::size_t{1}, std::size_t{37}, std::size_t{5632 + 37}}) {
    std::mt19937_64 rng(51 + n);
    auto gate = uniform_values(n, -8.0f, 8.0f, rng);
    const auto up = uniform_values(n, -2.0f, 2.0f, rng);
    if (n > 3) {
      gate[0] = 0.0f;
      gate[1] = -30.0f;
      gate[2] = 30.0f;
    }
    const auto probe = uniform_values(n, -1.0f, 1.0f, rng);
    const auto dgate0 = uniform_values(n, -0.1f, 0.1f, rng);
    const auto dup0 = uniform_values(n, -0.1f, 0.1f, rng);

    std::vector<double> out_ref(n);
    std::vector<double> dg_ref(n);
    std::vector<double> du_ref(n);
    for (std::size_t i = 0; i < n; ++i) {
      std::vector<double> gu{gate[i], up[i]};
      const auto loss = [&] { return silu_reference(gu[0]) * gu[1] * static_cast<double>(probe[i]); };
      out_ref[i] = silu_reference(gu[0]) * gu[1];
      // Elementwise: element i's own output carries the whole gradient of both inputs.
      const std::vector<double> grad = finite_difference(gu, loss);
      dg_ref[i] = grad[0];
      du_ref[i] = grad[1];
    }

    for (Isa isa : supported_isas()) {
      for (int threads : {1, 3}) {
        INFO(cpu::isa_name(isa) << ", " << threads << " threads, n " << n);
        std::vector<float> out(n);
        cpu::swiglu_forward(isa, out.data(), gate.data(), up.data(), n, threads);
        CHECK(count_misses("out", out, out_ref, 1e-6, 1e-7) == 0);
        std::vector<float> dgate = dgate0;
        std::vector<float> dup = dup0;
        cpu::swiglu_backward(isa, dgate.data(), dup.data(), probe.data(), gate.data(), up.data(), n, threads);
        CHECK(count_grad_misses("dgate", dgate, dgate0, dg_ref) == 0);
        CHECK(count_grad_misses("dup", dup, dup0, du_ref) == 0);
      }
    }
  }
}

TEST_CASE("swiglu: extreme gates stay finite and saturate", "[model][swiglu]") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> gate{-1e30f, -100.0f, 100.0f, 1e30f, inf};
  const std::vector<float> up(gate.size(), 2.0f);
  for (Isa isa : supported_isas()) {
    INFO(cpu::isa_name(isa));
    std::vector<float> out(gate.size());
    cpu::swiglu_forward(isa, out.data(), gate.data(), up.data(), gate.size(), 1);
    CHECK(std::fabs(out[0]) < 1e-6f);
    CHECK(std::fabs(out[1]) < 1e-30f);
    CHECK(out[2] == 200.0f);
    CHECK(out[3] == 2e30f);
    CHECK(out[4] == inf);
  }
}

TEST_CASE("swiglu: every variant and thread count gives the same bits, in place works", "[model][swiglu]") {
  const std::size_t n = (std::size_t{1} << 16) + 13;
  std::mt19937_64 rng(52);
  const auto gate = uniform_values(n, -8.0f, 8.0f, rng);
  const auto up = uniform_values(n, -2.0f, 2.0f, rng);
  const auto dout = uniform_values(n, -1.0f, 1.0f, rng);
  std::vector<float> first_out;
  std::vector<float> first_dgate;
  std::vector<float> first_dup;
  for (Isa isa : supported_isas()) {
    for (int threads : {1, 2, 3}) {
      INFO(cpu::isa_name(isa) << ", " << threads << " threads");
      std::vector<float> out(n);
      cpu::swiglu_forward(isa, out.data(), gate.data(), up.data(), n, threads);
      std::vector<float> in_place_gate = gate;
      cpu::swiglu_forward(isa, in_place_gate.data(), in_place_gate.data(), up.data(), n, threads);
      CHECK(in_place_gate == out);
      std::vector<float> in_place_up = up;
      cpu::swiglu_forward(isa, in_place_up.data(), gate.data(), in_place_up.data(), n, threads);
      CHECK(in_place_up == out);
      std::vector<float> dgate(n, 0.0f);
      std::vector<float> dup(n, 0.0f);
      cpu::swiglu_backward(isa, dgate.data(), dup.data(), dout.data(), gate.data(), up.data(), n, threads);
      if (first_out.empty()) {
        first_out = out;
        first_dgate = dgate;
        first_dup = dup;
        continue;
      }
      CHECK(out == first_out);
      CHECK(dgate == first_dgate);
      CHECK(dup == first_dup);
    }
  }
}

}  // namespace
}  // namespace zinf::kernels
