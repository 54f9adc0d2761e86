// UringEngine implementation. See uring_engine.h for the contract.
#include "libengine/io/uring_engine.h"

#include <fmt/format.h>
#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <thread>
#include <utility>

#include "libengine/core/check.h"
#include "libengine/core/errno_text.h"

namespace zinf::io {
namespace {

using Clock = std::chrono::steady_clock;

// user_data of the eventfd poll. Op SQEs carry slot numbers (< queue depth), and liburing's own
// internal timeout SQEs (old kernels without EXT_ARG) use LIBURING_UDATA_TIMEOUT (all ones), so
// this value is never mistaken for either.
constexpr std::uint64_t kWakeUserData = 0xFFFF'FFFF'FFFF'FFFEULL;

// The largest queue depth accepted: the ring gets queue_depth + 2 entries (the wake poll's re-arm
// and liburing's timeout SQE on old kernels) and the kernel's limit is 32768; 16384 is already far
// beyond what an NVMe device benefits from.
constexpr unsigned kMaxQueueDepth = 16384;

// How long submit() keeps retrying when the kernel says EAGAIN with nothing left to reap (it is
// short of memory for requests) before declaring the ring broken, and how long the destructor
// waits for ops still in the kernel.
constexpr std::chrono::seconds kTransientRetryLimit{30};
constexpr std::chrono::seconds kDestructorDrainLimit{10};
constexpr std::chrono::seconds kWakePollRetryLimit{1};

// Timeouts beyond this are treated as "forever"; it keeps now() + timeout from overflowing.
constexpr std::chrono::milliseconds kLongestWait = std::chrono::hours(24 * 365);

// The value of /proc/sys/kernel/io_uring_disabled (Linux 6.6+), or nullopt where it does not exist.
std::optional<int> read_io_uring_disabled() {
  std::ifstream file("/proc/sys/kernel/io_uring_disabled");
  int value = 0;
  if (!(file >> value)) return std::nullopt;
  return value;
}

std::string io_uring_disabled_text(std::optional<int> disabled) {
  if (!disabled) return "/proc/sys/kernel/io_uring_disabled not present";
  switch (*disabled) {
    case 0:
      return "kernel.io_uring_disabled=0, so probably a seccomp filter (container runtime) blocks it";
    case 1:
      return "kernel.io_uring_disabled=1: only members of kernel.io_uring_group may create rings";
    case 2:
      return "kernel.io_uring_disabled=2: io_uring is disabled for all processes";
    default:
      return fmt::format("kernel.io_uring_disabled={}", *disabled);
  }
}

// Turns io_uring_queue_init's -errno into a message that says what to do about it.
Status setup_error(int error_number, unsigned entries) {
  const std::string call = fmt::format("io_uring_setup({} entries): {}", entries, errno_text(error_number));
  switch (error_number) {
    case ENOSYS:
    case EPERM:
      return Status::io_error(fmt::format("io_uring unavailable ({}; {}); use --engine posix", call,
                                          io_uring_disabled_text(read_io_uring_disabled())));
    case ENOMEM:
      return Status::io_error(
          fmt::format("{}: ring memory counts against RLIMIT_MEMLOCK on kernels before 5.12; raise 'ulimit -l', "
                      "lower the queue depth, or use --engine posix",
                      call));
    default:
      return Status::io_error(fmt::format("{}; use --engine posix", call));
  }
}

__kernel_timespec to_kernel_timespec(Clock::duration duration) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count();
  __kernel_timespec ts{};
  ts.tv_sec = ns / 1'000'000'000;
  ts.tv_nsec = ns % 1'000'000'000;
  return ts;
}

bool is_transient_submit_error(int rc) { return rc == -EAGAIN || rc == -EBUSY || rc == -EINTR || rc == 0; }

}  // namespace

