// Strategy: which family of data-parallel training a plan uses — what is partitioned across ranks
// and which tiers each kind of state may live on. `auto` is full ZeRO-Infinity: every state may go
// to GPU, CPU or NVMe and the planner picks. The others reproduce the systems the paper compares
// against, so `zinf plan --max-params` can show what each can hold on the same hardware.
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <vector>

#include "libengine/spec/state_placement.h"

namespace zinf::planner {

enum class Strategy {
  kAuto,          // ZeRO-Infinity: all states partitioned, any tier
  kDataParallel,  // plain data parallelism: every GPU holds every state
  kZero3,         // ZeRO-3: all states partitioned, all on GPU
  kZeroOffload,   // ZeRO-Offload (ZeRO-2 + CPU): params replicated on GPU, grads and optimizer on CPU
  kInfinityCpu,   // ZeRO-Infinity, model states on CPU
  kInfinityNvme,  // ZeRO-Infinity, params and optimizer states on NVMe
};
inline constexpr std::array kAllStrategies{Strategy::kAuto,        Strategy::kDataParallel, Strategy::kZero3,
                                           Strategy::kZeroOffload, Strategy::kInfinityCpu,  Strategy::kInfinityNvme};

std::string_view strategy_name(Strategy strategy);   // "auto", "dp", "zero3", "zero-offload", "zinf-cpu", "zinf-nvme"
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

StrategyRules strategy_rules(Strategy strategy);

}  // namespace zinf::planner
