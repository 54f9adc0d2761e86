// StopSignals (stop_signals.h): handlers that record SIGINT/SIGTERM and wake a waiter through a pipe.
#include "apps/zinf/stop_signals.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace zinf::cli {
namespace {

// What the handlers reach (stop_signals.h says why these are process-wide): the pipe's write end
// while a StopSignals is alive (-1 otherwise) and the first stop signal. Lock-free atomics, so the
// handlers may use them.
std::atomic<int> g_wake_fd{-1};
std::atomic<int> g_stop_signal{0};
std::atomic<bool> g_second_stop_ends_process{false};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handlers use these atomics");
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handlers use these atomics");

extern "C" void on_signal(int signal_number) {
  const int saved_errno = errno;
  if (signal_number == SIGINT || signal_number == SIGTERM) {
    int none = 0;
    if (!g_stop_signal.compare_exchange_strong(none, signal_number) && g_second_stop_ends_process.load()) {
      // A second stop: the process ends of it now, as without the handler (both calls are
      // async-signal-safe).
      ::signal(signal_number, SIG_DFL);
      ::raise(signal_number);
    }
  }
  const int fd = g_wake_fd.load();
  if (fd >= 0) {
    const char byte = 1;
    ssize_t ignored = ::write(fd, &byte, 1);  // a full pipe already wakes the waiter
    (void)ignored;
  }
  errno = saved_errno;
}

}  // namespace

Result<std::unique_ptr<StopSignals>> StopSignals::install(SecondStop second) {
  if (g_wake_fd.load() >= 0) return Status::internal("StopSignals: one is already installed");
  std::unique_ptr<StopSignals> signals(new StopSignals());
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Status::io_error(fmt::format("cannot make the signal pipe: {}", std::strerror(errno)));
  }
  signals->read_fd_ = fds[0];
  signals->write_fd_ = fds[1];
  g_stop_signal.store(0);
  g_second_stop_ends_process.store(second == SecondStop::kEndsProcess);
  g_wake_fd.store(fds[1]);
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, &signals->old_int_);
  ::sigaction(SIGTERM, &action, &signals->old_term_);
  action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  ::sigaction(SIGCHLD, &action, &signals->old_chld_);
  return signals;
}

StopSignals::~StopSignals() {
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
  ::sigaction(SIGCHLD, &old_chld_, nullptr);
  g_wake_fd.store(-1);
  ::close(read_fd_);
  ::close(write_fd_);
}

int StopSignals::wait(std::chrono::milliseconds timeout) {
  pollfd fd{read_fd_, POLLIN, 0};
  if (::poll(&fd, 1, static_cast<int>(timeout.count())) > 0) {
    char drain[64];
    while (::read(read_fd_, drain, sizeof drain) > 0) {
    }
  }
  return g_stop_signal.load();
}

int StopSignals::stop_signal() const { return g_stop_signal.load(); }

}  // namespace zinf::cli
