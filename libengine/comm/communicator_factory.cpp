// create_communicator (communicator_factory.h): the choice, and the build flags it depends on.
#include "libengine/comm/communicator_factory.h"

#include <fmt/format.h>

#include "libengine/comm/launch_info.h"
#include "libengine/comm/local_communicator.h"
#if ZINF_COMM_WITH_MPI
#include "libengine/comm/mpi_communicator.h"
#include "libengine/comm/mpi_runtime.h"
#endif
#if ZINF_COMM_WITH_NCCL
#include "libengine/comm/nccl_communicator.h"
#endif

namespace zinf::comm {

bool mpi_built() { return ZINF_COMM_WITH_MPI != 0; }
bool nccl_built() { return ZINF_COMM_WITH_NCCL != 0; }

void end_job_with_failure(int exit_code) {
#if ZINF_COMM_WITH_MPI
  MpiRuntime::mark_broken_if_running(exit_code);
#else
  (void)exit_code;
#endif
}

Result<std::unique_ptr<Communicator>> create_communicator(device::Device& device, const CommOptions& options) {
  ZINF_ASSIGN_OR_RETURN(const LaunchInfo launch, launch_info_from_environment());
  if (!launch.under_launcher()) return std::unique_ptr<Communicator>(std::make_unique<LocalCommunicator>(device));
  if (device.kind() == device::DeviceKind::kCuda) {
    if (launch.world_size == 1) return std::unique_ptr<Communicator>(std::make_unique<LocalCommunicator>(device));
#if ZINF_COMM_WITH_NCCL
    return make_nccl_communicator(device, options);
#else
    return Status::invalid_argument(fmt::format(
        "comm: started by {} as rank {} of {} on CUDA, but this zinf was built without NCCL; rebuild with CUDA "
        "and NCCL found (NCCL in the CUDA toolkit or libnccl-dev)",
        launch.launcher, launch.rank, launch.world_size));
#endif
  }
#if ZINF_COMM_WITH_MPI
  return make_mpi_communicator(device, options);
#else
  (void)options;
  return Status::invalid_argument(
      fmt::format("comm: started by {} as rank {} of {}, but this zinf was built without MPI; install libopenmpi-dev "
                  "(scripts/install-deps.sh) and configure with ZINF_WITH_MPI=ON",
                  launch.launcher, launch.rank, launch.world_size));
#endif
}

}  // namespace zinf::comm
