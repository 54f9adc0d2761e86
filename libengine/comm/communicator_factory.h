// create_communicator: the one place that picks a Communicator for this process from how it was
// launched (launch_info.h) and the device it computes on:
//   - started directly (no launcher in the environment): LocalCommunicator, a world of one;
//   - under mpirun / srun / a PMI launcher on the CPU backend: MpiCommunicator (a world of one
//     under `mpirun -np 1` included);
//   - under a launcher on CUDA with more than one rank: NcclCommunicator (bootstrapped over MPI);
//     with one rank, LocalCommunicator.
// What it is not: a launcher (apps/zinf/rank_spawner.h starts mpirun).
#pragma once

#include <memory>

#include "libengine/comm/communicator.h"
#include "libengine/core/status.h"

namespace zinf::comm {

// `device` must outlive the communicator. Fails when the environment is malformed (InvalidArgument
// naming the variable), when the backend needed was not built (InvalidArgument saying how to get
// it) or when it cannot start (MPI/NCCL initialisation).
Result<std::unique_ptr<Communicator>> create_communicator(device::Device& device, const CommOptions& options);

// The process is about to exit with failure status `exit_code` (> 0): when it runs under MPI, it
// ends with that status without MPI_Finalize, so that the launcher stops its peers instead of
// leaving them waiting for it in a collective until their timeout (mpi_runtime.h). Nothing without
// MPI. Thread-safe.
void end_job_with_failure(int exit_code);

// Whether this zinf was built with the MPI communicator / the NCCL communicator.
bool mpi_built();
bool nccl_built();

}  // namespace zinf::comm
