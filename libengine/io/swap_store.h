// SwapStore: the NVMe tier. Tensors go out to preallocated swap files and come back, asynchronously.
//
// One anonymous, preallocated SwapFile per path (swap_file.h); a tensor becomes one extent, cut
// into block_bytes chunks that are striped round-robin over the paths (chunk k on path k % P), so
// every drive works on every large tensor. Chunks from many tensors share one deep queue driven by
// a single I/O thread through IoQueue (short transfers resubmitted, EAGAIN retried, errors turned
// into Status with path, offset and errno text). Aligned tensors go to disk without a copy;
// unaligned ones and unaligned tails bounce through the StagingPool. With checksums on, a CRC-32C
// of each extent is computed on write and verified on read.
//
// Ordering: operations on one extent run in the order they were issued (a read issued right after a
// write of the same extent sees the written bytes); operations on different extents overlap freely.
//
// Failure: a failed op fails only its own ticket; the store and every other extent stay usable
// (an ENOSPC on one write leaves earlier extents readable). An extent whose last write failed
// cannot be read (IoError says so) until it is rewritten.
//
// Thread-safe: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "libengine/core/status.h"
#include "libengine/io/checksum.h"
#include "libengine/io/io_engine.h"

namespace zinf::io {

struct SwapStoreOptions {
  std::vector<std::string> paths;          // directories, one swap file each; at least one
  std::uint64_t planned_bytes = 0;         // reserved up front over all paths; checked against free space
  bool grow_beyond_plan = true;            // extend the files when the plan runs out
  std::uint64_t block_bytes = 1ull << 20;  // request size and stripe unit
  unsigned queue_depth = 32;               // ops in flight over all paths
  EngineKind engine = EngineKind::kUring;
  bool fall_back_to_posix = true;       // use PosixEngine (with a warning) when io_uring is unavailable
  bool allow_buffered_fallback = true;  // buffered I/O (with a warning) where O_DIRECT is refused
  // Ends the error where O_DIRECT is refused and the fallback is not allowed: how the caller's user
  // allows it (a CLI flag, a field).
  std::string how_to_allow_buffered = "allow buffered I/O";
  ChecksumKind checksum = ChecksumKind::kNone;
  std::uint64_t largest_transfer_bytes = 0;            // sizes the staging pool; 0: planned_bytes
  std::uint64_t staging_budget_bytes = 0;              // upper bound for the staging pool; 0: no bound
  std::function<void(const std::string&)> on_warning;  // one line per warning; may be empty
};

// How soon a read's bytes are needed, for the I/O thread's order of service (swap_store_impl.h,
// feed()). Only the timing of transfers depends on it, never their bytes or the order of the ops
// on one extent.
enum class IoPriority {
  kNeeded,  // the compute waits for these bytes soon (a parameter the next operators use)
  kAhead,   // read ahead of its use (an optimizer sub-group's states for later in the step): served
            // with the write-behind, after every needed read, until someone waits for it
};

// Names one asynchronous operation and the extent it works on. Copyable; a ticket from write()
// also names the extent for later read()/rewrite()/release().
struct Ticket {
  std::uint64_t op_id = 0;
  std::uint64_t extent_id = 0;
};

struct SwapPathInfo {
  std::string directory;
  std::string reopen_path;  // for another process (fio) to open the same file
  bool direct = false;
  std::string why_buffered;
  std::uint32_t memory_alignment_bytes = 1;
  std::uint32_t offset_alignment_bytes = 1;
  std::uint64_t file_bytes = 0;
  std::uint64_t used_bytes = 0;
};

struct SwapStoreStats {
  std::uint64_t bytes_written = 0;
  std::uint64_t bytes_read = 0;
  std::uint64_t ops_completed = 0;    // chunk transfers that finished successfully
  std::uint64_t short_resubmits = 0;  // remainders resubmitted after short transfers
  std::uint64_t eagain_retries = 0;
  std::uint64_t staged_ops = 0;  // chunks copied through a staging buffer
  std::uint64_t checksum_failures = 0;
  std::uint64_t failed_tickets = 0;
  std::uint64_t extents_live = 0;
  std::uint64_t used_bytes = 0;      // allocated extent bytes over all paths
  std::uint64_t capacity_bytes = 0;  // swap file bytes over all paths
  std::uint64_t staging_bytes = 0;
  std::size_t staging_buffers = 0;
  std::size_t staging_in_use = 0;  // 0 whenever nothing is in flight
  std::size_t staging_peak_in_use = 0;
};

class SwapStore {
 public:
  // Opens the store: validates options (InvalidArgument naming the option), checks free space on
  // every path for its share of planned_bytes before anything is written, creates and preallocates
  // the swap files, sizes the staging pool and starts the I/O thread.
  static Result<std::unique_ptr<SwapStore>> open(SwapStoreOptions options);
  // The same over a caller-made engine (tests pass a FaultInjectingEngine); options.engine ignored.
  static Result<std::unique_ptr<SwapStore>> open(SwapStoreOptions options, std::unique_ptr<IoEngine> engine);

