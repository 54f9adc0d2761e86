// `zinf bench scaling scenario.json --ranks 1,2,4 [--weak]`: trains the scenario at each world size
// (scaling_runs.h: through the rank spawner, the same way for every size) and reports, per world
// size, tokens/s, step time (median and spread over the measured steps), communication time and
// how much of it was hidden, speed-up and efficiency against the smallest world size, and the
// planner's predicted step time next to the measured one. Strong scaling (default) keeps the
// global batch; --weak keeps the batch per rank. Writes a zinf.bench-scaling/1 record; the table,
// Markdown, CSV and HTML are rendered from it (reports/scaling_report.cpp), as `zinf report` does.
#pragma once

#include <memory>

#include <CLI/CLI.hpp>

#include "apps/zinf/subcommand.h"

namespace zinf::cli {

// Adds `scaling` under `bench` and returns the object that owns its options and runs it.
std::unique_ptr<Subcommand> add_bench_scaling_command(CLI::App& bench);

}  // namespace zinf::cli