Result<std::unique_ptr<UringEngine>> UringEngine::create(unsigned queue_depth) {
  if (queue_depth == 0 || queue_depth > kMaxQueueDepth) {
    return Status::invalid_argument(
        fmt::format("io_uring queue depth: {} is not in 1..{}", queue_depth, kMaxQueueDepth));
  }
  const unsigned entries = queue_depth + 2;
  auto ring = std::make_unique<io_uring>();
  // No setup flags, on purpose; see the head comment of uring_engine.h for SINGLE_ISSUER and
  // COOP_TASKRUN.
  const int rc = io_uring_queue_init(entries, ring.get(), 0);
  if (rc < 0) return setup_error(-rc, entries);

  const int wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    const int error_number = errno;
    io_uring_queue_exit(ring.get());
    return Status::io_error(fmt::format("eventfd for the io_uring wake-up: {}", errno_text(error_number)));
  }
  std::unique_ptr<UringEngine> engine(new UringEngine(queue_depth, std::move(ring), wake_fd));
  ZINF_RETURN_IF_ERROR(engine->arm_wake_poll());
  return engine;
}

UringEngine::UringEngine(unsigned queue_depth, std::unique_ptr<io_uring> ring, int wake_fd)
    : queue_depth_(queue_depth), ring_(std::move(ring)), wake_fd_(wake_fd), slot_tags_(queue_depth) {
  free_slots_.reserve(queue_depth);
  // Reversed so slot 0 is handed out first; only cosmetic, it makes traces easier to read.
  for (unsigned slot = queue_depth; slot > 0; --slot) free_slots_.push_back(slot - 1);
  stashed_.reserve(queue_depth);
}

UringEngine::~UringEngine() {
  // Ops still in the kernel hold pointers into the caller's buffers; once this returns the caller
  // may free them, so wait for every CQE. The results are discarded; a ring that fails to wait
  // ends the loop at once.
  const auto deadline = Clock::now() + kDestructorDrainLimit;
  while (in_kernel() > 0 && Clock::now() < deadline) {
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec ts = to_kernel_timespec(std::chrono::milliseconds(100));
    const int rc = io_uring_wait_cqe_timeout(ring_.get(), &cqe, &ts);
    if (rc < 0 && rc != -ETIME && rc != -EINTR) break;
    harvest(stashed_);
  }
  // The pending wake poll references no user memory; queue_exit cancels it.
  io_uring_queue_exit(ring_.get());
  ::close(wake_fd_);
}

Status UringEngine::broken_error() const {
  return Status::io_error("io_uring engine is unusable after an earlier ring failure");
}

