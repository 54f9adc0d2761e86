// PosixEngine: the IoEngine on pread/pwrite and a small thread pool, for kernels where io_uring is
// missing, disabled (/proc/sys/kernel/io_uring_disabled) or blocked by seccomp.
//
// Each op is exactly one pread(2) or pwrite(2) on a worker thread; its raw answer (bytes, possibly
// fewer than asked, or -errno) is the result. Registered buffers are accepted and ignored: plain
// syscalls have no use for them.
//
// What it is not: no retries of short transfers, EINTR or EAGAIN (IoQueue does that), no file
// opening, no ordering between ops in flight at the same time (as with io_uring).
//
// Threading: as IoEngine — one driving thread at a time (submit/reap/register_*), wake() from any
// thread. Workers only touch the shared queues under the engine's mutex.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "libengine/io/io_engine.h"

namespace zinf::io {

class PosixEngine final : public IoEngine {
 public:
  // Starts min(queue_depth, 8) worker threads: more threads than that buys little on one device
  // and costs stacks. InvalidArgument for queue_depth 0; Internal when a thread cannot start.
  static Result<std::unique_ptr<PosixEngine>> create(unsigned queue_depth);

  PosixEngine(const PosixEngine&) = delete;
  PosixEngine& operator=(const PosixEngine&) = delete;
  // Lets the workers finish every queued op (their results are discarded) and joins them, so no
  // thread touches the caller's buffers after this returns.
  ~PosixEngine() override;

  std::string_view name() const override { return "posix"; }
  unsigned queue_depth() const override { return queue_depth_; }

  // Copies the fds. An op whose file_index is outside the set completes with -EBADF. Cannot fail
  // except by calling it with ops in flight (Internal, set unchanged).
  Status register_files(std::span<const int> fds) override;

  // Accepted and ignored (ok), apart from the in-flight check.
  Status register_buffers(std::span<const iovec> buffers) override;

  // Queues the ops for the workers. Internal error, nothing queued, when queue_depth would be
  // exceeded.
  Status submit(std::span<const IoOp> ops) override;

  // Waits on a condition variable until min_results completions, the timeout or wake(); appends
  // every completion available when it stops. Never fails.
  Result<std::size_t> reap(std::size_t min_results, std::chrono::milliseconds timeout,
                           std::vector<IoResult>& out) override;

  unsigned in_flight() const override;

  // Thread-safe. Sticky: if no reap() is blocked, the next one returns promptly.
  void wake() override;

 private:
  // An op with its file index already resolved, so workers never read the file table.
  struct Work {
    IoOp op;
    int fd;
  };

  explicit PosixEngine(unsigned queue_depth);
  void worker_loop();

  const unsigned queue_depth_;
  std::vector<int> fds_;  // driving thread only

  mutable std::mutex mutex_;
  std::condition_variable work_ready_;  // workers wait: work queued or stopping
  std::condition_variable done_ready_;  // reap waits: a completion or a wake
  std::deque<Work> pending_;            // guarded by mutex_
  std::vector<IoResult> completed_;     // guarded by mutex_
  unsigned in_flight_ = 0;              // guarded by mutex_; submitted, not yet reaped
  bool woken_ = false;                  // guarded by mutex_
  bool stopping_ = false;               // guarded by mutex_
  std::vector<std::thread> workers_;
};

}  // namespace zinf::io
