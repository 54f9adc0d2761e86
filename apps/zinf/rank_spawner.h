// The rank spawner behind `--ranks N`: re-runs this zinf under Open MPI's mpirun on this machine
// (`mpirun -q --oversubscribe -np N <this executable> <the same arguments without --ranks>`),
// with stdout and stderr passed through, and returns mpirun's exit status — so `zinf bench comm
// --ranks 4` and `zinf train --ranks 4 scenario.json` are `mpirun -np 4 zinf ...` without typing it.
// -q keeps mpirun's own multi-line banners out: when a rank fails, the ranks' one-line errors are
// what the user reads (libengine/comm/mpi_runtime.h). As root (CI containers) it sets
// OMPI_ALLOW_RUN_AS_ROOT and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM, which mpirun otherwise refuses.
// Each rank is bound to its share of this process's cores (`--map-by slot:PE=<cores/N> --bind-to
// core`), or to none when there are more ranks than cores: Open MPI's default binds a lone rank to
// one core.
// Stopping: while the job runs, SIGINT and SIGTERM to this process are forwarded to mpirun (which
// stops its ranks with SIGTERM) and this process waits for the job to end, at most kStopGraceSeconds;
// what is still running then — mpirun and every process it started — is killed (SIGKILL). Nothing
// of the job outlives this process's return.
// What it is not: a multi-node launcher; for several machines run mpirun -H or srun yourself.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "libengine/core/status.h"

namespace zinf::cli {

inline constexpr int kMaxSpawnRanks = 1024;
// How long a job may take to end after a forwarded SIGINT/SIGTERM before it is killed. mpirun stops
// a job of sleeping ranks in about a second; a rank in the middle of a large collective or an NVMe
// write takes longer to see its SIGTERM.
inline constexpr int kStopGraceSeconds = 15;

// "--ranks" text to a count 1..kMaxSpawnRanks; InvalidArgument naming --ranks otherwise.
Result<int> parse_ranks(std::string_view text);

// The arguments that run `command` again as it was parsed, without --ranks: the subcommand path
// ("bench", "comm"), then every option given, as "--name value" (flags as "--name"), then the
// positionals. What each rank of the job is started with.
std::vector<std::string> args_without_ranks(const CLI::App& command);

// How a job of ranks ended.
struct RankJobEnd {
  // mpirun's exit status (128 + signal when mpirun was killed), or 128 + stop_signal when this
  // process was asked to stop: what the shell expects of a command stopped by that signal.
  int exit_status = 0;
  int stop_signal = 0;       // SIGINT or SIGTERM received (and forwarded) while the job ran; 0: none
  bool killed = false;       // the job outlived kStopGraceSeconds after the stop and was killed
  int leftovers_killed = 0;  // processes of the job still running after mpirun ended, killed then
};

// Runs `ranks` copies of this executable (/proc/self/exe) with `args` (argv without argv[0] and
// without --ranks) under mpirun found on PATH and waits for the job, forwarding a stop as the head
// comment says. NotFound when mpirun is missing; InvalidArgument when this process already runs
// under a launcher (--ranks inside mpirun would nest jobs); IoError when it cannot start. Not
// reentrant (it owns SIGINT/SIGTERM/SIGCHLD while the job runs); the previous handlers are restored.
Result<RankJobEnd> run_rank_job(int ranks, std::span<const std::string> args);

// run_rank_job's exit status alone.
Result<int> spawn_ranks(int ranks, std::span<const std::string> args);

}  // namespace zinf::cli
