// The CPU linear layer (kernels/matmul.h): forward against an fp64 triple loop written here, with
// and without bias; backward against central finite differences of that fp64 forward for the
// scalar loss L = sum(out * probe) (probe random) on a small odd-sized layer, and against the fp64
// gradient formulas on a bigger one; gradients start non-zero, so accumulation (+=) is checked too.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "tests/catch.h"
#include "tests/unit/kernels/kernel_test_support.h"

namespace zinf::kernels {
namespace {

using test_support::count_misses;
using test_support::finite_difference;
using test_support::scale_of;
using test_support::uniform_values;
using test_support::widen;

struct Shape {
  std::size_t rows;
  std::size_t in_channels;
  std::size_t out_channels;
};

// out[r,o] = bias[o] + sum_c inp[r,c] * weight[o,c], in fp64; an empty bias means none.
std::vector<double> matmul_reference(const std::vector<double>& inp, const std::vector<double>& weight,
                                     const std::vector<double>& bias, const Shape& s) {
  std::vector<double> out(s.rows * s.out_channels);
  for (std::size_t r = 0; r < s.rows; ++r) {
    for (std::size_t o = 0; o < s.out_channels; ++o) {
      double sum = bias.empty() ? 0.0 : bias[o];
      for (std::size_t c = 0; c < s.in_channels; ++c) sum += inp[r * s.in_channels + c] * weight[o * s.in_channels + c];
      out[r * s.out_channels + o] = sum;
    }
  }
  return out;
}

// Misses of the accumulated gradient `got` (which started as `start`) against start + want.
std::size_t count_grad_misses(const char* what, const std::vector<float>& got, const std::vector<float>& start,
                              const std::vector<double>& want) {
  std::vector<double> expected(want.size());
  for (std::size_t i = 0; i < want.size(); ++i) expected[i] = static_cast<double>(start[i]) + want[i];
  return count_misses(what, got, expected, 1e-4, 1e-5 * scale_of(want));
}

}  // namespace

TEST_CASE("matmul: forward matches an fp64 triple loop", "[model][matmul]") {
  for (const Shape s : {Shape{7, 13, 11}, Shape{64, 96, 80}, Shape{1, 1, 1}, Shape{5, 1, 3}}) {
    for (const bool with_bias : {true, false}) {
      DYNAMIC_SECTION(s.rows << "x" << s.in_channels << "x" << s.out_channels << (with_bias ? ", bias" : ", no bias")) {
        std::mt19937_64 rng(21 + s.rows);
        const auto inp = uniform_values(s.rows * s.in_channels, -2.0f, 2.0f, rng);
        const auto weight = uniform_values(s.out_channels * s.in_channels, -1.0f, 1.0f, rng);
        const auto bias = with_bias ? uniform_values(s.out_channels, -0.5f, 0.5f, rng) : std::vector<float>{};
        const auto out_ref = matmul_reference(widen(inp), widen(weight), widen(bias), s);
        // Stale values in out must not leak into the result (beta = 0 / bias overwrite).
        std::vector<float> out(s.rows * s.out_channels, 1e30f);
        cpu::matmul_forward(out.data(), inp.data(), weight.data(), with_bias ? bias.data() : nullptr, s.rows,
                            s.in_channels, s.out_channels);
        CHECK(count_misses("out", out, out_ref, 1e-5, 1e-5 * scale_of(out_ref)) == 0);
      }
    }
  }
}

TEST_CASE("matmul: backward matches finite differences and accumulates", "[model][matmul]") {
  const Shape s{7, 13, 11};
  for (const bool with_bias : {true, false}) {
    DYNAMIC_SECTION((with_bias ? "bias" : "no bias")) {
      std::mt19937_64 rng(31);
      const auto inp = uniform_values(s.rows * s.in_channels, -2.0f, 2.0f, rng);
      const auto weight = uniform_values(s.out_channels * s.in_channels, -1.0f, 1.0f, rng);
      const auto bias = uniform_values(s.out_channels, -0.5f, 0.5f, rng);
      const auto probe = uniform_values(s.rows * s.out_channels, -1.0f, 1.0f, rng);
      const auto dinp0 = uniform_values(s.rows * s.in_channels, -0.1f, 0.1f, rng);
      const auto dweight0 = uniform_values(s.out_channels * s.in_channels, -0.1f, 0.1f, rng);
      const auto dbias0 = uniform_values(s.out_channels, -0.1f, 0.1f, rng);

      std::vector<double> x = widen(inp);
      std::vector<double> w = widen(weight);
      std::vector<double> b = with_bias ? widen(bias) : std::vector<double>{};
      const std::vector<double> probe_d = widen(probe);
      const auto loss = [&] {
        const auto out = matmul_reference(x, w, b, s);
        double sum = 0.0;
        for (std::size_t i = 0; i < out.size(); ++i) sum += out[i] * probe_d[i];
        return sum;
      };
      const std::vector<double> dx_ref = finite_difference(x, loss);
      const std::vector<double> dw_ref = finite_difference(w, loss);

      std::vector<float> dinp = dinp0;
      std::vector<float> dweight = dweight0;
      std::vector<float> dbias = dbias0;
      cpu::matmul_backward(dinp.data(), dweight.data(), with_bias ? dbias.data() : nullptr, probe.data(), inp.data(),
                           weight.data(), s.rows, s.in_channels, s.out_channels);
      CHECK(count_grad_misses("dinp", dinp, dinp0, dx_ref) == 0);
      CHECK(count_grad_misses("dweight", dweight, dweight0, dw_ref) == 0);
      if (with_bias) {
        const std::vector<double> db_ref = finite_difference(b, loss);
        CHECK(count_grad_misses("dbias", dbias, dbias0, db_ref) == 0);
      } else {
        CHECK(dbias == dbias0);
      }
    }
  }
}

TEST_CASE("matmul: backward matches the fp64 gradient formulas on a bigger layer", "[model][matmul]") {
  // Finite differences would take R*C + OC*C forward passes here; the formulas are checked instead.
  const Shape s{64, 96, 80};
  std::mt19937_64 rng(41);
  const auto inp = uniform_values(s.rows * s.in_channels, -2.0f, 2.0f, rng);
  const auto weight = uniform_values(s.out_channels * s.in_channels, -1.0f, 1.0f, rng);
  const auto dout = uniform_values(s.rows * s.out_channels, -1.0f, 1.0f, rng);
  const auto dinp0 = uniform_values(s.rows * s.in_channels, -0.1f, 0.1f, rng);
  const auto dweight0 = uniform_values(s.out_channels * s.in_channels, -0.1f, 0.1f, rng);
  const auto dbias0 = uniform_values(s.out_channels, -0.1f, 0.1f, rng);

  std::vector<double> dx_ref(s.rows * s.in_channels, 0.0);
  std::vector<double> dw_ref(s.out_channels * s.in_channels, 0.0);
  std::vector<double> db_ref(s.out_channels, 0.0);
  for (std::size_t r = 0; r < s.rows; ++r) {
    for (std::size_t o = 0; o < s.out_channels; ++o) {
      const double g = dout[r * s.out_channels + o];
      db_ref[o] += g;
      for (std::size_t c = 0; c < s.in_channels; ++c) {
        dx_ref[r * s.in_channels + c] += g * static_cast<double>(weight[o * s.in_channels + c]);
        dw_ref[o * s.in_channels + c] += g * static_cast<double>(inp[r * s.in_channels + c]);
      }
    }
  }

  std::vector<float> dinp = dinp0;
  std::vector<float> dweight = dweight0;
  std::vector<float> dbias = dbias0;
  cpu::matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(), s.rows,
                       s.in_channels, s.out_channels);
  CHECK(count_grad_misses("dinp", dinp, dinp0, dx_ref) == 0);
  CHECK(count_grad_misses("dweight", dweight, dweight0, dw_ref) == 0);
  CHECK(count_grad_misses("dbias", dbias, dbias0, db_ref) == 0);
}

