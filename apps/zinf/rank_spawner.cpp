// The rank spawner (rank_spawner.h): posix_spawn of mpirun with this process's stdio, a stop
// forwarded to it, and nothing of the job left running.
#include "apps/zinf/rank_spawner.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "apps/zinf/process_tree.h"
#include "apps/zinf/stdout_terminal.h"
#include "apps/zinf/stop_signals.h"
#include "kernels/threads.h"
#include "libengine/comm/launch_info.h"
#include "libengine/core/units.h"
#include "probes/process.h"

extern char** environ;  // NOLINT: POSIX, for posix_spawn

namespace zinf::cli {

// The measuring harness (probes/) this file calls.
using probes::find_program;

Result<int> parse_ranks(std::string_view text) {
  ZINF_ASSIGN_OR_RETURN(const std::int64_t ranks, parse_positive_int(text, "--ranks", kMaxSpawnRanks));
  return static_cast<int>(ranks);
}

std::vector<std::string> args_without_ranks(const CLI::App& command) {
  std::vector<std::string> path;
  for (const CLI::App* level = &command; level != nullptr && level->get_parent() != nullptr;
       level = level->get_parent()) {
    path.insert(path.begin(), level->get_name());
  }
  std::vector<std::string> positionals;
  for (const CLI::Option* option : command.get_options()) {
    if (option->count() == 0 || option->get_name() == "--ranks" || option->get_name() == "--help") continue;
    if (!option->nonpositional()) {
      for (const std::string& value : option->results()) positionals.push_back(value);
      continue;
    }
    const std::string name = option->get_name();
    if (option->get_expected_min() == 0) {
      path.push_back(name);  // a flag
      continue;
    }
    for (const std::string& value : option->results()) {
      path.push_back(name);
      path.push_back(value);
    }
  }
  path.insert(path.end(), positionals.begin(), positionals.end());
  return path;
}

namespace {

// Kills (SIGKILL) every process of `job` still running; returns how many were.
int kill_running(const std::vector<ProcessId>& job) {
  int killed = 0;
  for (const ProcessId& process : job) {
    if (still_running(process) && ::kill(process.pid, SIGKILL) == 0) ++killed;
  }
  return killed;
}

// Waits for mpirun (`pid`), forwarding the first SIGINT/SIGTERM this process receives; after the
// grace period kills what is left of the job.
Result<RankJobEnd> wait_for_job(pid_t pid, StopSignals& signals) {
  using Clock = std::chrono::steady_clock;
  RankJobEnd end;
  Clock::time_point deadline{};
  std::vector<ProcessId> job;  // mpirun's descendants when the stop came: the ranks
  int wait_status = 0;
  for (;;) {
    const pid_t reaped = ::waitpid(pid, &wait_status, WNOHANG);
    if (reaped == pid) break;
    if (reaped < 0 && errno != EINTR)
      return Status::io_error(fmt::format("--ranks: waitpid: {}", std::strerror(errno)));
    // SIGCHLD wakes the wait when mpirun ends; the timeout is only a safety net.
    const int stop = signals.wait(std::chrono::milliseconds(end.stop_signal == 0 ? 1000 : 100));
    if (stop != 0 && end.stop_signal == 0) {
      end.stop_signal = stop;
      job = descendants_of(pid);
      ::kill(pid, stop);  // mpirun stops its ranks with SIGTERM and exits
      deadline = Clock::now() + std::chrono::seconds(kStopGraceSeconds);
    }
    if (end.stop_signal != 0 && !end.killed && Clock::now() >= deadline) {
      // The ranks mpirun started after the snapshot, if any, are its descendants now.
      for (const ProcessId& process : descendants_of(pid)) job.push_back(process);
      ::kill(pid, SIGKILL);
      kill_running(job);
      end.killed = true;
    }
  }
  end.exit_status =
      WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + (WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0);
  if (end.stop_signal != 0) {
    // mpirun has ended; a rank it failed to stop would train on, orphaned.
    end.leftovers_killed = kill_running(job);
    end.exit_status = 128 + end.stop_signal;
  }
  return end;
}

}  // namespace

Result<int> spawn_ranks(int ranks, std::span<const std::string> args) {
  ZINF_ASSIGN_OR_RETURN(const RankJobEnd end, run_rank_job(ranks, args));
  return end.exit_status;
}

Result<RankJobEnd> run_rank_job(int ranks, std::span<const std::string> args) {
  ZINF_ASSIGN_OR_RETURN(const comm::LaunchInfo launch, comm::launch_info_from_environment());
  if (launch.under_launcher()) {
    return Status::invalid_argument(
        fmt::format("--ranks: this zinf already runs under {} as rank {} of {}; drop --ranks (the launcher "
                    "decides the ranks)",
                    launch.launcher, launch.rank, launch.world_size));
  }
  const char* path = std::getenv("PATH");
  Result<std::string> mpirun = find_program("mpirun", path == nullptr ? "" : path);
  if (!mpirun.is_ok()) {
    return Status::not_found("--ranks: mpirun is not on PATH; install Open MPI (scripts/install-deps.sh: openmpi-bin)");
  }
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return Status::io_error(fmt::format("--ranks: cannot find this executable: {}", error.message()));

  std::vector<std::string> argv = {mpirun.value(), "-q", "--oversubscribe"};
  // Open MPI binds each of up to 2 ranks to one core (more: to a socket), so a lone rank ran its
  // compute threads on one core of two (the 1-rank baseline of `zinf bench scaling` took 115 ms a
  // step on offload-cpu where `zinf train` takes 62). Each rank gets its whole share of this
  // process's cores instead, as many as the engine gives it threads (cores / ranks); with more
  // ranks than cores nothing is bound and the kernel spreads them.
  const int cores = kernels::cpu::available_cores();
  if (ranks <= cores) {
    argv.insert(argv.end(), {"--map-by", fmt::format("slot:PE={}", cores / ranks), "--bind-to", "core"});
  } else {
    argv.insert(argv.end(), {"--bind-to", "none"});
  }
  argv.insert(argv.end(), {"-np", std::to_string(ranks), self.string()});
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> c_argv;
  for (std::string& arg : argv) c_argv.push_back(arg.data());
  c_argv.push_back(nullptr);
  // A rank's stdout is mpirun's pseudo-terminal, whatever this process's is: tell the ranks
  // (output.h, stdout_reaches_terminal), so a run redirected to a file gets no escape codes.
  ::setenv(kStdoutTerminalEnv, ::isatty(STDOUT_FILENO) == 1 ? "1" : "0", 1);
  if (::geteuid() == 0) {
    // mpirun refuses root unless told twice; containers and CI run as root.
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
  // Installed before the spawn: a stop that comes while mpirun starts is forwarded, not fatal.
  ZINF_ASSIGN_OR_RETURN(std::unique_ptr<StopSignals> signals, StopSignals::install());
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, c_argv[0], nullptr, nullptr, c_argv.data(), environ);
  if (rc != 0) return Status::io_error(fmt::format("--ranks: cannot start {}: {}", argv[0], std::strerror(rc)));
  return wait_for_job(pid, *signals);
}

}  // namespace zinf::cli
