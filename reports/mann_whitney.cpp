#include "reports/mann_whitney.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "libengine/core/check.h"

namespace zinf::reports {
namespace {

constexpr std::size_t kExactLimit = 50;

// P(U <= u) under the null for samples of m and n without ties: the number of arrangements with
// U = k, k <= u, over C(m+n, m). Counts in double (C(100, 50) ~ 1e29 is exact enough in relative
// terms for a p-value). Dynamic programming over (m, n) keeps it O(m n (m n)).
double exact_cdf(std::size_t m, std::size_t n, double u) {
  const std::size_t max_u = m * n;
  // counts[j][k]: arrangements of i a's and j b's with U_a = k, built up over i.
  std::vector<std::vector<double>> prev(n + 1, std::vector<double>(max_u + 1, 0.0));
  for (std::size_t j = 0; j <= n; ++j) prev[j][0] = 1.0;  // i = 0: one arrangement, U = 0
  for (std::size_t i = 1; i <= m; ++i) {
    std::vector<std::vector<double>> cur(n + 1, std::vector<double>(max_u + 1, 0.0));
    cur[0][0] = 1.0;
    for (std::size_t j = 1; j <= n; ++j) {
      for (std::size_t k = 0; k <= i * j; ++k) {
        // The largest of the i + j values is an a (it beats all j b's: U grows by j) or a b.
        const double with_a_last = k >= j ? prev[j][k - j] : 0.0;
        cur[j][k] = with_a_last + cur[j - 1][k];
      }
    }
    prev = std::move(cur);
  }
  double total = 0, below = 0;
  for (std::size_t k = 0; k <= max_u; ++k) {
    total += prev[n][k];
    if (static_cast<double>(k) <= u + 1e-9) below += prev[n][k];
  }
  return below / total;
}

double normal_sf(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

}  // namespace

double smallest_p_value(std::size_t n_a, std::size_t n_b) {
  if (n_a == 0 || n_b == 0) return 1.0;
  // C(n_a + n_b, n_a) via lgamma: exact enough for a threshold comparison.
  const double log_c = std::lgamma(static_cast<double>(n_a + n_b) + 1) - std::lgamma(static_cast<double>(n_a) + 1) -
                       std::lgamma(static_cast<double>(n_b) + 1);
  return std::min(1.0, 2.0 * std::exp(-log_c));
}

MannWhitney mann_whitney_u(std::span<const double> a, std::span<const double> b) {
  MannWhitney out;
  const std::size_t na = a.size(), nb = b.size(), n = na + nb;
  if (na == 0 || nb == 0) return out;
  struct Value {
    double v;
    bool from_a;
  };
  std::vector<Value> pooled;
  pooled.reserve(n);
  for (const double v : a) {
    ZINF_CHECK(!std::isnan(v), "Mann-Whitney samples must not hold NaN");
    pooled.push_back({v, true});
  }
  for (const double v : b) {
    ZINF_CHECK(!std::isnan(v), "Mann-Whitney samples must not hold NaN");
    pooled.push_back({v, false});
  }
  std::sort(pooled.begin(), pooled.end(), [](const Value& x, const Value& y) { return x.v < y.v; });
  double rank_sum_a = 0, tie_term = 0;
  bool ties = false;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && pooled[j].v == pooled[i].v) ++j;
    const double t = static_cast<double>(j - i);
    const double mean_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (std::size_t k = i; k < j; ++k) {
      if (pooled[k].from_a) rank_sum_a += mean_rank;
    }
    if (t > 1) {
      ties = true;
      tie_term += t * t * t - t;
    }
    i = j;
  }
  const double dna = static_cast<double>(na), dnb = static_cast<double>(nb), dn = static_cast<double>(n);
  out.u_a = rank_sum_a - dna * (dna + 1) / 2.0;
  out.u_b = dna * dnb - out.u_a;
  if (!ties && na <= kExactLimit && nb <= kExactLimit) {
    out.exact = true;
    out.p_value = std::min(1.0, 2.0 * exact_cdf(na, nb, std::min(out.u_a, out.u_b)));
    return out;
  }
  const double variance = dna * dnb / 12.0 * ((dn + 1) - tie_term / (dn * (dn - 1)));
  if (variance <= 0) return out;  // every value equal: no evidence of a difference
  const double z = (std::abs(out.u_a - dna * dnb / 2.0) - 0.5) / std::sqrt(variance);
  out.p_value = std::min(1.0, 2.0 * normal_sf(std::max(z, 0.0)));
  return out;
}

}  // namespace zinf::reports
