// StatePlacement: which memory tier holds each kind of training state. The planner chooses one;
// the engine's ZeRO layer obeys it. Pure vocabulary, no policy.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace zinf::spec {

enum class Tier { kDevice, kCpu, kNvme };  // fastest first
inline constexpr std::array kAllTiers{Tier::kDevice, Tier::kCpu, Tier::kNvme};

enum class StateKind {
  kParams,       // compute-precision parameters
  kGrads,        // compute-precision gradients
  kOptimizer,    // fp32 master params, fp32 grads, Adam m and v
  kActivations,  // activation checkpoints
};
inline constexpr std::array kAllStateKinds{StateKind::kParams, StateKind::kGrads, StateKind::kOptimizer,
                                           StateKind::kActivations};

std::string_view tier_name(Tier tier);                      // "gpu", "cpu", "nvme"
std::optional<Tier> tier_from_name(std::string_view name);  // also accepts "device"
std::string_view state_kind_name(StateKind kind);           // "params", "grads", "optimizer", "activations"
std::string_view state_kind_title(
    StateKind kind);  // "parameters", "gradients", "optimizer states", "activation checkpoints"

struct StatePlacement {
  std::array<Tier, kAllStateKinds.size()> tiers{Tier::kDevice, Tier::kDevice, Tier::kDevice, Tier::kDevice};

  Tier operator[](StateKind kind) const { return tiers[static_cast<std::size_t>(kind)]; }
  Tier& operator[](StateKind kind) { return tiers[static_cast<std::size_t>(kind)]; }
  bool operator==(const StatePlacement&) const = default;
};

}  // namespace zinf::spec
