// IoEngine: the raw asynchronous block-I/O interface under the NVMe tier.
//
// An engine moves bytes between memory and registered files and reports the kernel's raw answer
// for each operation: bytes transferred or -errno. It does NOT retry short transfers, EAGAIN or
// errors, and does not know paths; that policy lives once, in IoQueue (io_queue.h), so the
// fault-injecting engine can exercise it. Three implementations:
//   - UringEngine (uring_engine.h): liburing, registered files and buffers, one ring.
//   - PosixEngine (posix_engine.h): pread/pwrite on a small thread pool, for kernels where
//     io_uring is missing or disabled (/proc/sys/kernel/io_uring_disabled).
//   - FaultInjectingEngine (fault_injecting_engine.h): wraps another engine and rewrites results
//     (fail the Nth op, short I/O, EAGAIN, ENOSPC) for tests.
//
// Threading: an engine is driven by one thread at a time (submit/reap/register_*), except wake(),
// which any thread may call to make a blocked reap() return early.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "libengine/core/status.h"

namespace zinf::io {

enum class IoOpKind { kRead, kWrite };

// One transfer. `file_index` is an index into the engine's registered files; `buffer_index` is an
// index into its registered buffers when `buffer` lies inside one (-1 otherwise), which lets
// io_uring use READ_FIXED/WRITE_FIXED. Under O_DIRECT the caller guarantees alignment of buffer,
// offset and length.
struct IoOp {
  IoOpKind kind = IoOpKind::kRead;
  int file_index = 0;
  std::uint64_t offset = 0;
  void* buffer = nullptr;
  std::uint32_t length = 0;
  int buffer_index = -1;
  std::uint64_t tag = 0;  // returned unchanged in the IoResult
};

// The kernel's answer for one op: bytes transferred (may be fewer than asked) or -errno.
struct IoResult {
  std::uint64_t tag = 0;
  std::int64_t result = 0;
};

class IoEngine {
 public:
  virtual ~IoEngine() = default;

  // "uring", "posix", "fault(uring)".
  virtual std::string_view name() const = 0;

  // Most ops that may be in flight at once (submitted, not yet reaped).
  virtual unsigned queue_depth() const = 0;

  // Makes `fds` addressable as file_index 0..n-1, replacing any earlier set. The engine does not
  // own or close the fds. Must be called with nothing in flight.
  virtual Status register_files(std::span<const int> fds) = 0;

  // Declares long-lived buffers (staging buffers) that ops may name by buffer_index. Optional for
  // correctness: an engine may ignore it. Must be called with nothing in flight. On error no
  // buffers are registered and the engine stays usable (ops naming a buffer run unregistered).
  virtual Status register_buffers(std::span<const iovec> buffers) = 0;

  // Queues `ops` and hands them to the kernel. Precondition: in_flight() + ops.size() <=
  // queue_depth(). An error means none of `ops` were queued, except when the engine itself broke
  // mid-batch (IoError): a broken engine fails every later call and may only be destroyed.
  virtual Status submit(std::span<const IoOp> ops) = 0;

  // Appends completed results to `out`, blocking until at least `min_results` are available, the
  // timeout passes, or wake() is called. Returns how many were appended (may be fewer than
  // min_results on timeout or wake; min_results above in_flight() waits for the full timeout or a
  // wake()). An error means the engine itself failed, not an op.
  virtual Result<std::size_t> reap(std::size_t min_results, std::chrono::milliseconds timeout,
                                   std::vector<IoResult>& out) = 0;

  // Ops submitted and not yet returned by reap().
  virtual unsigned in_flight() const = 0;

  // Thread-safe: makes a blocked (or the next) reap() return promptly.
  virtual void wake() = 0;
};

enum class EngineKind { kUring, kPosix };

// "uring" / "posix" -> kind; anything else is InvalidArgument naming `field`.
Result<EngineKind> engine_kind_from_name(std::string_view name, std::string_view field);
std::string_view engine_kind_name(EngineKind kind);

// Creates an engine. kUring fails with a Status explaining why (io_uring_disabled, ENOSYS, EPERM
// under seccomp) so the caller can fall back to kPosix and say so.
Result<std::unique_ptr<IoEngine>> make_io_engine(EngineKind kind, unsigned queue_depth);

}  // namespace zinf::io
