// MpiRuntime (mpi_runtime.h): MPI_Init_thread once, the node's peer table, the SIGTERM reporter and
// MPI_Finalize / MPI_Abort at process end.
#include "libengine/comm/mpi_runtime.h"

#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>

#include <fmt/format.h>

namespace zinf::comm {
namespace {

// What the SIGTERM handler reads: plain globals written before the handler is installed and never
// after, so the handler only reads (async-signal-safe).
constexpr int kMaxSignalPeers = 256;
int g_signal_rank = 0;
int g_signal_world = 1;
int g_signal_peer_count = 0;
int g_signal_peer_rank[kMaxSignalPeers];
int g_signal_peer_pid[kMaxSignalPeers];
// Set once a communicator of this process broke: its own error line says what happened, so the
// SIGTERM that follows (the launcher stopping the job) adds nothing.
// An atomic rather than a volatile sig_atomic_t: any thread may set it (a stream thread, the
// communicator's watchdog) while the handler runs on another; lock-free, so the handler may read it.
std::atomic<int> g_signal_quiet{0};
static_assert(std::atomic<int>::is_always_lock_free, "the SIGTERM handler reads g_signal_quiet");

// Appends the decimal digits of `value` (>= 0) to buf at *len; async-signal-safe.
void append_int(char* buf, std::size_t cap, std::size_t* len, long value) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && n < 24);
  while (n > 0 && *len + 1 < cap) buf[(*len)++] = digits[--n];
}
void append_text(char* buf, std::size_t cap, std::size_t* len, const char* text) {
  while (*text != '\0' && *len + 1 < cap) buf[(*len)++] = *text++;
}

// mpirun/srun send SIGTERM to every rank when one fails (after it was reaped, so its pid no longer
// exists). One line on stderr naming the gone rank of this node, then exit 1: the launcher would
// SIGKILL us a second later anyway, and this line is what the user needs to read.
extern "C" void on_sigterm(int) {
  if (g_signal_quiet.load() != 0) ::_exit(1);
  char line[512];
  std::size_t len = 0;
  append_text(line, sizeof line, &len, "error: rank ");
  append_int(line, sizeof line, &len, g_signal_rank);
  append_text(line, sizeof line, &len, " of ");
  append_int(line, sizeof line, &len, g_signal_world);
  append_text(line, sizeof line, &len, ": stopped by the launcher (SIGTERM); ");
  bool named = false;
  for (int i = 0; i < g_signal_peer_count; ++i) {
    if (::kill(g_signal_peer_pid[i], 0) == 0 || errno != ESRCH) continue;
    append_text(line, sizeof line, &len, named ? ", rank " : "lost rank ");
    append_int(line, sizeof line, &len, g_signal_peer_rank[i]);
    append_text(line, sizeof line, &len, " (pid ");
    append_int(line, sizeof line, &len, g_signal_peer_pid[i]);
    append_text(line, sizeof line, &len, " on this node: it failed or was killed)");
    named = true;
  }
  if (!named) {
    append_text(line, sizeof line, &len, "another rank failed (its error line says why) or the job was cancelled");
  }
  line[len++] = '\n';
  ssize_t ignored = ::write(STDERR_FILENO, line, len);
  (void)ignored;
  ::_exit(1);
}

// The process-wide runtime; destroyed after main returns, which finalises MPI.
std::mutex g_acquire_mutex;
std::unique_ptr<MpiRuntime>& runtime_slot() {
  static std::unique_ptr<MpiRuntime> slot;
  return slot;
}
Status& acquire_error() {
  static Status error;
  return error;
}

Status mpi_status(int rc, std::string_view what) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  return Status::internal(
      fmt::format("MPI: {} failed: {}", what, std::string_view(text, static_cast<std::size_t>(len))));
}

// 'R', 'S', 'T', 'Z'... from /proc/<pid>/stat; 0 when the process does not exist.
char process_state(int pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text;
  if (!stat || !std::getline(stat, text)) return 0;
  const std::size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() ? 0 : text[paren + 2];
}

}  // namespace

Result<MpiRuntime*> MpiRuntime::acquire() {
  std::lock_guard lock(g_acquire_mutex);
  std::unique_ptr<MpiRuntime>& slot = runtime_slot();
  if (slot) return slot.get();
  if (!acquire_error().is_ok()) return acquire_error();
  std::unique_ptr<MpiRuntime> runtime(new MpiRuntime());
  Status status = runtime->initialise();
  if (!status.is_ok()) {
    acquire_error() = status;
    if (runtime->initialised_) slot = std::move(runtime);  // still finalised at exit
    return status;
  }
  slot = std::move(runtime);
  return slot.get();
}

