// PosixEngine implementation. See posix_engine.h for the contract.
#include "libengine/io/posix_engine.h"
#include "libengine/core/thread_name.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <utility>

namespace zinf::io {
namespace {

constexpr unsigned kMaxWorkerThreads = 8;

// Timeouts beyond this are treated as "forever"; it keeps now() + timeout from overflowing.
constexpr std::chrono::milliseconds kLongestWait = std::chrono::hours(24 * 365);

// One syscall, its raw answer: bytes transferred or -errno.
std::int64_t perform(const IoOp& op, int fd) {
  const auto offset = static_cast<off_t>(op.offset);
  const ssize_t rc = op.kind == IoOpKind::kRead ? ::pread(fd, op.buffer, op.length, offset)
                                                : ::pwrite(fd, op.buffer, op.length, offset);
  return rc >= 0 ? static_cast<std::int64_t>(rc) : -static_cast<std::int64_t>(errno);
}

}  // namespace

Result<std::unique_ptr<PosixEngine>> PosixEngine::create(unsigned queue_depth) {
  if (queue_depth == 0) return Status::invalid_argument("posix engine queue depth: 0 is not a positive count");
  std::unique_ptr<PosixEngine> engine(new PosixEngine(queue_depth));
  const unsigned thread_count = std::min(queue_depth, kMaxWorkerThreads);
  try {
    for (unsigned i = 0; i < thread_count; ++i)
      engine->workers_.emplace_back([e = engine.get()] {
        name_this_thread("zinf-posix-io");
        e->worker_loop();
      });
  } catch (const std::system_error& error) {
    // The destructor stops and joins the threads that did start.
    return Status::internal(fmt::format("posix engine: starting worker thread {} of {}: {}",
                                        engine->workers_.size() + 1, thread_count, error.what()));
  }
  return engine;
}

PosixEngine::PosixEngine(unsigned queue_depth) : queue_depth_(queue_depth) {}

PosixEngine::~PosixEngine() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void PosixEngine::worker_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
    // Queued ops are finished even when stopping: the destructor promises that nothing touches
    // the caller's buffers afterwards, and an op half-dropped would make that harder to reason about.
    if (pending_.empty()) return;
    const Work work = pending_.front();
    pending_.pop_front();
    lock.unlock();
    const IoResult result{work.op.tag, perform(work.op, work.fd)};
    lock.lock();
    completed_.push_back(result);
    done_ready_.notify_one();
  }
}

Status PosixEngine::register_files(std::span<const int> fds) {
  if (const unsigned busy = in_flight(); busy != 0) {
    return Status::internal(fmt::format("register_files with {} ops in flight", busy));
  }
  fds_.assign(fds.begin(), fds.end());
  return Status::ok();
}

Status PosixEngine::register_buffers(std::span<const iovec> /*buffers*/) {
  if (const unsigned busy = in_flight(); busy != 0) {
    return Status::internal(fmt::format("register_buffers with {} ops in flight", busy));
  }
  return Status::ok();
}

Status PosixEngine::submit(std::span<const IoOp> ops) {
  if (ops.empty()) return Status::ok();
  {
    std::lock_guard lock(mutex_);
    if (ops.size() > queue_depth_ - in_flight_) {
      return Status::internal(fmt::format("submit of {} ops with {} in flight exceeds the queue depth {}", ops.size(),
                                          in_flight_, queue_depth_));
    }
    for (const IoOp& op : ops) {
      // -1 makes the syscall itself answer EBADF, exactly as io_uring does for a bad fixed-file index.
      const bool known = op.file_index >= 0 && static_cast<std::size_t>(op.file_index) < fds_.size();
      pending_.push_back(Work{op, known ? fds_[static_cast<std::size_t>(op.file_index)] : -1});
    }
    in_flight_ += static_cast<unsigned>(ops.size());
  }
  if (ops.size() == 1) {
    work_ready_.notify_one();
  } else {
    work_ready_.notify_all();
  }
  return Status::ok();
}

Result<std::size_t> PosixEngine::reap(std::size_t min_results, std::chrono::milliseconds timeout,
                                      std::vector<IoResult>& out) {
  std::unique_lock lock(mutex_);
  done_ready_.wait_for(lock, std::min(timeout, kLongestWait),
                       [&] { return completed_.size() >= min_results || woken_; });
  const std::size_t count = completed_.size();
  out.insert(out.end(), completed_.begin(), completed_.end());
  completed_.clear();
  in_flight_ -= static_cast<unsigned>(count);
  woken_ = false;
  return count;
}

unsigned PosixEngine::in_flight() const {
  std::lock_guard lock(mutex_);
  return in_flight_;
}

void PosixEngine::wake() {
  {
    std::lock_guard lock(mutex_);
    woken_ = true;
  }
  done_ready_.notify_all();
}

}  // namespace zinf::io
