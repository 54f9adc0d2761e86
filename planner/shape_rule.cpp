#include "planner/shape_rule.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "libengine/core/units.h"

namespace zinf::planner {

Result<spec::ModelShape> shape_for_params(std::uint64_t target_params, std::int64_t vocab, std::int64_t seq,
                                          const FieldNamer& name_field) {
  const spec::ModelShape smallest = spec::gpt_like_shape(1, kShapeRuleHeadDim, 1, vocab, seq);
  ZINF_RETURN_IF_ERROR(spec::validate(smallest));
  const std::uint64_t minimum = spec::count_parameters(smallest).total;
  if (target_params < minimum) {
    return Status::invalid_argument(
        fmt::format("{}: {} is below the smallest GPT-like shape ({} parameters: 1 layer, hidden 128, vocab {}); "
                    "give the shape with {} instead",
                    name_field(field::kParams), format_count(static_cast<double>(target_params)), minimum, vocab,
                    name_field(field::kShape)));
  }
  const double target = static_cast<double>(target_params);
  constexpr double kAspect = static_cast<double>(kShapeRuleHeadDim);  // hidden / layers
  const double ideal_layers = std::cbrt(target / (12.0 * kAspect * kAspect));
  const auto lowest = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(ideal_layers * 0.5)));
  const auto highest = std::max<std::int64_t>(lowest, static_cast<std::int64_t>(std::ceil(ideal_layers * 1.5)));

  struct Candidate {
    spec::ModelShape shape;
    double relative_error = 0;
    double aspect_distance = 0;
  };
  std::optional<Candidate> best;
  const auto better = [](const Candidate& a, const Candidate& b) {
    constexpr double kCloseEnough = 0.01;
    const bool a_close = a.relative_error <= kCloseEnough;
    const bool b_close = b.relative_error <= kCloseEnough;
    if (a_close && b_close) return a.aspect_distance < b.aspect_distance;
    return a.relative_error < b.relative_error;
  };
  for (std::int64_t layers = lowest; layers <= highest; ++layers) {
    // Solve 12·L·h² + (vocab + seq)·h ≈ P for h, then try the two nearest multiples of 128.
    const double a = 12.0 * static_cast<double>(layers);
    const double b = static_cast<double>(vocab + seq) + 13.0 * static_cast<double>(layers);
    const double hidden_exact = (-b + std::sqrt(b * b + 4.0 * a * target)) / (2.0 * a);
    const auto base = static_cast<std::int64_t>(std::floor(hidden_exact / kShapeRuleHeadDim));
    for (std::int64_t units : {base, base + 1}) {
      if (units < 1) continue;
      const std::int64_t hidden = units * kShapeRuleHeadDim;
      spec::ModelShape shape = spec::gpt_like_shape(layers, hidden, units, vocab, seq);
      if (!spec::validate(shape).is_ok()) continue;
      const double count = static_cast<double>(spec::count_parameters(shape).total);
      Candidate candidate{std::move(shape), std::fabs(count - target) / target,
                          std::fabs(std::log2(static_cast<double>(hidden) / static_cast<double>(layers) / kAspect))};
      if (!best || better(candidate, *best)) best = std::move(candidate);
    }
  }
  if (!best) {
    return Status::invalid_argument(fmt::format("{}: {} is too large for a GPT-like shape (hidden would exceed 2^24)",
                                                name_field(field::kParams), format_count(target)));
  }
  best->shape.name = fmt::format("gpt-like {}", format_count(target));
  return best->shape;
}

}  // namespace zinf::planner
