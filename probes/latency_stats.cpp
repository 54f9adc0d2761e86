#include "probes/latency_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "libengine/core/check.h"

namespace zinf::probes {

double percentile_of_sorted(std::span<const double> sorted, double p) {
  ZINF_CHECK(!sorted.empty(), "percentile of no values");
  ZINF_CHECK(p >= 0.0 && p <= 100.0, "percentile outside 0..100");
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(rank));
  if (below + 1 >= sorted.size()) return sorted.back();
  const double fraction = rank - static_cast<double>(below);
  return sorted[below] + fraction * (sorted[below + 1] - sorted[below]);
}

LatencySummary summarize_latencies(std::span<const double> values) {
  LatencySummary summary;
  if (values.empty()) return summary;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  summary.count = sorted.size();
  summary.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(sorted.size());
  summary.p50 = percentile_of_sorted(sorted, 50.0);
  summary.p90 = percentile_of_sorted(sorted, 90.0);
  summary.p99 = percentile_of_sorted(sorted, 99.0);
  summary.max = sorted.back();
  return summary;
}

SampleSpread spread_of(std::span<const double> values) {
  SampleSpread spread;
  if (values.empty()) return spread;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  spread.median = percentile_of_sorted(sorted, 50.0);
  spread.min = sorted.front();
  spread.max = sorted.back();
  return spread;
}

}  // namespace zinf::probes
