// MpiRuntime: the one owner of MPI's lifetime in a zinf process. MPI may be initialised once and
// finalised once per process; the first acquire() initialises it (MPI_Init_thread) and learns the
// process's place in the job (world and node ranks, the pids of the ranks on this node); it is
// finalised when the process ends (static destruction after main returns), on success and error
// paths alike. When a communicator broke (a peer lost or hung, a collective left pending) or the
// process fails (mark_broken()), it exits with its failure status without finalising: MPI_Finalize would wait
// for the lost peer forever, and the non-zero exit makes the launcher stop the peers still waiting.
//
// Thread level: MPI_THREAD_MULTIPLE is requested because the collectives run on a stream's worker
// thread while barrier() and all_reduce_host() run on the calling thread, each on its own
// duplicated communicator. An MPI that only offers MPI_THREAD_SERIALIZED is used through one
// process-wide mutex held around every MPI call (lock()); a lower level is refused.
//
// Lost peers: with world > 1, acquire() installs a SIGTERM handler. mpirun (and srun) stop every
// rank with SIGTERM when one rank dies; the handler writes one line naming the rank on this node
// that is gone (checked with kill(pid, 0)), or saying none of this node's is, and exits with 1.
//
// What it is not: a communicator (mpi_communicator.h) and not a launcher (launch_info.h).
// This header does not include mpi.h, so users of the engine need no MPI include path.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "libengine/core/status.h"

namespace zinf::comm {

class MpiRuntime {
 public:
  // Initialises MPI on the first call and returns the process-wide runtime; later calls return the
  // same one (or the same error). Fails when MPI cannot start or offers less than
  // MPI_THREAD_SERIALIZED. Thread-safe. Built only when MPI is found (ZINF_WITH_MPI).
  static Result<MpiRuntime*> acquire();

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  bool serialized() const { return serialized_; }
  // "MPI_THREAD_MULTIPLE" or "MPI_THREAD_SERIALIZED".
  const char* thread_level_name() const;

  // Held around every MPI call: the process-wide mutex under MPI_THREAD_SERIALIZED, nothing under
  // MPI_THREAD_MULTIPLE. Never hold it while waiting.
  std::unique_lock<std::mutex> lock();

  // Ranks of this node that are no longer running, as text: "rank 2 (pid 4242 on this node) is
  // gone (...)", and with `include_stopped` also "... is stopped (...)"; empty when every local peer
  // runs. Reads /proc. Thread-safe.
  std::string lost_local_peers(bool include_stopped) const;

  // A communicator broke or the process fails: at process end exit with `exit_code` instead of
  // calling MPI_Finalize (which would wait for peers that never come). Thread-safe.
  void mark_broken(int exit_code = 1);
  // mark_broken() on the runtime when MPI was initialised; nothing otherwise. Thread-safe.
  static void mark_broken_if_running(int exit_code);

  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;
  ~MpiRuntime();

 private:
  MpiRuntime() = default;
  Status initialise();

  struct Peer {
    int rank = 0;
    int pid = 0;
  };
  int world_rank_ = 0;
  int world_size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  int provided_ = 0;
  bool serialized_ = false;
  bool initialised_ = false;
  std::vector<Peer> local_peers_;  // the other ranks of this node
  std::mutex call_mutex_;
};

}  // namespace zinf::comm
