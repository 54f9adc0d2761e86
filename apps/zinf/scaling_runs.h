// The measuring half of `zinf bench scaling`: runs a scenario's training at one world size through
// the rank spawner (`mpirun -np N zinf train <scenario> --out <record>`, every world size the same
// way, 1 included), reads the train record back, and condenses it into one row of the scaling
// record — tokens/s, step time (median, min, max over the measured steps), communication time and
// how much of it was hidden (rank 0's engine figures), every rank's step median — with the
// planner's prediction for that world size next to it. Strong scaling keeps the scenario's global
// batch (batch/rank = batch / N); weak scaling keeps the batch per rank (global = batch x N).
// What it is not: the table or the record's envelope (bench_scaling.cpp), nor a launcher.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/zinf/subcommand.h"
#include "libengine/core/status.h"
#include "libengine/spec/scenario.h"
#include "planner/hardware_profile.h"

namespace zinf::cli {

struct ScalingPoint {
  int ranks = 1;
  std::int64_t global_batch = 0;  // rows per step over all ranks
};

struct ScalingRunOptions {
  std::filesystem::path work_dir;     // the per-world-size scenarios and records go here
  std::optional<std::int64_t> steps;  // overrides the scenario's
  std::int64_t comm_timeout_s = 300;
};

// Trains `scenario_document` (the scenario file's JSON; its batch replaced by point.global_batch,
// its checkpoint and output sections dropped so runs neither resume nor overwrite each other) at
// point.ranks ranks and returns the run's train record. Fails (Internal, naming the world size)
// when the run exits non-zero: the ranks' own error lines are on stderr above it.
Result<nlohmann::json> run_training_at(const nlohmann::json& scenario_document, const ScalingPoint& point,
                                       const ScalingRunOptions& options, const Io& io);

// The scaling record's row for one world size, from its train record.
nlohmann::json scaling_row(const ScalingPoint& point, const nlohmann::json& train_record);

// The planner's step time and tokens/s for `scenario` at point.ranks devices of `hardware` (one
// node), with the scenario's ZeRO stage and placement pinned (planner/deepspeed_plan.h's families):
// {"step_ms", "tokens_per_s", "family", "bottleneck"}, or {"infeasible": why} when the plan does
// not fit or the planner refuses the input.
nlohmann::json planned_row(const spec::Scenario& scenario, const ScalingPoint& point,
                           const planner::HardwareProfile& hardware);

}  // namespace zinf::cli
