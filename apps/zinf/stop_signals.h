// StopSignals: what a launcher process (`--ranks N`: zinf waiting on mpirun) uses to notice SIGINT
// and SIGTERM and its child's exit without dying of the signal itself. While one is alive, SIGINT
// and SIGTERM no longer end this process: they are recorded, and SIGCHLD too, each waking wait().
// The launcher then forwards the stop to its job and waits for it (rank_spawner.cpp), so a Ctrl-C
// or a `kill` of zinf never leaves mpirun and its ranks training on behind it.
//
// Why a self-pipe and handlers rather than sigwait: libraries loaded into zinf (OpenBLAS) start
// threads with these signals unblocked, so a process-directed signal may land on any thread; a
// handler runs wherever it lands and only writes one byte to a pipe (async-signal-safe).
// The handlers reach the pipe through one process-wide descriptor: a signal handler can reach
// nothing else. It is set by the constructor and cleared by the destructor.
//
// A single-process `zinf train` uses it too: the first SIGINT/SIGTERM stops the run after the step
// in progress (StepObserver::stop_requested), and a second one ends the process at once.
//
// What it is not: a way to stop training inside an MPI rank (libengine/comm/mpi_runtime.h's SIGTERM
// reporter is that), or reentrant: at most one StopSignals may exist at a time.
#pragma once

#include <chrono>
#include <csignal>
#include <memory>

#include "libengine/core/status.h"

namespace zinf::cli {

class StopSignals {
 public:
  // What a stop signal after the first does: recorded like the first (a launcher forwarding the
  // stop and waiting, bounded), or the end of the process by that signal (a run asked to stop after
  // its step, when the user will not wait for it).
  enum class SecondStop { kRecorded, kEndsProcess };
  // Installs the handlers (the previous dispositions are restored by the destructor). IoError when
  // the pipe cannot be made; Internal when another StopSignals is alive.
  static Result<std::unique_ptr<StopSignals>> install(SecondStop second = SecondStop::kRecorded);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Blocks until a signal arrives (SIGINT, SIGTERM or SIGCHLD; one that arrived since the last
  // wait() counts) or `timeout` passes, whichever is first. Returns the first stop signal received since install()
  // (SIGINT or SIGTERM), or 0 while none was. Not thread-safe: one waiting thread.
  int wait(std::chrono::milliseconds timeout);

  // The first stop signal received since install(), or 0; does not block. Thread-safe.
  int stop_signal() const;

 private:
  StopSignals() = default;
  int read_fd_ = -1;
  int write_fd_ = -1;
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_chld_ {};
};

}  // namespace zinf::cli