  // Waits for every op in flight, stops the I/O thread and closes the files (which vanishes them).
  ~SwapStore();
  SwapStore(const SwapStore&) = delete;
  SwapStore& operator=(const SwapStore&) = delete;

  // Starts writing `data` to a new extent. `data` must stay alive and unchanged until the ticket
  // completes. Fails synchronously (no ticket) when no space can be found or grown.
  Result<Ticket> write(std::span<const std::byte> data);
  // Starts overwriting the extent of `written` with `data`, which must have the extent's size.
  Result<Ticket> rewrite(const Ticket& written, std::span<const std::byte> data);
  // Starts reading the extent of `written` into `into`, which must have the extent's size.
  Result<Ticket> read(const Ticket& written, std::span<std::byte> into, IoPriority priority = IoPriority::kNeeded);

  // Blocks until the op of `ticket` has finished and returns its outcome. Retires the op: a second
  // wait()/poll() on a retired op is InvalidArgument. An op someone waits for is needed: a read
  // ahead or a write behind (and the ops before it on its extent) is served from then on before the
  // write-behind and reads ahead nobody waits for.
  Status wait(const Ticket& ticket);
  // nullopt while the op is in flight; its outcome (and the op retired) once it has finished.
  std::optional<Status> poll(const Ticket& ticket);

  // Declares `region` as long-lived memory that reads and writes will name (a pipeline's host
  // buffers): chunks that lie inside it then skip the kernel's page pinning and release per
  // transfer (io_uring registered buffers; ~16 us of a core per MiB chunk on the VM this was
  // written on). Only a speed-up: ops on memory not declared work the same. Waits for the ops in
  // flight to finish first (the engine re-registers with nothing in flight); call it between
  // phases of work, not while another thread issues ops. The region must stay allocated while the
  // store is open. IoError when the engine refuses (registered memory is pinned and counts against
  // RLIMIT_MEMLOCK for unprivileged users): the store then keeps its earlier registrations and the
  // region is used unregistered.
  Status register_memory(std::span<std::byte> region);

  // Frees the extent of `written`. InvalidArgument while ops on it are still in flight.
  Status release(const Ticket& written);

  // Bytes of the extent named by `written` (its logical size, as written).
  Result<std::uint64_t> extent_bytes(const Ticket& written) const;

  SwapStoreStats stats() const;
  std::vector<SwapPathInfo> paths() const;
  std::string_view engine_name() const;
  std::uint64_t block_bytes() const;
  unsigned queue_depth() const;
  // One line for the start of a run: "swap: 2 paths (O_DIRECT), 4.00 GiB reserved, uring qd 32,
  // 1 MiB blocks, staging 32 x 1 MiB = 32 MiB, checksum crc32c".
  std::string describe() const;

  class Impl;

 private:
  explicit SwapStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace zinf::io
