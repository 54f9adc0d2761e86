// The "plan" section of a `zinf train` record: the run plans itself for the hardware it runs on
// (planner/engine_model.h) and puts the prediction next to what it measured — step time, per-phase
// time (forward, backward, optimizer), peak memory per tier and bytes per link — with the error in
// percent, (predicted - measured) / measured. The hardware figures are measured in the same run
// with short probes (the matmul peak the record's MFU uses, one memory-bandwidth sample, a 64 MiB
// write and read on the scenario's nvme_paths when a state lives on NVMe) or read from a profile
// (`zinf train --hw mine.json`).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/core/status.h"
#include "libengine/spec/scenario.h"
#include "planner/engine_model.h"
#include "reports/document.h"

namespace zinf::cli {

struct RunHardware {
  planner::EngineHardware figures;
  nlohmann::json source;  // {"from": "measured in this run" | "profile <path>", per-figure notes}
  bool from_profile = false;
  // The model-shape matmul figure (measured runs on the host; 0 otherwise): compute_flops is the
  // lower of it and the run's best matmul peak (use_compute_peak).
  double model_shape_flops = 0;
  // One line per probe that could not run ("NVMe bandwidth unmeasured: ..."); its figures are 0.
  std::vector<std::string> unmeasured;
};

// `profile`: empty to measure (a second or two; NVMe only when the scenario puts a state there),
// otherwise a profile name or file whose figures are used (errors name --hw). `measured_flops`:
// the run's own matmul peak, used when measuring. Run before step 1: a probe that cannot run (the
// NVMe one with no room for its 128 MiB beside the run's swap files, or an unusable path) is
// listed in `unmeasured` with its reason, never an error.
Result<RunHardware> run_hardware(const spec::Scenario& scenario, const std::string& profile, double measured_flops,
                                 bool compute_on_host);

// A later, better matmul peak of the run (the probe after the steps) as the plan's compute figure,
// still capped by the model-shape figure; nothing for a profile's figures.
void use_compute_peak(RunHardware& hardware, double peak_flops);

// The record's "plan" object from the prediction and the record's measured figures (summary,
// memory, engine.links). Errors are null where the measured figure is 0. With a probe unmeasured
// the time rows' predictions are null (the model would leave that traffic's time out) and
// "unmeasured" lists why; the byte rows stand.
nlohmann::json plan_vs_measured(const planner::EnginePrediction& prediction, const RunHardware& hardware,
                                const nlohmann::json& record);

// The machine's load when the plan was made: {"load_average_1min", "cores"} from /proc/loadavg and
// the cores this process may run on; null where /proc/loadavg cannot be read. The probes take the
// machine's best moment, the steps what other jobs left: on a shared machine the plan reads fast.
nlohmann::json machine_load();
// A note for the plan when `load` (machine_load()) says other jobs competed for the cores (the
// 1-min load average above the cores); empty otherwise. It speaks of probes only where `hardware`
// was measured (a profile's plan ran none). `plan` (plan_vs_measured()'s object): the step row's
// error decides what the note says the load did, so the words agree with the number beside them
// (a plan that predicted a slower step than measured does not "read fast").
std::string shared_machine_note(const nlohmann::json& load, const RunHardware& hardware, const nlohmann::json& plan);

// The summary's "Plan vs measured" table.
reports::Section render_plan_section(const nlohmann::json& plan);

}  // namespace zinf::cli
