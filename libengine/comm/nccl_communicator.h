// NcclCommunicator: the Communicator for CUDA ranks — device buffers, collectives on the stream's
// own cudaStream_t (Stream::native_handle()), one GPU per rank chosen by the local rank. NCCL is
// bootstrapped over MPI: rank 0 makes the unique id and broadcasts it (MpiRuntime owns MPI's
// lifetime). The communicator is created non-blocking (ncclConfig_t::blocking = 0) so that no
// NCCL call can wait forever: a watchdog thread follows every collective with a CUDA event and
// polls ncclCommGetAsyncError; a collective still unfinished after CommOptions::timeout, or an
// asynchronous NCCL error (a lost peer, a network failure), aborts the communicator
// (ncclCommAbort, which also ends the kernels stuck in it) and becomes the first error, reported
// through the stream (a host function after each collective) and by every later call.
// barrier() and all_reduce_host() run on the host over MPI (make_mpi_host_communicator).
// Built only when CUDA, NCCL and MPI are found; its tests skip where there are fewer GPUs than ranks.
#pragma once

#include <memory>

#include "libengine/comm/communicator.h"
#include "libengine/core/status.h"

namespace zinf::comm {

// `device` must be a CUDA device (InvalidArgument otherwise) on GPU local_rank % GPUs and outlive
// the communicator. Collective: every rank calls it. Fails when MPI or NCCL cannot start, or NCCL's
// initialisation does not finish within the timeout.
Result<std::unique_ptr<Communicator>> make_nccl_communicator(device::Device& device, const CommOptions& options);

}  // namespace zinf::comm
