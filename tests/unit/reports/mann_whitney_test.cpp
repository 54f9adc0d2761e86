// Mann-Whitney U against closed forms and a published table of critical values.
#include "reports/mann_whitney.h"

#include <cmath>
#include <vector>

#include "tests/catch.h"

namespace zinf::reports {
namespace {

// Samples of n each with U_a = u exactly and no ties: b = 0..n-1, and a's i-th value sits above
// c_i of them (c_i summing to u), nudged apart so no two values are equal.
std::pair<std::vector<double>, std::vector<double>> samples_with_u(std::size_t n, std::size_t u) {
  std::vector<double> a, b;
  for (std::size_t i = 0; i < n; ++i) b.push_back(static_cast<double>(i));
  std::size_t left = u;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c = std::min(left, n);
    left -= c;
    a.push_back(static_cast<double>(c) - 0.5 + static_cast<double>(i) * 1e-6);
  }
  return {a, b};
}

TEST_CASE("complete separation gives p = 2 / C(n_a + n_b, n_a) exactly", "[mann_whitney]") {
  const std::vector<double> low{1, 2, 3}, high{4, 5, 6};
  const MannWhitney r = mann_whitney_u(low, high);
  CHECK(r.exact);
  CHECK(r.u_a == 0);
  CHECK(r.u_b == 9);
  CHECK(r.p_value == Approx(2.0 / 20.0));  // C(6,3) = 20
  const std::vector<double> a5{1, 2, 3, 4, 5}, b5{6, 7, 8, 9, 10};
  CHECK(mann_whitney_u(a5, b5).p_value == Approx(2.0 / 252.0));  // C(10,5) = 252
  CHECK(mann_whitney_u(b5, a5).p_value == Approx(2.0 / 252.0));
  CHECK(smallest_p_value(3, 3) == Approx(0.1));
  CHECK(smallest_p_value(5, 5) == Approx(2.0 / 252.0));
  CHECK(smallest_p_value(0, 5) == 1.0);
}

TEST_CASE("a small exact case counted by hand", "[mann_whitney]") {
  // a = {1, 2, 4}, b = {3, 5, 6}: ranks of a 1, 2, 4 -> R = 7, U_a = 7 - 6 = 1. Of the 20 orders
  // of 3 + 3 values, one has U = 0 and one U = 1: P(U <= 1) = 2/20, two-sided p = 0.2.
  const std::vector<double> a{1, 2, 4}, b{3, 5, 6};
  const MannWhitney r = mann_whitney_u(a, b);
  CHECK(r.u_a == 1);
  CHECK(r.u_b == 8);
  CHECK(r.p_value == Approx(0.2));
}

TEST_CASE("exact p-values agree with the published two-tailed 0.05 critical values of U", "[mann_whitney]") {
  // Critical values of U for n_a = n_b, two-tailed alpha = 0.05 (the standard Mann-Whitney table,
  // e.g. Siegel & Castellan, Nonparametric Statistics, Table J): U <= critical is significant,
  // critical + 1 is not.
  const std::pair<std::size_t, std::size_t> table[] = {{5, 2}, {8, 13}, {10, 23}, {20, 127}};
  for (const auto& [n, critical] : table) {
    INFO("n = " << n << ", critical U = " << critical);
    const auto [a, b] = samples_with_u(n, critical);
    const MannWhitney at = mann_whitney_u(a, b);
    CHECK(at.u_a == static_cast<double>(critical));
    CHECK(at.exact);
    CHECK(at.p_value <= 0.05);
    const auto [a1, b1] = samples_with_u(n, critical + 1);
    CHECK(mann_whitney_u(a1, b1).p_value > 0.05);
  }
}

TEST_CASE("ties use the normal approximation with the tie-corrected variance", "[mann_whitney]") {
  // Pooled 1, 2, 2, 2, 3, 3: ranks 1; 3, 3, 3 (mean of 2..4); 5.5, 5.5. a = {1, 2, 2}: R = 7,
  // U_a = 1. Ties t = 3 and t = 2: sum(t^3 - t) = 24 + 6 = 30. sigma^2 = 3*3/12 * (7 - 30/30) = 4.5;
  // z = (|1 - 4.5| - 0.5) / sqrt(4.5) = sqrt(2); p = 2 * (1 - Phi(sqrt 2)) = erfc(1).
  const std::vector<double> a{1, 2, 2}, b{2, 3, 3};
  const MannWhitney r = mann_whitney_u(a, b);
  CHECK_FALSE(r.exact);
  CHECK(r.u_a == 1);
  CHECK(r.p_value == Approx(std::erfc(1.0)).epsilon(1e-12));
}

TEST_CASE("identical samples and empty samples give p = 1", "[mann_whitney]") {
  const std::vector<double> same{2, 2, 2, 2};
  CHECK(mann_whitney_u(same, same).p_value == 1.0);
  const std::vector<double> empty;
  CHECK(mann_whitney_u(empty, same).p_value == 1.0);
}

}  // namespace
}  // namespace zinf::reports
