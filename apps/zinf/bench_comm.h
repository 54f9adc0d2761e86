// `zinf bench comm`: all_gather, reduce_scatter and all_reduce bus bandwidth over message sizes
// through zinf's MPI Communicator, next to plain blocking MPI calls on the same buffers in the same
// run (comm_bench_runner.h), as an nccl-tests-style table with the ratio busbw(zinf)/busbw(MPI) and
// its spread. Runs on every rank of `mpirun -np N zinf bench comm`, or starts mpirun itself with
// --ranks N (rank_spawner.h); rank 0 prints and writes the zinf.bench-comm/1 record.
#pragma once

#include <memory>

#include <CLI/CLI.hpp>

#include "apps/zinf/subcommand.h"

namespace zinf::cli {

// Adds `comm` under `bench` and returns the object that owns its options and runs it.
std::unique_ptr<Subcommand> add_bench_comm_command(CLI::App& bench);

}  // namespace zinf::cli
