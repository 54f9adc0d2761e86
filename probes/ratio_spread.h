// A benchmark ratio with its spread, and the rule that says when the spread is too wide for the
// ratio to mean anything (issue 15, "Trust every measurement").
//
//   ratio = median(zinf) / median(baseline)
//   range = [min(zinf) / max(baseline), max(zinf) / min(baseline)]: the ratios any pairing of one run
//           of each side could give
//   too wide when either side's relative spread (max - min) / median exceeds 20%: runs of one side
//           that disagree by more than a fifth (a busy machine, a throttling drive) make a ratio
//           within that band noise, whatever its value.
//
// Written into records as {"value", "low", "high", "zinf_spread", "baseline_spread", "too_wide",
// "rule"}; the renderers print "0.93 (0.88..0.97)" and flag too_wide.
#pragma once

#include <span>
#include <string_view>

#include <nlohmann/json.hpp>

namespace zinf::probes {

inline constexpr double kMaxRelativeSpread = 0.20;
inline constexpr std::string_view kSpreadRule =
    "a ratio is too wide to judge when either side's (max - min) / median exceeds 20%; its range pairs the extreme "
    "runs: min(zinf)/max(baseline) .. max(zinf)/min(baseline)";

// (max - min) / median of `values`; 0 for fewer than two values or a zero median.
double relative_spread(std::span<const double> values);

// The ratio of two sets of repeated measurements (both non-empty, every value > 0; otherwise null
// fields) as the head comment describes.
nlohmann::json ratio_with_spread(std::span<const double> zinf, std::span<const double> baseline);

}  // namespace zinf::probes
