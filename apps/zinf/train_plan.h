// The "plan" section of a `zinf train` record: the run plans itself for the hardware it runs on
// (planner/engine_model.h) and puts the prediction next to what it measured — step time, per-phase
// time (forward, backward, optimizer), peak memory per tier and bytes per link — with the error in
// percent, (predicted - measured) / measured. The hardware figures are measured in the same run
// with short probes (the matmul peak the record's MFU uses, one memory-bandwidth sample, a 64 MiB
// write and read on the scenario's nvme_paths when a state lives on NVMe) or read from a profile
// (`zinf train --hw mine.json`).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "libengine/core/status.h"
#include "libengine/spec/scenario.h"
#include "planner/engine_model.h"
#include "reports/document.h"

namespace zinf::cli {

struct RunHardware {
  planner::EngineHardware figures;
  nlohmann::json source;  // {"from": "measured in this run" | "profile <path>", per-figure notes}
};

// `profile`: empty to measure (a second or two; NVMe only when the scenario puts a state there),
// otherwise a profile name or file whose figures are used (errors name --hw). `measured_flops`:
// the run's own matmul peak, used when measuring.
Result<RunHardware> run_hardware(const spec::Scenario& scenario, const std::string& profile, double measured_flops,
                                 bool compute_on_host);

// The record's "plan" object from the prediction and the record's measured figures (summary,
// memory, engine.links). Errors are null where the measured figure is 0.
nlohmann::json plan_vs_measured(const planner::EnginePrediction& prediction, const RunHardware& hardware,
                                const nlohmann::json& record);

// The machine's load when the plan was made: {"load_average_1min", "cores"} from /proc/loadavg and
// the cores this process may run on; null where /proc/loadavg cannot be read. The probes take the
// machine's best moment, the steps what other jobs left: on a shared machine the plan reads fast.
nlohmann::json machine_load();
// A note for the plan when `load` (machine_load()) says other jobs competed for the cores (the
// 1-min load average above the cores); empty otherwise.
std::string shared_machine_note(const nlohmann::json& load);

// The summary's "Plan vs measured" table.
reports::Section render_plan_section(const nlohmann::json& plan);

}  // namespace zinf::cli
