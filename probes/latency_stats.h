// Latency and sample statistics for the benchmarks: percentiles of per-operation latencies and the
// median/min/max of repeated measurements. Pure functions over plain vectors; no clock, no I/O.
//
// Percentiles interpolate linearly between the two nearest ranks (numpy's default, "type 7"):
// the p-th percentile of n sorted values v[0..n-1] is v[r] + (r - floor(r)) * (v[r+1] - v[r]) with
// r = p / 100 * (n - 1). So p50 of an even count is the mean of the two middle values, p0 the
// minimum and p100 the maximum.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace zinf::probes {

// The p-th percentile (0 <= p <= 100) of `sorted`, which must be sorted ascending and non-empty
// (ZINF_CHECK).
double percentile_of_sorted(std::span<const double> sorted, double p);

// Summary of one set of latencies, in the unit the values were given in (seconds here).
struct LatencySummary {
  std::size_t count = 0;
  double mean = 0.0;
  double p50 = 0.0;
  double p90 = 0.0;
  double p99 = 0.0;
  double max = 0.0;
};

// All zeros for an empty input. Copies and sorts; the input is left unchanged.
LatencySummary summarize_latencies(std::span<const double> values);

// Median, minimum and maximum of repeated measurements (GB/s of each run).
struct SampleSpread {
  double median = 0.0;
  double min = 0.0;
  double max = 0.0;
};

// All zeros for an empty input.
SampleSpread spread_of(std::span<const double> values);

}  // namespace zinf::probes