Status MpiRuntime::initialise() {
  int already = 0;
  MPI_Initialized(&already);
  if (already != 0) return Status::internal("MPI: already initialised outside zinf's MpiRuntime");
  int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided_);
  if (rc != MPI_SUCCESS) return Status::internal("MPI: MPI_Init_thread failed (is this process started by mpirun?)");
  initialised_ = true;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (provided_ < MPI_THREAD_SERIALIZED) {
    return Status::internal(fmt::format(
        "MPI: the library offers thread level {} but zinf needs MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE "
        "(collectives run on a stream thread); use an MPI built with thread support",
        provided_));
  }
  serialized_ = provided_ < MPI_THREAD_MULTIPLE;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);

  // The node's ranks and their pids: the lost-peer checks look at /proc for them.
  MPI_Comm node = MPI_COMM_NULL;
  rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank_, MPI_INFO_NULL, &node);
  if (rc != MPI_SUCCESS) return mpi_status(rc, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_size(node, &local_size_);
  const int mine[2] = {world_rank_, static_cast<int>(::getpid())};
  std::vector<int> all(2 * static_cast<std::size_t>(local_size_));
  rc = MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, node);
  MPI_Comm_free(&node);
  if (rc != MPI_SUCCESS) return mpi_status(rc, "MPI_Allgather of the node's pids");
  for (int i = 0; i < local_size_; ++i) {
    if (all[2 * i] != world_rank_) local_peers_.push_back({all[2 * i], all[2 * i + 1]});
  }

  if (world_size_ > 1) {
    g_signal_rank = world_rank_;
    g_signal_world = world_size_;
    g_signal_peer_count = 0;
    for (const Peer& peer : local_peers_) {
      if (g_signal_peer_count == kMaxSignalPeers) break;
      g_signal_peer_rank[g_signal_peer_count] = peer.rank;
      g_signal_peer_pid[g_signal_peer_count] = peer.pid;
      ++g_signal_peer_count;
    }
    struct sigaction action {};
    action.sa_handler = on_sigterm;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGTERM, &action, nullptr);
  }
  return Status::ok();
}

const char* MpiRuntime::thread_level_name() const {
  return serialized_ ? "MPI_THREAD_SERIALIZED" : "MPI_THREAD_MULTIPLE";
}

std::unique_lock<std::mutex> MpiRuntime::lock() {
  return serialized_ ? std::unique_lock<std::mutex>(call_mutex_) : std::unique_lock<std::mutex>();
}

std::string MpiRuntime::lost_local_peers(bool include_stopped) const {
  std::string text;
  for (const Peer& peer : local_peers_) {
    const char state = process_state(peer.pid);
    const char* what = state == 0 || state == 'Z' || state == 'X'          ? "is gone (it died or was killed)"
                       : include_stopped && (state == 'T' || state == 't') ? "is stopped (SIGSTOP or a debugger)"
                                                                           : nullptr;
    if (what == nullptr) continue;
    text += fmt::format("{}rank {} (pid {} on this node) {}", text.empty() ? "" : "; ", peer.rank, peer.pid, what);
  }
  return text;
}

namespace {
std::atomic<bool> g_broken{false};
std::atomic<int> g_exit_code{1};
}  // namespace

void MpiRuntime::mark_broken(int exit_code) {
  g_exit_code.store(exit_code);
  g_broken.store(true);
  g_signal_quiet.store(1);
}

void MpiRuntime::mark_broken_if_running(int exit_code) {
  std::lock_guard lock(g_acquire_mutex);
  if (runtime_slot()) runtime_slot()->mark_broken(exit_code);
}

MpiRuntime::~MpiRuntime() {
  if (!initialised_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized != 0) return;
  if (g_broken.load()) {
    // Not MPI_Abort: with several ranks aborting at once Open MPI 4.1's mpirun can hang while it
    // aggregates their help messages (seen here 2 runs of 2). A non-zero exit without finalising
    // makes mpirun stop the job just the same (orte_abort_on_non_zero_status, on by default), and
    // the peers still waiting get SIGTERM. The process is ending with a failure either way.
    std::fflush(nullptr);
    ::_exit(g_exit_code.load());
  } else {
    MPI_Finalize();
  }
}

}  // namespace zinf::comm
