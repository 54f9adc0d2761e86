// The names the planner gives its inputs in errors and suggestions ("nodes", "placement",
// "training.tiling"), and the hook through which a caller shows them in its own vocabulary: the
// CLI maps each to its flag (apps/zinf/plan_flags.h), a library user may keep them as they are.
// This is not a parser and holds no state.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace zinf::planner {

// Every field name the planner writes. Suggestions change one of the first six.
namespace field {
inline constexpr std::string_view kNodes = "nodes";                          // hardware.nodes
inline constexpr std::string_view kTiling = "training.tiling";               // training.tiling
inline constexpr std::string_view kMicroBatch = "training.micro_batch";      // training.micro_batch
inline constexpr std::string_view kCkptInterval = "training.ckpt_interval";  // training.ckpt_interval
inline constexpr std::string_view kNvmeCapacity = "hardware.nvme";           // hardware.node.nvme_capacity_bytes
inline constexpr std::string_view kCpuMemory = "hardware.cpu_memory";        // hardware.node.cpu_memory_bytes
inline constexpr std::string_view kParams = "params";                        // the parameter count of the shape rule
inline constexpr std::string_view kShape = "layers/hidden/heads";            // a shape given explicitly
inline constexpr std::string_view kPlacement = "placement";                  // PlanInput::pinned
inline constexpr std::string_view kStrategy = "strategy";                    // PlanInput::strategy
inline constexpr std::string_view kTargetEfficiency = "target_efficiency";   // PlanInput::target_efficiency
inline constexpr std::string_view kSweep = "sweep";                          // run_sweep's dimensions
}  // namespace field

// How a caller names a planner field in messages. Must return a non-empty name for every
// field:: constant; called only while composing an error or a suggestion.
using FieldNamer = std::function<std::string(std::string_view field)>;

// The planner's own names, unchanged.
inline std::string own_field_name(std::string_view field) { return std::string(field); }

}  // namespace zinf::planner
