// LaunchInfo: who started this process and where it sits among its peers — rank, world size, local
// rank and local size — read from the launcher's environment before MPI is initialised, so the CLI
// can pick the GPU (local rank) and split the CPU cores between the ranks of one node before any
// device or thread pool exists. Recognised launchers: Open MPI's mpirun (OMPI_COMM_WORLD_*), Slurm's
// srun (SLURM_PROCID inside a job step), and PMI/PMIx launchers (MPICH's Hydra, PRRTE: PMI_RANK,
// PMIX_RANK). What it is not: the communicator; once MPI is up, MPI's own numbers are the truth.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "libengine/core/status.h"

namespace zinf::comm {

struct LaunchInfo {
  std::string launcher = "none";  // "mpirun", "srun", "pmix", "pmi" or "none" (started directly)
  int rank = 0;                   // 0 .. world_size - 1
  int world_size = 1;
  int local_rank = 0;  // among the ranks on this node: picks the GPU, splits the cores
  int local_size = 1;

  bool under_launcher() const { return launcher != "none"; }
};

// Reads an environment variable; nullopt when unset. Injected so tests need not touch the process
// environment.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// The launch as the environment describes it. A variable that is set but malformed ("abc", a rank
// not below the size) is InvalidArgument naming the variable and its value. Slurm's variables count
// only inside a job step (SLURM_STEP_ID set): a batch script's own shell also carries SLURM_PROCID=0
// and SLURM_NTASKS=N, yet it is one process. Thread-safe when `env` is.
Result<LaunchInfo> launch_info_from(const EnvLookup& env);
// The same over the process environment (std::getenv).
Result<LaunchInfo> launch_info_from_environment();

// Compute threads for one rank: `requested` when given (> 0), else the cores of the node split
// evenly between its local ranks (at least 1).
int threads_per_rank(unsigned node_cores, int local_size, std::optional<int> requested);

}  // namespace zinf::comm
