// UringEngine: the IoEngine on one io_uring (liburing), the fast path of the NVMe tier.
//
// One ring sized for queue_depth ops. Files are registered (ops name them by index with
// IOSQE_FIXED_FILE) and staging buffers may be registered (ops with a buffer_index use
// READ_FIXED/WRITE_FIXED, skipping the per-op page pinning). Results are the kernel's raw CQE
// values. wake() writes an eventfd that the ring polls, so a blocked reap() returns without a
// signal and without a timeout tick.
//
// What it is not: it does not retry short transfers or EAGAIN (IoQueue does), does not open
// files, and does not fall back to posix by itself (make_io_engine's caller decides and says so).
//
// Threading: as IoEngine — one driving thread at a time, wake() from any thread. The ring is set
// up without flags, on purpose: the driving thread may change over the engine's life (created on
// one thread, driven by the I/O queue's, destroyed on a third). IORING_SETUP_SINGLE_ISSUER forbids
// that outright (-EEXIST on submit); IORING_SETUP_COOP_TASKRUN would post completions only when
// the thread that *submitted* an op next enters the kernel, so a reap on another thread could
// wait up to a scheduler tick per completion. The IPI both flags save is small next to NVMe latency.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "libengine/io/io_engine.h"

struct io_uring;  // liburing's ring; kept out of this header so users need no liburing includes

namespace zinf::io {

class UringEngine final : public IoEngine {
 public:
  // Sets up a ring for `queue_depth` ops (1..16384) and its wake eventfd. On failure returns
  // IoError explaining why, reading /proc/sys/kernel/io_uring_disabled: ENOSYS/EPERM become
  // "io_uring unavailable (...); use --engine posix"; ENOMEM points at RLIMIT_MEMLOCK.
  // InvalidArgument for a queue depth out of range.
  static Result<std::unique_ptr<UringEngine>> create(unsigned queue_depth);

  UringEngine(const UringEngine&) = delete;
  UringEngine& operator=(const UringEngine&) = delete;
  // Waits (bounded, about 10 s) for every op still in the kernel so none can write into memory
  // the caller frees next, then tears the ring down and closes the eventfd.
  ~UringEngine() override;

  std::string_view name() const override { return "uring"; }
  unsigned queue_depth() const override { return queue_depth_; }

  // Unregisters the previous set, then registers `fds` (none: just unregisters). On error
  // (IoError with the errno text, e.g. EBADF for a closed fd) no files are registered.
  Status register_files(std::span<const int> fds) override;

  // Unregisters the previous set, then registers `buffers` for READ_FIXED/WRITE_FIXED. On error
  // (typically ENOMEM: pinned pages count against RLIMIT_MEMLOCK) no buffers are registered and
  // ops that name a buffer_index use plain READ/WRITE, so the engine stays correct, only slower;
  // the message says so, for the caller to warn.
  Status register_buffers(std::span<const iovec> buffers) override;

  // Prepares one SQE per op and submits them all. When the kernel answers EBUSY/EAGAIN (too
  // many completions not yet reaped, or short of memory) it reaps completions into an internal
  // list that the next reap() returns, and submits again: no op is dropped. Errors: exceeding
  // queue_depth (Internal, nothing queued); the ring itself failing (IoError; the engine is then
  // broken and every later call fails).
  Status submit(std::span<const IoOp> ops) override;

  // Returns results collected during submit() first, then CQEs. Waits one completion at a time
  // (so a wake, which is one CQE, always ends the wait) until min_results, the timeout, or
  // wake(); appends every completion available when it stops, possibly more than min_results.
  Result<std::size_t> reap(std::size_t min_results, std::chrono::milliseconds timeout,
                           std::vector<IoResult>& out) override;

  unsigned in_flight() const override { return in_flight_; }

  // Thread-safe, async-signal-safe: one write(2) to the eventfd. Sticky: if no reap() is
  // blocked, the next one returns promptly.
  void wake() override;

 private:
  UringEngine(unsigned queue_depth, std::unique_ptr<io_uring> ring, int wake_fd);

  // Moves every available CQE into `out` (op results; each frees its slot) and notes wake CQEs
  // in wake_pending_ (leaving the one-shot poll unarmed). Returns how many op results it appended.
  std::size_t harvest(std::vector<IoResult>& out);
  // Queues and submits a one-shot POLLIN on the eventfd; its CQE carries kWakeUserData.
  // Precondition: no other SQE is pending. Failure leaves the engine broken.
  Status arm_wake_poll();
  // Ops handed to the kernel whose CQE has not been harvested yet.
  unsigned in_kernel() const { return in_flight_ - static_cast<unsigned>(stashed_.size()); }
  Status broken_error() const;

  unsigned queue_depth_;
  std::unique_ptr<io_uring> ring_;
  int wake_fd_;
  // user_data of an op's SQE is its slot, not its tag: tags are the caller's arbitrary 64-bit
  // values and could collide with the wake poll's reserved user_data.
  std::vector<std::uint64_t> slot_tags_;
  std::vector<std::uint32_t> free_slots_;
  std::vector<IoResult> stashed_;  // reaped inside submit(), returned by the next reap()
  unsigned in_flight_ = 0;
  unsigned registered_buffer_count_ = 0;
  bool files_registered_ = false;
  bool wake_poll_armed_ = false;
  bool wake_pending_ = false;  // a wake CQE was seen and not yet reported by a reap()
  bool broken_ = false;
};

}  // namespace zinf::io
