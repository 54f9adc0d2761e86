// IoQueue: reliable, whole transfers over a raw IoEngine.
//
// The engine reports what the kernel did; IoQueue decides what that means, in one place for every
// engine: a short transfer is resubmitted for the remainder, -EAGAIN/-EINTR are retried with a short
// backoff (bounded, so a stuck device ends in an error, not a hang), a read that hits end of file or
// a write that makes no progress is an error, and every error becomes a Status that names the
// operation, the bytes, the file offset, the file's directory and the errno text. A transfer larger
// than the engine's queue can hold is the caller's business: IoQueue moves each transfer as one op
// (plus remainders), and holds transfers beyond the queue depth in a backlog until there is room.
//
// Not thread-safe: one thread (SwapStore's I/O thread) pushes and pumps. The engine's wake() may be
// called from anywhere to cut a pump() short.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "libengine/core/status.h"
#include "libengine/io/io_engine.h"

namespace zinf::io {

struct IoTransfer {
  IoOpKind kind = IoOpKind::kRead;
  int file_index = 0;
  std::uint64_t offset = 0;
  std::byte* buffer = nullptr;
  std::uint64_t length = 0;  // at most 2 GiB - 1 (one engine op)
  int buffer_index = -1;     // registered-buffer index of `buffer`, or -1
  std::uint64_t tag = 0;     // returned in IoDone
};

// A transfer that has finished: all `length` bytes moved (ok) or the first error that stopped it.
struct IoDone {
  std::uint64_t tag = 0;
  Status status;
};

struct IoQueueCounters {
  std::uint64_t ops_submitted = 0;
  std::uint64_t short_resubmits = 0;
  std::uint64_t eagain_retries = 0;
  std::uint64_t transfers_failed = 0;
};

class IoQueue {
 public:
  // `file_names[i]` describes registered file i in error messages ("swap file in /mnt/nvme0").
  // `max_retries`: consecutive EAGAIN/EINTR answers one transfer may get before it fails.
  IoQueue(IoEngine& engine, std::vector<std::string> file_names, unsigned max_retries = 200);

  // Queues a transfer; it is handed to the engine on the next pump() with room in the queue.
  void push(const IoTransfer& transfer);

  // Submits what fits, then waits up to `timeout` for at least one completion (not at all when
  // nothing is in flight), handles every result and appends finished transfers to `done`. An error
  // Status means the engine itself broke (every pending transfer is then lost); per-transfer
  // failures arrive in `done`.
  Status pump(std::chrono::milliseconds timeout, std::vector<IoDone>& done);

  // Transfers pushed and not yet returned in `done` (backlog plus in flight).
  std::size_t pending() const { return backlog_.size() + in_flight_; }
  std::size_t in_flight() const { return in_flight_; }
  const IoQueueCounters& counters() const { return counters_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Active {
    IoTransfer transfer;             // the original request
    std::uint64_t moved = 0;         // bytes done so far
    unsigned retries = 0;            // consecutive EAGAIN/EINTR answers
    Clock::time_point not_before{};  // backoff: do not resubmit before this
  };

  Status submit_backlog();
  void handle_result(const IoResult& result, std::vector<IoDone>& done);
  void finish(std::uint32_t slot, Status status, std::vector<IoDone>& done);
  std::string describe(const Active& active) const;
  std::chrono::milliseconds wait_budget(std::chrono::milliseconds timeout) const;

  IoEngine& engine_;
  std::vector<std::string> file_names_;
  unsigned max_retries_;
  std::vector<Active> slots_;  // indexed by engine tag
  std::vector<std::uint32_t> free_slots_;
  std::deque<std::uint32_t> backlog_;  // slots waiting for room in the engine's queue
  std::size_t in_flight_ = 0;          // slots handed to the engine
  std::vector<IoResult> results_;      // scratch for reap()
  std::vector<IoOp> ops_;              // scratch for submit()
  IoQueueCounters counters_;
};

}  // namespace zinf::io