Status UringEngine::arm_wake_poll() {
  io_uring* ring = ring_.get();
  // Callers arm only between batches, so the poll's SQE is the only one the submit below carries
  // and its return value can be read as "armed or not".
  ZINF_CHECK(io_uring_sq_ready(ring) == 0, "wake poll armed while op SQEs are pending");
  io_uring_sqe* sqe = io_uring_get_sqe(ring);
  ZINF_CHECK(sqe != nullptr, "io_uring submission queue full with no SQE pending");
  io_uring_prep_poll_add(sqe, wake_fd_, POLLIN);
  io_uring_sqe_set_data64(sqe, kWakeUserData);
  // EBUSY cannot come from a full completion queue here (it holds twice the ring's entries and at
  // most queue_depth + 1 requests exist), so EAGAIN/EBUSY mean a brief kernel memory shortage.
  const auto give_up_at = Clock::now() + kWakePollRetryLimit;
  for (;;) {
    const int rc = io_uring_submit(ring);
    if (rc == 1) break;
    if (!is_transient_submit_error(rc) || Clock::now() >= give_up_at) {
      broken_ = true;
      return Status::io_error(
          fmt::format("io_uring_submit (wake poll): {}", rc == 0 ? std::string("no progress") : errno_text(-rc)));
    }
    if (rc != -EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  wake_poll_armed_ = true;
  return Status::ok();
}

std::size_t UringEngine::harvest(std::vector<IoResult>& out) {
  io_uring* ring = ring_.get();
  std::size_t appended = 0;
  io_uring_cqe* cqes[64];
  for (;;) {
    const unsigned count = io_uring_peek_batch_cqe(ring, cqes, 64);
    if (count == 0) break;
    for (unsigned i = 0; i < count; ++i) {
      const std::uint64_t user_data = io_uring_cqe_get_data64(cqes[i]);
      if (user_data == kWakeUserData) {
        // Drain the counter so the re-armed poll waits for the next wake() instead of firing at
        // once. EAGAIN (already drained) is harmless.
        std::uint64_t counter = 0;
        [[maybe_unused]] const ssize_t ignored = ::read(wake_fd_, &counter, sizeof counter);
        if (cqes[i]->res > 0) wake_pending_ = true;
        // One-shot poll: it is done. reap() and submit() re-arm it between batches.
        wake_poll_armed_ = false;
        continue;
      }
      if (user_data >= slot_tags_.size()) continue;  // liburing's internal timeout CQE
      const auto slot = static_cast<std::uint32_t>(user_data);
      out.push_back(IoResult{slot_tags_[slot], cqes[i]->res});
      free_slots_.push_back(slot);
      ++appended;
    }
    io_uring_cq_advance(ring, count);
  }
  return appended;
}

Status UringEngine::register_files(std::span<const int> fds) {
  if (broken_) return broken_error();
  if (in_flight_ != 0) {
    return Status::internal(fmt::format("register_files with {} ops in flight", in_flight_));
  }
  if (files_registered_) {
    const int rc = io_uring_unregister_files(ring_.get());
    if (rc < 0) return Status::io_error(fmt::format("io_uring_unregister_files: {}", errno_text(-rc)));
    files_registered_ = false;
  }
  if (fds.empty()) return Status::ok();
  const int rc = io_uring_register_files(ring_.get(), fds.data(), static_cast<unsigned>(fds.size()));
  if (rc < 0) {
    return Status::io_error(fmt::format("io_uring_register_files ({} files): {}", fds.size(), errno_text(-rc)));
  }
  files_registered_ = true;
  return Status::ok();
}

Status UringEngine::register_buffers(std::span<const iovec> buffers) {
  if (broken_) return broken_error();
  if (in_flight_ != 0) {
    return Status::internal(fmt::format("register_buffers with {} ops in flight", in_flight_));
  }
  if (registered_buffer_count_ != 0) {
    const int rc = io_uring_unregister_buffers(ring_.get());
    if (rc < 0) return Status::io_error(fmt::format("io_uring_unregister_buffers: {}", errno_text(-rc)));
    registered_buffer_count_ = 0;
  }
  if (buffers.empty()) return Status::ok();
  const int rc = io_uring_register_buffers(ring_.get(), buffers.data(), static_cast<unsigned>(buffers.size()));
  if (rc < 0) {
    std::uint64_t total_bytes = 0;
    for (const iovec& buffer : buffers) total_bytes += buffer.iov_len;
    std::string hint = "ops will use unregistered buffers (slower, still correct)";
    if (rc == -ENOMEM)
      hint = "registered buffers are pinned and count against RLIMIT_MEMLOCK (raise 'ulimit -l'); " + hint;
    return Status::io_error(fmt::format("io_uring_register_buffers ({} buffers, {} bytes): {}; {}", buffers.size(),
                                        total_bytes, errno_text(-rc), hint));
  }
  registered_buffer_count_ = static_cast<unsigned>(buffers.size());
  return Status::ok();
}

Status UringEngine::submit(std::span<const IoOp> ops) {
  if (broken_) return broken_error();
  if (ops.empty()) return Status::ok();
  if (ops.size() > queue_depth_ - in_flight_) {
    return Status::internal(fmt::format("submit of {} ops with {} in flight exceeds the queue depth {}", ops.size(),
                                        in_flight_, queue_depth_));
  }
  io_uring* ring = ring_.get();
  if (!wake_poll_armed_) ZINF_RETURN_IF_ERROR(arm_wake_poll());

  for (const IoOp& op : ops) {
    io_uring_sqe* sqe = io_uring_get_sqe(ring);
    // The ring has queue_depth + 2 entries, all earlier SQEs were submitted, and at most
    // queue_depth ops are prepared at once.
    ZINF_CHECK(sqe != nullptr, "io_uring submission queue full despite the queue-depth check");
    const bool fixed_buffer = op.buffer_index >= 0 && static_cast<unsigned>(op.buffer_index) < registered_buffer_count_;
    if (op.kind == IoOpKind::kRead) {
      if (fixed_buffer) {
        io_uring_prep_read_fixed(sqe, op.file_index, op.buffer, op.length, op.offset, op.buffer_index);
      } else {
        io_uring_prep_read(sqe, op.file_index, op.buffer, op.length, op.offset);
      }
    } else {
      if (fixed_buffer) {
        io_uring_prep_write_fixed(sqe, op.file_index, op.buffer, op.length, op.offset, op.buffer_index);
      } else {
        io_uring_prep_write(sqe, op.file_index, op.buffer, op.length, op.offset);
      }
    }
    // file_index is an index into the registered table; an index outside it completes with
    // -EBADF, which is the raw answer the contract asks for.
    io_uring_sqe_set_flags(sqe, IOSQE_FIXED_FILE);
    const std::uint32_t slot = free_slots_.back();
    free_slots_.pop_back();
    slot_tags_[slot] = op.tag;
    io_uring_sqe_set_data64(sqe, slot);
  }

  // The kernel may take fewer SQEs than offered, or refuse with EBUSY/EAGAIN until completions are
  // reaped; what it has not taken stays in the SQ ring and the next io_uring_submit offers it again.
  // Completions reaped here wait in stashed_ for the next reap(): no op is ever dropped.
  const auto to_submit = static_cast<unsigned>(ops.size());
  unsigned submitted = 0;
  const auto give_up_at = Clock::now() + kTransientRetryLimit;
  while (submitted < to_submit) {
    const int rc = io_uring_submit(ring);
    if (rc > 0) {
      submitted += static_cast<unsigned>(rc);
      in_flight_ += static_cast<unsigned>(rc);  // counted as taken, so in_kernel() stays exact
      continue;
    }
    if (!is_transient_submit_error(rc) || Clock::now() >= give_up_at) {
      broken_ = true;
      return Status::io_error(fmt::format("io_uring_submit ({} of {} ops taken): {}", submitted, to_submit,
                                          rc == 0 ? std::string("no progress for 30 s") : errno_text(-rc)));
    }
    if (rc == -EINTR) continue;
    if (in_kernel() > 0) {
      io_uring_cqe* cqe = nullptr;
      __kernel_timespec ts = to_kernel_timespec(std::chrono::milliseconds(10));
      const int wait_rc = io_uring_wait_cqe_timeout(ring, &cqe, &ts);
      if (wait_rc < 0 && wait_rc != -ETIME && wait_rc != -EINTR) {
        broken_ = true;
        return Status::io_error(fmt::format("io_uring wait while submitting: {}", errno_text(-wait_rc)));
      }
      // Those ops stay counted in in_flight_ until reap() returns them.
      harvest(stashed_);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return Status::ok();
}

Result<std::size_t> UringEngine::reap(std::size_t min_results, std::chrono::milliseconds timeout,
                                      std::vector<IoResult>& out) {
  if (broken_) return broken_error();
  const auto deadline = Clock::now() + std::min(timeout, kLongestWait);
  std::size_t collected = stashed_.size();
  out.insert(out.end(), stashed_.begin(), stashed_.end());
  stashed_.clear();
  Status status = Status::ok();
  for (;;) {
    collected += harvest(out);
    if (collected >= min_results || wake_pending_) break;
    // A wake CQE harvested inside submit() left the poll unarmed; without it wake() could not end
    // the wait below.
    if (!wake_poll_armed_) {
      status = arm_wake_poll();
      if (!status.is_ok()) break;
    }
    const auto remaining = deadline - Clock::now();
    if (remaining <= Clock::duration::zero()) break;
    // Waiting for one CQE at a time, not min_results - collected: the wake poll's CQE is a single
    // CQE and must end the wait even when several op results are still wanted.
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec ts = to_kernel_timespec(remaining);
    const int rc = io_uring_wait_cqes(ring_.get(), &cqe, 1, &ts, nullptr);
    if (rc < 0 && rc != -ETIME && rc != -EINTR) {
      broken_ = true;
      status = Status::io_error(fmt::format("io_uring_wait_cqes: {}", errno_text(-rc)));
      break;
    }
  }
  // Results already moved to `out` are the caller's even when the ring failed: count them off.
  in_flight_ -= static_cast<unsigned>(collected);
  if (!status.is_ok()) return status;
  wake_pending_ = false;
  return collected;
}

void UringEngine::wake() {
  const std::uint64_t one = 1;
  // EAGAIN only when the counter is at its maximum, i.e. a wake is already pending.
  [[maybe_unused]] const ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
}

}  // namespace zinf::io
