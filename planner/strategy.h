// Strategy: which family of data-parallel training a plan uses — what is partitioned across ranks
// and which tiers each kind of state may live on. `auto` searches both families: everything
// partitioned with any state on GPU, CPU or NVMe (ZeRO-3 / ZeRO-Infinity), and parameters
// replicated with gradients and optimizer states partitioned anywhere (ZeRO-2 / ZeRO-Offload),
// because a model that fits replicated moves fewer bytes per step. The others pin one family and
// reproduce the systems the paper compares against, so `zinf plan --max-params` can show what
// each can hold on the same hardware.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libengine/spec/state_placement.h"

namespace zinf::planner {

enum class Strategy {
  kAuto,          // search: ZeRO-Infinity (all partitioned, any tier) and ZeRO-2/Offload families
  kDataParallel,  // plain data parallelism: every GPU holds every state
  kZero2,         // ZeRO-2: params replicated, grads and optimizer partitioned, all on GPU
  kZero3,         // ZeRO-3: all states partitioned, all on GPU
  kZeroOffload,   // ZeRO-Offload (ZeRO-2 + CPU): params replicated on GPU, grads and optimizer on CPU
  kInfinityCpu,   // ZeRO-Infinity, model states on CPU
  kInfinityNvme,  // ZeRO-Infinity, params and optimizer states on NVMe
  // The two families a DeepSpeed config selects by its stage (planner/deepspeed_plan.h), with the
  // placement pinned by the config. Not in kAllStrategies: no --strategy name selects them.
  kDeepSpeedStage12,  // ZeRO-1/2: params replicated on GPU; grads, optimizer, checkpoints on GPU or CPU
  kDeepSpeedStage3,   // ZeRO-3: everything partitioned, any tier
  // ZeRO-3 with the optimizer on NVMe: DeepSpeed's swapper keeps gradients in CPU memory or swaps
  // them with the optimizer states, a choice its config does not write down, so it is searched.
  kDeepSpeedStage3NvmeOptimizer,
};
inline constexpr std::array kAllStrategies{Strategy::kAuto,        Strategy::kDataParallel, Strategy::kZero2,
                                           Strategy::kZero3,       Strategy::kZeroOffload,  Strategy::kInfinityCpu,
                                           Strategy::kInfinityNvme};

std::string_view strategy_name(
    Strategy strategy);  // "auto", "dp", "zero2", "zero3", "zero-offload", "zinf-cpu", "zinf-nvme"
std::string_view strategy_title(Strategy strategy);  // "ZeRO-Infinity (auto placement)", "data parallel", ...
std::optional<Strategy> strategy_from_name(std::string_view name);

struct StrategyRules {
  bool params_partitioned = true;  // each rank holds 1/world of the parameters (ZeRO-3)
  bool states_partitioned = true;  // each rank holds 1/world of the gradients and optimizer states (ZeRO-2)
  std::array<std::vector<spec::Tier>, spec::kAllStateKinds.size()> allowed;  // indexed by StateKind

  const std::vector<spec::Tier>& allowed_tiers(spec::StateKind kind) const {
    return allowed[static_cast<std::size_t>(kind)];
  }
};

// The rules of one family. For kAuto: the fully partitioned any-tier family (a superset of what
// any pinned placement may ask for); candidate_rules() gives every family auto searches.
StrategyRules strategy_rules(Strategy strategy);
std::vector<StrategyRules> candidate_rules(Strategy strategy);

// What a chosen placement amounts to, in the names people know: "ZeRO-2 (...)", "ZeRO-Infinity (...)".
std::string describe_family(const StrategyRules& rules, const spec::StatePlacement& placement);

}  // namespace zinf::planner
