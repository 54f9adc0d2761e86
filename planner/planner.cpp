#include "planner/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "libengine/core/units.h"

namespace zinf::planner {

using spec::StateKind;
using spec::StatePlacement;
using spec::Tier;

namespace {

// Bytes on slower tiers, weighted: the tie-breaker between placements with the same step time.
double slowness(const Footprint& footprint) { return footprint.cpu.used_bytes + 4.0 * footprint.nvme.used_bytes; }

std::vector<Tier> tiers_to_try(const PlanInput& input, const StrategyRules& rules, StateKind kind) {
  const auto& pinned = input.pinned[static_cast<std::size_t>(kind)];
  if (pinned) {
    // A pin this family cannot honour rules the family out (empty list).
    const auto& allowed = rules.allowed_tiers(kind);
    if (std::find(allowed.begin(), allowed.end(), *pinned) == allowed.end()) return {};
    return {*pinned};
  }
  // A node without NVMe has capacity 0 there, so NVMe placements simply do not fit.
  return rules.allowed_tiers(kind);
}

}  // namespace

Result<ComputeRate> plan_compute_rate(const PlanInput& input) {
  if (input.fp32_matmul_tf32 && input.training.precision != DType::kF32) {
    return Status::invalid_argument(
        fmt::format("precision: tf32 applies to fp32 training, not {}", dtype_name(input.training.precision)));
  }
  return gpu_compute_rate(input.hardware, math_mode_for(input.training.precision, input.fp32_matmul_tf32));
}

PlacementChoice choose_placement(const ModelMemory& memory, const PlanInput& input) {
  PlacementChoice best;
  const Result<ComputeRate> rate = plan_compute_rate(input);
  if (!rate.is_ok()) return best;  // a precondition: callers report the error first
  PlacementChoice closest;         // when nothing fits: the placement that overflows least
  double closest_overflow = std::numeric_limits<double>::infinity();
  bool any = false;
  for (const StrategyRules& rules : candidate_rules(input.strategy)) {
    std::array<std::vector<Tier>, spec::kAllStateKinds.size()> options;
    for (StateKind kind : spec::kAllStateKinds)
      options[static_cast<std::size_t>(kind)] = tiers_to_try(input, rules, kind);
    if (std::any_of(options.begin(), options.end(), [](const auto& o) { return o.empty(); })) continue;
    StatePlacement placement;
    // Odometer over the per-kind options.
    std::array<std::size_t, spec::kAllStateKinds.size()> digit{};
    const auto advance = [&]() {
      for (std::size_t i = 0; i < digit.size(); ++i) {
        if (++digit[i] < options[i].size()) return true;
        digit[i] = 0;
      }
      return false;
    };
    do {
      for (std::size_t i = 0; i < digit.size(); ++i) placement.tiers[i] = options[i][digit[i]];
      Footprint fp = footprint(memory, rules, placement, input.hardware);
      if (!fp.fits()) {
        const double overflow = fp.worst_fraction();
        if (!any && overflow < closest_overflow) {
          closest_overflow = overflow;
          closest.rules = rules;
          closest.placement = placement;
          closest.footprint = std::move(fp);
        }
        continue;
      }
      StepModel step = model_step(memory, rules, placement, input.hardware, *rate, input.target_efficiency,
                                  input.schedule, norm_before_step(input.training));
      const double seconds = step.scheduled.step_seconds;
      const bool faster = seconds < best.step.scheduled.step_seconds * (1.0 - 1e-9);
      const bool tie = !faster && seconds <= best.step.scheduled.step_seconds * (1.0 + 1e-9);
      if (!any || faster || (tie && slowness(fp) < slowness(best.footprint))) {
        best = {true, rules, placement, std::move(fp), step};
        any = true;
      }
    } while (advance());
  }
  return any ? best : closest;
}

bool norm_before_step(const spec::TrainingSpec& training) {
  return training.norm_before_step || training.precision == DType::kF16;
}

Prediction predict(const ModelMemory& memory, const PlanInput& input, const ComputeRate& rate, const StepModel& step) {
  Prediction prediction;
  const double tokens_per_gpu = static_cast<double>(input.training.micro_batch * input.training.seq);
  prediction.step_seconds = step.scheduled.step_seconds;
  prediction.step_seconds_full_overlap = step.step_seconds;
  prediction.step_seconds_other_schedule =
      step.schedule(input.schedule == Schedule::kZinf ? Schedule::kDeepSpeed : Schedule::kZinf).step_seconds;
  prediction.step_seconds_no_overlap = step.step_seconds_no_overlap;
  prediction.compute_seconds = step.compute_seconds;
  const double seconds = prediction.step_seconds;
  prediction.tokens_per_second = tokens_per_gpu * static_cast<double>(input.hardware.total_gpus()) / seconds;
  prediction.achieved_flops_per_gpu = memory.flops_per_gpu_per_step / seconds;
  prediction.mfu = 6.0 * tokens_per_gpu * static_cast<double>(memory.params) / seconds / rate.peak_flops;
  prediction.efficiency = step.compute_seconds / seconds;
  return prediction;
}

Status check_finite(const Prediction& p) {
  for (const double value :
       {p.step_seconds, p.step_seconds_full_overlap, p.step_seconds_no_overlap, p.step_seconds_other_schedule,
        p.compute_seconds, p.tokens_per_second, p.achieved_flops_per_gpu, p.mfu, p.efficiency}) {
    if (!std::isfinite(value)) {
      return Status::internal(fmt::format(
          "planner: a predicted figure is not finite (step {:g} s, compute {:g} s, {:g} tokens/s); the inputs passed "
          "validation, so this is a bug in zinf; please report the command line",
          p.step_seconds, p.compute_seconds, p.tokens_per_second));
    }
  }
  return Status::ok();
}

namespace {

std::string explain_bottleneck(const Plan& plan) {
  const StepModel& step = plan.step;
  const double ratio = step.scheduled.step_seconds / step.compute_seconds;
  if (step.bottleneck == Resource::kCompute) {
    // Name the busiest link too, so users see the headroom.
    Resource next = Resource::kCompute;
    for (Resource r : kAllResources) {
      if (r != Resource::kCompute && (next == Resource::kCompute || step.load(r).seconds > step.load(next).seconds))
        next = r;
    }
    if (step.load(next).seconds <= 0) return "compute-bound: nothing is moved off the GPU, so the step is pure compute";
    return fmt::format(
        "compute-bound: the busiest link ({}) needs {} per step, {:.0f}% of the compute time, "
        "and hides behind compute when prefetching overlaps it",
        resource_title(next), format_duration(step.load(next).seconds),
        100.0 * step.load(next).seconds / step.compute_seconds);
  }
  // Which group loads the bottleneck resource most?
  const ResourceLoad& load = step.load(step.bottleneck);
  const std::string per = resource_is_per_node(step.bottleneck) ? "per node" : "per GPU";
  return fmt::format(
      "{}-bound: it must move {} {} per step, {} at its bandwidth, {:.1f}x the {} of compute; "
      "the GPUs wait {:.0f}% of the step",
      resource_title(step.bottleneck), format_bytes(load.bytes), per, format_duration(load.seconds), ratio,
      format_duration(step.compute_seconds), 100.0 * (1.0 - 1.0 / ratio));
}

std::string explain_infeasible(const Plan& plan) {
  const Footprint& fp = plan.footprint;
  std::vector<std::string> overflows;
  for (Tier tier : spec::kAllTiers) {
    const TierUsage& usage = fp.tier(tier);
    if (usage.fits()) continue;
    overflows.push_back(fmt::format("{} needs {} {} but has {}", spec::tier_name(tier), format_bytes(usage.used_bytes),
                                    tier == Tier::kDevice ? "per GPU" : "per node",
                                    format_bytes(usage.capacity_bytes)));
  }
  std::string joined;
  for (const std::string& o : overflows) joined += (joined.empty() ? "" : "; ") + o;
  // GPU working memory can't be offloaded: say so when it alone is too much.
  const double working = plan.memory.activation_working_bytes_per_gpu +
                         (plan.rules.params_partitioned ? plan.memory.model_state_working_bytes_per_gpu : 0.0);
  if (working > fp.device.capacity_bytes) {
    return fmt::format(
        "does not fit: GPU working memory alone ({}: the largest operator's parameters and gradients "
        "plus the activations being recomputed) exceeds the {} of one GPU",
        format_bytes(working), format_bytes(fp.device.capacity_bytes));
  }
  return fmt::format("does not fit in any placement {} allows; closest: {}", strategy_title(plan.input.strategy),
                     joined);
}

bool fits(const PlanInput& input) {
  if (!spec::validate(input.training).is_ok() || !plan_compute_rate(input).is_ok()) return false;
  const ModelMemory memory = model_memory(input.shape, input.training);
  return choose_placement(memory, input).feasible;
}

// Smallest integer in [low, high] for which `ok` holds, assuming monotonicity; nullopt if none.
template <typename Predicate>
std::optional<std::int64_t> smallest_that_works(std::int64_t low, std::int64_t high, Predicate ok) {
  if (low > high || !ok(high)) return std::nullopt;
  while (low < high) {
    const std::int64_t mid = low + (high - low) / 2;
    if (ok(mid)) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  return low;
}

std::optional<std::int64_t> nodes_that_fit(const PlanInput& base) {
  return smallest_that_works(base.hardware.nodes + 1, kMaxNodes, [&](std::int64_t n) {
    PlanInput changed = base;
    changed.hardware.nodes = n;
    return fits(changed);
  });
}

std::vector<Suggestion> suggest(const Plan& plan) {
  const PlanInput& base = plan.input;
  std::vector<Suggestion> out;

  if (auto nodes = nodes_that_fit(base)) {
    out.push_back({{{field::kNodes, std::to_string(*nodes)}},
                   fmt::format("{} nodes ({} GPUs) spread the partitioned states thin enough", *nodes,
                               *nodes * base.hardware.node.gpus)});
  }
  const std::int64_t max_tiling = std::max<std::int64_t>(base.shape.hidden, 1);
  if (auto tiling = smallest_that_works(base.training.tiling + 1, max_tiling, [&](std::int64_t t) {
        PlanInput changed = base;
        changed.training.tiling = t;
        return fits(changed);
      })) {
    out.push_back({{{field::kTiling, std::to_string(*tiling)}},
                   "memory-centric tiling splits the largest operator so less of it is on the GPU at once"});
  }
  if (base.training.micro_batch > 1) {
    // Largest micro-batch below the current one that fits.
    for (std::int64_t b = base.training.micro_batch - 1; b >= 1; b = (b > 8 ? b * 3 / 4 : b - 1)) {
      PlanInput changed = base;
      changed.training.micro_batch = b;
      if (fits(changed)) {
        out.push_back({{{field::kMicroBatch, std::to_string(b)}}, "fewer samples per GPU need less activation memory"});
        break;
      }
    }
  }
  for (std::int64_t ci : {std::int64_t{1}, std::int64_t{2}, std::int64_t{4}, std::int64_t{8}}) {
    if (!base.training.activation_checkpointing) break;  // no checkpoints: the interval means nothing
    if (ci == base.training.ckpt_interval || ci > base.shape.layers) continue;
    PlanInput changed = base;
    changed.training.ckpt_interval = ci;
    if (fits(changed)) {
      out.push_back({{{field::kCkptInterval, std::to_string(ci)}},
                     ci < base.training.ckpt_interval
                         ? "checkpointing more often shrinks the activations recomputed at once"
                         : "checkpointing less often shrinks the stored checkpoints"});
      break;
    }
  }
  // More capacity on a host tier: how much would be needed, rounded up to a whole TB.
  const auto capacity_suggestion = [&](Tier tier, std::string_view changed_field) {
    PlanInput changed = base;
    constexpr double kHuge = 1e18;
    if (tier == Tier::kNvme) changed.hardware.node.nvme_capacity_bytes = static_cast<std::uint64_t>(kHuge);
    if (tier == Tier::kCpu) changed.hardware.node.cpu_memory_bytes = static_cast<std::uint64_t>(kHuge);
    const ModelMemory memory = model_memory(changed.shape, changed.training);
    const PlacementChoice choice = choose_placement(memory, changed);
    if (!choice.feasible) return;
    const double needed = choice.footprint.tier(tier).used_bytes;
    const double terabytes = std::ceil(needed / 1e12);
    out.push_back({{{changed_field, fmt::format("{:.0f}TB", terabytes)}},
                   fmt::format("{} of {} per node would hold what does not fit elsewhere", format_bytes(needed),
                               spec::tier_name(tier))});
  };
  const StrategyRules widest = strategy_rules(base.strategy);
  const auto allows = [&](Tier tier) {
    for (StateKind kind : spec::kAllStateKinds) {
      const auto& pinned = base.pinned[static_cast<std::size_t>(kind)];
      const auto& allowed = widest.allowed_tiers(kind);
      if ((pinned && *pinned == tier) ||
          (!pinned && std::find(allowed.begin(), allowed.end(), tier) != allowed.end())) {
        return true;
      }
    }
    return false;
  };
  if (allows(Tier::kNvme)) capacity_suggestion(Tier::kNvme, field::kNvmeCapacity);
  if (allows(Tier::kCpu)) capacity_suggestion(Tier::kCpu, field::kCpuMemory);
  if (!out.empty()) return out;

  // No single change is enough: usually the largest operator overflows one GPU *and* the states
  // overflow the cluster. Tile first (the smallest power of two that lets the cluster size fit),
  // then add nodes.
  for (std::int64_t tiling = base.training.tiling * 2; tiling <= base.shape.hidden; tiling *= 2) {
    PlanInput tiled = base;
    tiled.training.tiling = tiling;
    if (auto nodes = nodes_that_fit(tiled)) {
      out.push_back({{{field::kTiling, std::to_string(tiling)}, {field::kNodes, std::to_string(*nodes)}},
                     fmt::format("tiling the largest operator {} ways brings the GPU working memory under one GPU's "
                                 "capacity, and {} nodes ({} GPUs) hold the partitioned states",
                                 tiling, *nodes, *nodes * base.hardware.node.gpus)});
      break;
    }
  }
  return out;
}

std::vector<std::string> notes_for(const Plan& plan) {
  std::vector<std::string> notes;
  if (plan.input.requested_params > 0) {
    const double requested = static_cast<double>(plan.input.requested_params);
    const double actual = static_cast<double>(plan.parameters.total);
    if (std::fabs(actual - requested) / requested > 0.005) {
      notes.push_back(fmt::format("the shape rule's nearest GPT-like shape has {} parameters ({:+.1f}% from {})",
                                  format_count(actual), 100.0 * (actual / requested - 1.0), format_count(requested)));
    }
  }
  if (plan.feasible && plan.placement[StateKind::kOptimizer] == Tier::kNvme) {
    notes.push_back(
        "optimizer states on NVMe are read and written every step (32 bytes per parameter in the paper's "
        "accounting); the step time depends on the drives sustaining their rated bandwidth under mixed "
        "read/write load, so measure them with `zinf bench io`");
  }
  if (plan.feasible && plan.prediction.efficiency < 0.5) {
    notes.push_back(
        "under 50% efficiency: a larger micro-batch raises the arithmetic intensity of every transfer "
        "(seq x micro-batch FLOPs per byte for parameters and gradients)");
  }
  return notes;
}

}  // namespace

Result<Plan> make_plan(const PlanInput& input, const FieldNamer& name_field) {
  ZINF_RETURN_IF_ERROR(spec::validate(input.shape));
  ZINF_RETURN_IF_ERROR(spec::validate(input.training));
  ZINF_RETURN_IF_ERROR(validate(input.hardware));
  if (!(input.target_efficiency > 0.0 && input.target_efficiency < 1.0)) {
    return Status::invalid_argument(fmt::format("{}: {} is not between 0 and 1 (exclusive)",
                                                name_field(field::kTargetEfficiency), input.target_efficiency));
  }
  const StrategyRules rules = strategy_rules(input.strategy);
  for (StateKind kind : spec::kAllStateKinds) {
    const auto& pinned = input.pinned[static_cast<std::size_t>(kind)];
    if (!pinned) continue;
    const auto& allowed = rules.allowed_tiers(kind);
    if (std::find(allowed.begin(), allowed.end(), *pinned) == allowed.end()) {
      return Status::invalid_argument(fmt::format("{}: {}={} is not allowed by {} {}", name_field(field::kPlacement),
                                                  spec::state_kind_name(kind), spec::tier_name(*pinned),
                                                  name_field(field::kStrategy), strategy_name(input.strategy)));
    }
    if (*pinned == Tier::kNvme && input.hardware.node.nvme_capacity_bytes == 0) {
      return Status::invalid_argument(fmt::format("{}: {}=nvme but the hardware has no NVMe (capacity 0); set {}",
                                                  name_field(field::kPlacement), spec::state_kind_name(kind),
                                                  name_field(field::kNvmeCapacity)));
    }
  }

  Plan plan;
  plan.input = input;
  ZINF_ASSIGN_OR_RETURN(plan.rate, plan_compute_rate(input));
  plan.parameters = spec::count_parameters(input.shape);
  plan.memory = model_memory(input.shape, input.training);
  PlacementChoice choice = choose_placement(plan.memory, input);
  plan.rules = choice.rules;  // make_plan checked the pins, so at least one family was searched
  plan.family = describe_family(plan.rules, choice.placement);
  plan.feasible = choice.feasible;
  plan.placement = choice.placement;
  plan.footprint = std::move(choice.footprint);
  if (plan.feasible) {
    plan.step = choice.step;
    plan.prediction = predict(plan.memory, input, plan.rate, plan.step);
    ZINF_RETURN_IF_ERROR(check_finite(plan.prediction));
    plan.bottleneck = explain_bottleneck(plan);
  } else {
    plan.bottleneck = explain_infeasible(plan);
    plan.suggestions = suggest(plan);
  }
  plan.notes = notes_for(plan);
  return plan;
}

}  // namespace zinf::planner
