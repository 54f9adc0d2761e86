#include "libengine/spec/state_placement.h"

namespace zinf::spec {

std::string_view tier_name(Tier tier) {
  switch (tier) {
    case Tier::kDevice:
      return "gpu";
    case Tier::kCpu:
      return "cpu";
    case Tier::kNvme:
      return "nvme";
  }
  return "?";
}

std::optional<Tier> tier_from_name(std::string_view name) {
  if (name == "gpu" || name == "device") return Tier::kDevice;
  if (name == "cpu") return Tier::kCpu;
  if (name == "nvme") return Tier::kNvme;
  return std::nullopt;
}

std::string_view state_kind_name(StateKind kind) {
  switch (kind) {
    case StateKind::kParams:
      return "params";
    case StateKind::kGrads:
      return "grads";
    case StateKind::kOptimizer:
      return "optimizer";
    case StateKind::kActivations:
      return "activations";
  }
  return "?";
}

std::string_view state_kind_title(StateKind kind) {
  switch (kind) {
    case StateKind::kParams:
      return "parameters";
    case StateKind::kGrads:
      return "gradients";
    case StateKind::kOptimizer:
      return "optimizer states";
    case StateKind::kActivations:
      return "activation checkpoints";
  }
  return "?";
}

}  // namespace zinf::spec
