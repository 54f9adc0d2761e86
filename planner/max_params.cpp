#include "planner/max_params.h"

#include <cmath>

#include <fmt/format.h>

#include "planner/shape_rule.h"

namespace zinf::planner {
namespace {

struct Probe {
  bool fits = false;
  spec::ModelShape shape;
  PlacementChoice choice;
  ModelMemory memory;
};

Probe probe(const PlanInput& base, double params) {
  Probe out;
  const std::int64_t vocab = base.shape.vocab > 0 ? base.shape.vocab : kDefaultVocab;
  const auto shape = shape_for_params(static_cast<std::uint64_t>(params), vocab, base.training.seq);
  if (!shape.is_ok()) return out;
  out.shape = *shape;
  PlanInput input = base;
  input.shape = out.shape;
  out.memory = model_memory(out.shape, input.training);
  out.choice = choose_placement(out.memory, input);
  out.fits = out.choice.feasible;
  return out;
}

std::string describe_limit(const Probe& too_big) {
  const Footprint& fp = too_big.choice.footprint;
  std::string limit;
  for (spec::Tier tier : spec::kAllTiers) {
    const TierUsage& usage = fp.tier(tier);
    if (usage.fits()) continue;
    limit += fmt::format("{}{} memory {}", limit.empty() ? "" : ", ", spec::tier_name(tier),
                         tier == spec::Tier::kDevice ? "per GPU" : "per node");
  }
  return limit.empty() ? "model shape limits" : limit;
}

}  // namespace

Result<std::vector<MaxParamsResult>> max_params_per_strategy(const PlanInput& base,
                                                             const std::vector<Strategy>& strategies) {
  ZINF_RETURN_IF_ERROR(spec::validate(base.training));
  ZINF_RETURN_IF_ERROR(validate(base.hardware));
  ZINF_ASSIGN_OR_RETURN(const ComputeRate rate, plan_compute_rate(base));
  std::vector<MaxParamsResult> results;
  for (Strategy strategy : strategies) {
    PlanInput input = base;
    input.strategy = strategy;
    input.pinned = {};
    MaxParamsResult result;
    result.strategy = strategy;

    // Bisection in log space: the footprint grows monotonically with the parameter count.
    double low = 1e7;
    double high = kMaxParamsSearchLimit;
    Probe best = probe(input, low);
    if (best.fits) {
      Probe ceiling = probe(input, high);
      if (ceiling.fits) {
        best = std::move(ceiling);
        result.at_search_limit = true;
      } else {
        Probe failed = std::move(ceiling);
        while (high / low > 1.001) {
          const double mid = std::sqrt(low * high);
          Probe attempt = probe(input, mid);
          if (attempt.fits) {
            low = mid;
            best = std::move(attempt);
          } else {
            high = mid;
            failed = std::move(attempt);
          }
        }
        result.limit = describe_limit(failed);
      }
      result.max_params = spec::count_parameters(best.shape).total;
      result.shape = best.shape;
      result.placement = best.choice.placement;
      result.prediction = predict(best.memory, input, rate, best.choice.step);
      ZINF_RETURN_IF_ERROR(check_finite(result.prediction));
    } else {
      result.limit = describe_limit(best);
    }
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace zinf::planner
