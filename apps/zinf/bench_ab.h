// `zinf bench ab --base BIN_A --new BIN_B SCENARIO`: the regression gate that the machine's load
// cannot fool. Two records taken minutes apart on a shared machine differ by whatever the load did in
// between; here the two zinf binaries train the same scenario in turns, in one run, on the same
// machine, in the order A B B A A B B A ... (each pair's order alternates, so a drift that is linear
// in time — a load ramping up, a CPU heating — lands equally on both sides instead of always on the
// second run of a pair, as A B A B would have it). Each run is `BIN train SCENARIO --format json
// --out TMP` and is condensed into one sample per metric: the median step time of its measured
// (non-warm-up) steps, its tokens/s and its final loss. The two sides' samples are judged by
// `zinf compare`'s statistics (reports/compare.h: change of the median and a two-sided
// Mann-Whitney U test per metric) — an unpaired test; compare has no paired one (Wilcoxon
// signed-rank), so the pairing serves the interleaving, not the test.
//
// Exit codes as compare's: 0 no regression, 3 a regression, 2 bad input (a binary missing or not
// executable or not zinf, a scenario either binary refuses), 1 a runtime failure (a run that crashed
// or failed midway). The temporary directory of the runs is removed on every path.
#pragma once

#include <memory>

#include <CLI/CLI.hpp>

#include "apps/zinf/subcommand.h"

namespace zinf::cli {

// Adds `ab` under `bench`; *app receives the CLI11 subcommand (to see whether it was parsed).
std::unique_ptr<Subcommand> add_bench_ab_command(CLI::App& bench, CLI::App** app);

}  // namespace zinf::cli