TEST_CASE("matmul: empty dimensions", "[model][matmul]") {
  const std::vector<float> bias = {0.25f, -1.5f, 2.0f};
  SECTION("no input channels: out is the bias, or zero") {
    std::vector<float> out(2 * 3, 7.0f);
    cpu::matmul_forward(out.data(), nullptr, nullptr, bias.data(), 2, 0, 3);
    CHECK(out == std::vector<float>{0.25f, -1.5f, 2.0f, 0.25f, -1.5f, 2.0f});
    cpu::matmul_forward(out.data(), nullptr, nullptr, nullptr, 2, 0, 3);
    CHECK(out == std::vector<float>(6, 0.0f));
  }
  SECTION("no input channels: only dbias changes") {
    const std::vector<float> dout = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
    std::vector<float> dbias = {1.0f, 1.0f, 1.0f};
    cpu::matmul_backward(nullptr, nullptr, dbias.data(), dout.data(), nullptr, nullptr, 2, 0, 3);
    CHECK(dbias == std::vector<float>{6.0f, 8.0f, 10.0f});
  }
  SECTION("no rows: nothing is touched") {
    std::vector<float> dweight(3 * 4, 1.0f);
    std::vector<float> dbias(3, 1.0f);
    cpu::matmul_backward(nullptr, dweight.data(), dbias.data(), nullptr, nullptr, nullptr, 0, 4, 3);
    CHECK(dweight == std::vector<float>(12, 1.0f));
    CHECK(dbias == std::vector<float>(3, 1.0f));
  }
}

}  // namespace zinf::kernels
