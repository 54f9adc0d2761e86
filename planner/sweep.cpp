#include "planner/sweep.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "libengine/core/quote.h"
#include "libengine/core/split.h"
#include "libengine/core/units.h"
#include "planner/shape_rule.h"

namespace zinf::planner {
namespace {

constexpr std::size_t kMaxValuesPerDimension = 10'000;

struct KeyInfo {
  SweepKey key;
  std::string_view name;
};
constexpr KeyInfo kKeys[] = {
    {SweepKey::kParams, "params"},
    {SweepKey::kNodes, "nodes"},
    {SweepKey::kGpusPerNode, "gpus-per-node"},
    {SweepKey::kMicroBatch, "micro-batch"},
    {SweepKey::kSeq, "seq"},
    {SweepKey::kTiling, "tiling"},
    {SweepKey::kCkptInterval, "ckpt-interval"},
};

Result<std::uint64_t> parse_value(SweepKey key, std::string_view text, std::string_view field) {
  if (key == SweepKey::kParams) return parse_count(text, field);
  ZINF_ASSIGN_OR_RETURN(const std::int64_t value, parse_positive_int(text, field, 1'000'000'000));
  return static_cast<std::uint64_t>(value);
}

// 1, 2, 5, 10, 20, 50, ... between low and high, with both ends included.
std::vector<std::uint64_t> one_two_five(std::uint64_t low, std::uint64_t high) {
  std::vector<std::uint64_t> values{low};
  for (double decade = 1; decade <= static_cast<double>(high); decade *= 10) {
    for (double mantissa : {1.0, 2.0, 5.0}) {
      const double value = mantissa * decade;
      if (value > static_cast<double>(low) && value < static_cast<double>(high)) {
        values.push_back(static_cast<std::uint64_t>(value));
      }
    }
  }
  values.push_back(high);
  return values;
}

}  // namespace

std::string_view sweep_key_name(SweepKey key) {
  for (const KeyInfo& info : kKeys) {
    if (info.key == key) return info.name;
  }
  return "?";
}

Result<std::vector<std::uint64_t>> parse_sweep_values(SweepKey key, std::string_view text, std::string_view field) {
  std::vector<std::uint64_t> values;
  const auto range_at = text.find("..");
  if (range_at == std::string_view::npos) {
    for (const std::string_view item : split(text, ',')) {
      ZINF_ASSIGN_OR_RETURN(const std::uint64_t value, parse_value(key, item, field));
      values.push_back(value);
    }
  } else {
    std::string_view rest = text.substr(range_at + 2);
    std::optional<std::string_view> step;  // present when a ':' is written, even with nothing after it
    if (const auto colon = rest.find(':'); colon != std::string_view::npos) {
      step = rest.substr(colon + 1);
      rest = rest.substr(0, colon);
    }
    ZINF_ASSIGN_OR_RETURN(const std::uint64_t low, parse_value(key, text.substr(0, range_at), field));
    ZINF_ASSIGN_OR_RETURN(const std::uint64_t high, parse_value(key, rest, field));
    if (low > high) {
      return Status::invalid_argument(
          fmt::format("{}: range {} runs backwards; write low..high", field, zinf::quoted(text)));
    }
    bool multiply = true;
    std::uint64_t amount = 2;
    if (!step && key == SweepKey::kParams) {
      values = one_two_five(low, high);
    } else {
      if (step) {
        const bool valid_kind = !step->empty() && (step->front() == 'x' || step->front() == '+');
        const auto parsed =
            valid_kind ? parse_count(step->substr(1), field) : Result<std::uint64_t>(Status::invalid_argument(""));
        multiply = valid_kind && step->front() == 'x';
        if (!parsed.is_ok() || (multiply && *parsed < 2)) {
          return Status::invalid_argument(
              fmt::format("{}: step {} is not valid; expected :xN (multiply, N >= 2) or :+N (add, N >= 1)", field,
                          zinf::quoted(*step)));
        }
        amount = *parsed;
      }
      // Stop before the next value would pass `high`, checking before the arithmetic can overflow.
      for (std::uint64_t v = low;;) {
        values.push_back(v);
        if (values.size() > kMaxValuesPerDimension) break;
        if (multiply ? v > high / amount : amount > high - v) break;
        v = multiply ? v * amount : v + amount;
      }
      if (!step && values.back() != high) values.push_back(high);  // the default x2 series ends at high
    }
  }
  if (values.size() > kMaxValuesPerDimension) {
    return Status::invalid_argument(
        fmt::format("{}: {} has more than {} values", field, zinf::quoted(text), kMaxValuesPerDimension));
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

Result<SweepDimension> parse_sweep_dimension(std::string_view text, std::string_view field) {
  const auto equals = text.find('=');
  std::string keys;
  for (const KeyInfo& info : kKeys) keys += fmt::format("{}{}", keys.empty() ? "" : ", ", info.name);
  if (equals == std::string_view::npos) {
    return Status::invalid_argument(
        fmt::format("{}: {} is not key=values (e.g. params=1B..100T); keys: {}", field, zinf::quoted(text), keys));
  }
  const std::string_view name = text.substr(0, equals);
  for (const KeyInfo& info : kKeys) {
    if (info.name != name) continue;
    ZINF_ASSIGN_OR_RETURN(std::vector<std::uint64_t> values,
                          parse_sweep_values(info.key, text.substr(equals + 1), fmt::format("{} {}", field, name)));
    return SweepDimension{info.key, std::move(values)};
  }
  return Status::invalid_argument(fmt::format("{}: {} is not a sweep key; keys: {}", field, zinf::quoted(name), keys));
}

Result<std::vector<SweepPoint>> run_sweep(const PlanInput& base, const std::vector<SweepDimension>& dimensions,
                                          const FieldNamer& name_field) {
  std::size_t total = 1;
  for (const SweepDimension& dimension : dimensions) {
    if (dimension.values.empty()) {
      return Status::invalid_argument(
          fmt::format("{} {}: no values", name_field(field::kSweep), sweep_key_name(dimension.key)));
    }
    total *= dimension.values.size();
    if (total > kMaxSweepPoints) {
      return Status::invalid_argument(fmt::format("{}: more than {} points; narrow a range or use a larger step",
                                                  name_field(field::kSweep), kMaxSweepPoints));
    }
  }
  std::vector<SweepPoint> points;
  points.reserve(total);
  std::vector<std::size_t> index(dimensions.size(), 0);
  for (std::size_t n = 0; n < total; ++n) {
    // Last dimension fastest.
    std::size_t rest = n;
    for (std::size_t d = dimensions.size(); d-- > 0;) {
      index[d] = rest % dimensions[d].values.size();
      rest /= dimensions[d].values.size();
    }
    PlanInput input = base;
    std::optional<std::uint64_t> params;
    for (std::size_t d = 0; d < dimensions.size(); ++d) {
      const std::uint64_t value = dimensions[d].values[index[d]];
      const auto as_int = static_cast<std::int64_t>(value);
      switch (dimensions[d].key) {
        case SweepKey::kParams:
          params = value;
          break;
        case SweepKey::kNodes:
          input.hardware.nodes = as_int;
          break;
        case SweepKey::kGpusPerNode:
          input.hardware.node.gpus = as_int;
          break;
        case SweepKey::kMicroBatch:
          input.training.micro_batch = as_int;
          break;
        case SweepKey::kSeq:
          input.training.seq = as_int;
          break;
        case SweepKey::kTiling:
          input.training.tiling = as_int;
          break;
        case SweepKey::kCkptInterval:
          input.training.ckpt_interval = as_int;
          break;
      }
    }
    if (params) {
      const std::int64_t vocab = input.shape.vocab > 0 ? input.shape.vocab : kDefaultVocab;
      ZINF_ASSIGN_OR_RETURN(input.shape, shape_for_params(*params, vocab, input.training.seq, name_field));
      input.requested_params = *params;
      input.model_source = fmt::format("{} {}", name_field(field::kParams), format_count(static_cast<double>(*params)));
    } else if (input.shape.position == spec::PositionKind::kLearned && input.requested_params > 0) {
      input.shape.max_positions = input.training.seq;  // a rule-made shape follows the swept seq
    }
    ZINF_RETURN_IF_ERROR(spec::validate(input.shape));
    ZINF_RETURN_IF_ERROR(spec::validate(input.training));
    ZINF_RETURN_IF_ERROR(validate(input.hardware));
    ZINF_ASSIGN_OR_RETURN(const ComputeRate rate, plan_compute_rate(input));
    const ModelMemory memory = model_memory(input.shape, input.training);
    const PlacementChoice choice = choose_placement(memory, input);
    SweepPoint point;
    point.feasible = choice.feasible;
    point.placement = choice.placement;
    point.worst_fraction = choice.footprint.worst_fraction();
    if (choice.feasible) {
      point.prediction = predict(memory, input, rate, choice.step);
      ZINF_RETURN_IF_ERROR(check_finite(point.prediction));
      point.bottleneck = choice.step.bottleneck;
    }
    point.input = std::move(input);
    points.push_back(std::move(point));
  }
  return points;
}

}  // namespace zinf::planner
