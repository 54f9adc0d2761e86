// Shared helpers of the kernel tests: which instruction sets this CPU runs, seeded random inputs,
// fp64 references, tolerance checks that report the first misses, and central finite differences.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "tests/catch.h"

namespace zinf::kernels::test_support {

using cpu::Isa;

inline std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (cpu::isa_supported(isa)) isas.push_back(isa);
  }
  return isas;
}

inline std::vector<float> uniform_values(std::size_t n, float lo, float hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(n);
  for (auto& x : values) x = dist(rng);
  return values;
}

inline std::vector<double> widen(const std::vector<float>& values) { return {values.begin(), values.end()}; }

// Elements where |got - want| > rel*|want| + floor; the first three are reported.
inline std::size_t count_misses(const char* what, const std::vector<float>& got, const std::vector<double>& want,
                                double rel, double floor) {
  REQUIRE(got.size() == want.size());
  std::size_t misses = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(error <= rel * std::fabs(want[i]) + floor) && misses++ < 3) {
      UNSCOPED_INFO(what << "[" << i << "] = " << got[i] << ", expected " << want[i] << " (error " << error << ")");
    }
  }
  return misses;
}

// The largest magnitude in `values` (at least 1), to scale absolute tolerances.
inline double scale_of(const std::vector<double>& values) {
  double scale = 1.0;
  for (double v : values) scale = std::max(scale, std::fabs(v));
  return scale;
}

// Central finite difference of loss() with respect to every element of `x`, in fp64, with a step
// of 1e-6 relative to the element (absolute 1e-6 near zero). `x` is restored.
inline std::vector<double> finite_difference(std::vector<double>& x, const std::function<double()>& loss) {
  std::vector<double> grad(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    const double h = 1e-6 * std::max(1.0, std::fabs(saved));
    x[i] = saved + h;
    const double up = loss();
    x[i] = saved - h;
    const double down = loss();
    x[i] = saved;
    grad[i] = (up - down) / (2.0 * h);
  }
  return grad;
}

}  // namespace zinf::kernels::test_support
