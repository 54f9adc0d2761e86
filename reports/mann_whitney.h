// The Mann-Whitney U test (Wilcoxon rank-sum) for two independent samples, two-sided: is a value
// from one sample as likely to exceed a value from the other as the reverse? It assumes nothing
// about the shape of the distributions, which suits benchmark timings (skewed, with outliers), and
// is what Google Benchmark's compare.py runs (via scipy.stats.mannwhitneyu).
//
// U of sample a = R_a - n_a(n_a+1)/2, R_a the sum of a's ranks in the pooled sample (ties get their
// mean rank); U_a + U_b = n_a n_b. The p-value is
//   - exact when there are no ties and n_a, n_b <= 50: the null distribution of U counted by the
//     recurrence f(m, n, u) = f(m-1, n, u-n) + f(m, n-1, u) over C(m+n, m) equally likely orders,
//     p = min(1, 2 P(U <= min(U_a, U_b)));
//   - otherwise the normal approximation with the tie correction and a continuity correction of 1/2:
//     sigma^2 = n_a n_b / 12 ((n+1) - sum(t^3 - t) / (n (n-1))), z = (|U - n_a n_b / 2| - 1/2) / sigma.
// (scipy's "auto" method makes the same choice at n <= 8; the exact count is cheap up to 50.)
#pragma once

#include <cstddef>
#include <span>

namespace zinf::reports {

struct MannWhitney {
  double u_a = 0;      // U statistic of the first sample
  double u_b = 0;      // of the second; u_a + u_b = n_a n_b
  double p_value = 1;  // two-sided; 1 when either sample is empty or every value is equal
  bool exact = false;  // true: exact distribution; false: normal approximation
};

// Precondition: no NaN in either sample (ZINF_CHECK). Empty samples give p = 1.
MannWhitney mann_whitney_u(std::span<const double> a, std::span<const double> b);

// The smallest two-sided p-value any pair of samples of these sizes can reach (complete
// separation, no ties): 2 / C(n_a + n_b, n_a), capped at 1. Below `alpha` the test can detect a
// difference at all; above it, the samples are too few.
double smallest_p_value(std::size_t n_a, std::size_t n_b);

}  // namespace zinf::reports
