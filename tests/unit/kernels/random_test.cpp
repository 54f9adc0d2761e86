// counter_normal_fill: the formula against an independent fp64 evaluation, bits independent of the
// thread count and of where a slice starts, and the sample's moments against N(0, scale^2).
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/random.h"
#include "tests/catch.h"

namespace zinf::kernels::cpu {
namespace {

std::vector<float> fill(std::size_t n, std::uint64_t stream, std::uint64_t first, double scale, int threads) {
  std::vector<float> out(n, std::nanf(""));
  counter_normal_fill(out.data(), n, stream, first, scale, threads);
  return out;
}

TEST_CASE("counter_mix is splitmix64's finaliser") {
  // Reference values of splitmix64 seeded with 0: its outputs are counter_mix(k * gamma) for k = 0, 1, 2.
  CHECK(counter_mix(0) == 0xE220A8397B1DCDAFull);
  CHECK(counter_mix(0x9E3779B97F4A7C15ull) == 0x6E789E6AA1B965F4ull);
  CHECK(counter_mix(2 * 0x9E3779B97F4A7C15ull) == 0x06C45D188009454Full);
}

TEST_CASE("counter_normal_fill: Box-Muller on the counter's uniforms, in fp64, rounded once") {
  const std::uint64_t stream = counter_mix(42);
  const std::vector<float> out = fill(1000, stream, 7, 0.02, 1);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::uint64_t k = 7 + i;
    const long double u1 = (static_cast<long double>(counter_mix(stream ^ (2 * k)) >> 11) + 1) / 9007199254740992.0L;
    const long double u2 =
        (static_cast<long double>(counter_mix(stream ^ (2 * k + 1)) >> 11) + 1) / 9007199254740992.0L;
    const long double expected = std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586476925L * u2) * 0.02L;
    // fp64 evaluation then one rounding to float: within one float ulp of the long-double value.
    const double ulp =
        std::nextafter(std::abs(static_cast<float>(expected)), INFINITY) - std::abs(static_cast<float>(expected));
    INFO("element " << i);
    REQUIRE(std::abs(static_cast<long double>(out[i]) - expected) <= ulp);
  }
}

TEST_CASE("counter_normal_fill: the same bits on any thread count and for any slice") {
  const std::uint64_t stream = counter_mix(1234);
  constexpr std::size_t kN = 200003;  // past the parallel threshold, not a multiple of anything
  const std::vector<float> whole = fill(kN, stream, 0, 1.0, 1);
  for (int threads : {2, 3, 8}) {
    INFO(threads << " threads");
    REQUIRE(fill(kN, stream, 0, 1.0, threads) == whole);
  }
  const std::size_t begin = 99991;
  const std::vector<float> slice = fill(kN - begin, stream, begin, 1.0, 2);
  REQUIRE(std::equal(slice.begin(), slice.end(), whole.begin() + static_cast<std::ptrdiff_t>(begin)));
}

TEST_CASE("counter_normal_fill: mean, variance and tails of N(0, scale^2)") {
  constexpr std::size_t kN = 1 << 20;
  constexpr double kScale = 0.5;
  const std::vector<float> out = fill(kN, counter_mix(7), 0, kScale, 2);
  double sum = 0, sum_sq = 0;
  std::size_t beyond_2sigma = 0;
  for (float x : out) {
    REQUIRE(std::isfinite(x));
    sum += x;
    sum_sq += static_cast<double>(x) * x;
    if (std::abs(x) > 2 * kScale) ++beyond_2sigma;
  }
  const double mean = sum / kN;
  const double var = sum_sq / kN - mean * mean;
  // Five standard errors: mean's is scale/sqrt(n); the variance's scale^2 sqrt(2/n).
  CHECK(std::abs(mean) < 5 * kScale / std::sqrt(double{kN}));
  CHECK(std::abs(var - kScale * kScale) < 5 * kScale * kScale * std::sqrt(2.0 / kN));
  // P(|Z| > 2) = 0.0455003; binomial standard error over n draws.
  const double p = 0.04550026389635842;
  CHECK(std::abs(static_cast<double>(beyond_2sigma) / kN - p) < 5 * std::sqrt(p * (1 - p) / kN));
}

}  // namespace
}  // namespace zinf::kernels::cpu
