// `zinf bench train --zero0`'s output: the offload bench's result (probes/offload_bench.h) as a
// record, a document and a CSV of its targets. Rendering only: it measures nothing and runs nothing.
#pragma once

#include <cstdint>
#include <string>

#include "apps/zinf/output.h"
#include "libengine/spec/scenario.h"
#include "probes/offload_bench.h"
#include "reports/run_conditions.h"

namespace zinf::cli {

// How the bench was run, as the user asked for it (the record and the Setup section say it back).
struct OffloadBenchRun {
  std::string scenario_path;
  std::int64_t steps = 0;
  std::int64_t warmup = 0;
  std::int64_t repeat = 0;
};

// The record (zinf.bench-train/1 with engine, zero0, engine_overlap_off, the swap store's and the
// drive's mixed rates and the targets), the step-time, wait/CPU and targets tables, and the CSV.
// `started` is the command's start snapshot (the record's conditions). Pure: no I/O.
Rendered render_offload_bench(const spec::Scenario& scenario, const OffloadBenchRun& run,
                              const probes::OffloadBenchResult& result, const reports::ConditionsSnapshot& started);

}  // namespace zinf::cli
