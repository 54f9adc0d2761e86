// The "engine" part of the `zinf train` run record: where each kind of model state lived, the
// budgets, bytes moved and achieved GB/s per link (NVMe read and write, host→device,
// device→host) split by phase, the compute thread's stall time and the prefetch hit rate — from
// the per-step EngineStats the trainer measured, where the activation checkpoints lived and what
// their copies moved — and the summary section rendered from it.
// Field reference: docs/records/train-record.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/train/step_metrics.h"
#include "reports/document.h"

namespace zinf::cli {

struct EngineRun {
  nlohmann::json zero;      // spec::to_json(ZeroConfig) resolved by the engine (derived budgets filled in)
  std::string description;  // ModelStates::describe()
  // Activation checkpoints (model::CheckpointStore): how many there are, how many live in host
  // memory (0: all on the device), the device slots they use and the bytes of one.
  std::int64_t checkpoints = 0;
  std::int64_t host_checkpoints = 0;
  std::int64_t checkpoint_device_slots = 0;
  std::uint64_t checkpoint_bytes = 0;
  // {"auto": bool, "per_operator": spec::to_json(OperatorTiling), "choice": describe_choice(...)}
  nlohmann::json tiling;
};

// `steps` are the run's steps; the first `warmup` are excluded from rates and medians (the first
// step records the prefetch order, so its stalls are not the engine's steady state).
nlohmann::json make_engine_record(const EngineRun& run, const std::vector<train::StepMetrics>& steps,
                                  std::int64_t warmup);
// Per-step engine fields for the record's "steps" entries.
nlohmann::json engine_step_json(const train::StepMetrics& step);
// The "Engine" section of the human summary.
reports::Section render_engine_section(const nlohmann::json& engine);

}  // namespace zinf::cli
