// MpiCommunicator: the Communicator over OpenMPI for CPU ranks — host buffers (the CPU backend's
// device memory is host memory), one rank per process, all of MPI_COMM_WORLD.
//
// Stream collectives: where MPI grants MPI_THREAD_MULTIPLE (and world > 1) each is the plain
// blocking call (MPI_Allgather, MPI_Reduce_scatter_block, MPI_Allreduce, MPI_Bcast) run on the
// given stream — the same algorithms a program calling MPI directly gets (Open MPI's non-blocking
// collectives go through libnbc, measured here 1.3-2.5x slower at 4 KiB-1 MiB); a small one
// (CommOptions::inline_max_bytes, inline_max_reduce_bytes) issued while the stream is idle runs on
// the calling thread instead (communicator.h: a hand-off to the stream's thread costs more than
// such a call). Either way it is watched by a watchdog thread of this communicator: every 50 ms
// while a collective is in flight it looks for lost peers on this node, checks
// CommOptions::timeout and, once the collective has been in flight that long, answers roll calls. A blocking MPI call
// cannot be cancelled, so when a peer is lost or the timeout passes the watchdog ends this process: it writes the error
// line ("error: all_reduce #12 (4.00 MiB bf16) on rank 0 of 4: lost rank 2 (pid 4242 on this node) is gone ...") and
// exits with status 1 without finalising MPI — what the launcher does to a job with a lost rank anyway. An MPI error a
// call returns still becomes the stream's Status. Under MPI_THREAD_SERIALIZED each collective is the non-blocking call
// (MPI_Iallgather, ...) polled with MPI_Test against the timeout instead, and a failure becomes the stream's Status.
// Either way no wait is unbounded, and after the first error every call fails with it. fp32 sums with MPI_SUM;
// bf16/fp16 with user ops that add in fp32 and round once per addition. When a collective times out the rank asks every
// peer, on a side communicator, whether it is still there ("roll call"); peers answer from their own waits, so the
// error names the ranks that did not answer — the hung or lost ones.
//
// Ordering: the stream collectives run in the order they are executed; issue them all on one
// stream (the device's collective stream) so every rank executes the same sequence (a small one
// run on the calling thread blocks it until the peers reach it: communicator.h). barrier() and
// all_reduce_host() use communicators of their own (non-blocking, polled) and may run while stream
// collectives are in flight.
//
// Counts are MPI ints: a collective of more than 2^31 - 1 elements (per rank block) fails with a
// Status asking for smaller buckets. What it is not: CUDA-aware (device buffers go through NCCL).
#pragma once

#include <memory>

#include "libengine/comm/communicator.h"
#include "libengine/core/status.h"

namespace zinf::comm {

// Initialises MPI (mpi_runtime.h) when needed and returns a communicator over MPI_COMM_WORLD.
// `device` must be a CPU device (InvalidArgument otherwise) and outlive the communicator. Fails
// when MPI cannot start. Creating several is allowed (each duplicates MPI_COMM_WORLD); every rank
// must create them in the same order.
Result<std::unique_ptr<Communicator>> make_mpi_communicator(device::Device& device, const CommOptions& options);

// The same over MPI_COMM_WORLD for its host-side calls only — barrier() and all_reduce_host() —
// whatever the device: what the NCCL communicator uses for those (its stream collectives go
// through NCCL). Its stream collectives take host buffers, as above.
Result<std::unique_ptr<Communicator>> make_mpi_host_communicator(const CommOptions& options);

}  // namespace zinf::comm
