#include "probes/ratio_spread.h"

#include <algorithm>

#include "probes/latency_stats.h"

namespace zinf::probes {

double relative_spread(std::span<const double> values) {
  if (values.size() < 2) return 0.0;
  const SampleSpread s = spread_of(values);
  return s.median > 0 ? (s.max - s.min) / s.median : 0.0;
}

nlohmann::json ratio_with_spread(std::span<const double> zinf, std::span<const double> baseline) {
  const SampleSpread a = spread_of(zinf);
  const SampleSpread b = spread_of(baseline);
  if (zinf.empty() || baseline.empty() || a.min <= 0 || b.min <= 0) {
    return {{"value", nullptr},           {"low", nullptr},      {"high", nullptr},    {"zinf_spread", nullptr},
            {"baseline_spread", nullptr}, {"too_wide", nullptr}, {"rule", kSpreadRule}};
  }
  const double zinf_spread = relative_spread(zinf);
  const double baseline_spread = relative_spread(baseline);
  return {{"value", a.median / b.median},
          {"low", a.min / b.max},
          {"high", a.max / b.min},
          {"zinf_spread", zinf_spread},
          {"baseline_spread", baseline_spread},
          {"too_wide", zinf_spread > kMaxRelativeSpread || baseline_spread > kMaxRelativeSpread},
          {"rule", kSpreadRule}};
}

}  // namespace zinf::probes
