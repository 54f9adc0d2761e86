// SwapStore::Impl (swap_store.cpp, swap_store_io_thread.cpp): the state callers and the I/O thread
// share under one mutex, and what the I/O thread alone touches. Private to the swap store.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "libengine/core/status.h"
#include "libengine/io/extent_allocator.h"
#include "libengine/io/io_engine.h"
#include "libengine/io/io_queue.h"
#include "libengine/io/swap_file.h"
#include "libengine/io/swap_store.h"
#include "libengine/memory/staging_pool.h"

namespace zinf::io {
namespace swap_store_detail {

inline std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

struct SwapPath {
  SwapFile file;
  ExtentAllocator allocator;
  std::uint64_t alignment_bytes;  // offsets, part sizes and direct lengths are multiples of this
};

// Where an extent lives on one path: a contiguous run of its chunks.
struct ExtentPart {
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
};

struct Op;

struct Extent {
  enum class State { kUnwritten, kValid, kFailed };
  std::uint64_t id = 0;
  std::uint64_t size_bytes = 0;
  std::uint32_t first_path = 0;   // chunk k lives on path (first_path + k) % P
  std::vector<ExtentPart> parts;  // one per path; bytes == 0 where the extent has no chunk
  State state = State::kUnwritten;
  std::uint32_t crc = 0;  // of the last successful write, when checksums are on
  std::deque<Op*> queue;  // ops in issue order; the front one runs
};

struct Op {
  std::uint64_t id = 0;
  Extent* extent = nullptr;
  IoOpKind kind = IoOpKind::kRead;
  std::byte* data = nullptr;  // writes only read through it
  std::uint64_t size_bytes = 0;
  std::uint32_t write_crc = 0;  // computed at issue time
  bool done = false;
  Status status;
  // When someone needs this op done, the id of the earliest op that does (feed()): a needed read's
  // own id; for a write or a read ahead, that of the first needed read of the same extent issued
  // behind it, or its own id once a caller blocks in wait() on it (or on an op behind it);
  // kNotUrgent for a write nobody waits for (written behind) and a read ahead nobody waits for yet.
  // Set under the store's mutex by issuing and waiting threads, read by the I/O thread.
  static constexpr std::uint64_t kNotUrgent = ~std::uint64_t{0};
  std::atomic<std::uint64_t> urgency{kNotUrgent};
  // I/O thread only:
  std::uint64_t chunks_total = 0;
  std::uint64_t next_chunk = 0;
  std::uint64_t chunks_outstanding = 0;
  std::uint32_t expected_crc = 0;  // reads: the extent's crc when the read started
  bool verify_crc = false;
};

// One chunk transfer handed to IoQueue; indexed by the IoQueue tag.
struct ChunkInFlight {
  Op* op = nullptr;
  std::uint64_t data_offset = 0;
  std::uint64_t length = 0;  // logical bytes of the tensor in this chunk
  int staging_index = -1;
  std::byte* staging = nullptr;
  bool behind = false;  // a background chunk: write-behind or read ahead (feed())
};

}  // namespace swap_store_detail

class SwapStore::Impl {
  using SwapPath = swap_store_detail::SwapPath;
  using ExtentPart = swap_store_detail::ExtentPart;
  using Extent = swap_store_detail::Extent;
  using Op = swap_store_detail::Op;
  using ChunkInFlight = swap_store_detail::ChunkInFlight;

 public:
  // `registered`: the buffers the engine has registered (the staging pool's, by index, or none).
  Impl(SwapStoreOptions options, std::unique_ptr<IoEngine> engine, std::vector<SwapPath> paths,
       std::unique_ptr<memory::StagingPool> staging, std::uint64_t reserved_bytes, std::vector<iovec> registered);

  ~Impl();

  Result<Ticket> write(std::span<const std::byte> data);

  Result<Ticket> rewrite(const Ticket& written, std::span<const std::byte> data);

  Result<Ticket> read(const Ticket& written, std::span<std::byte> into, IoPriority priority);

  Status wait(const Ticket& ticket);

  std::optional<Status> poll(const Ticket& ticket);

  Status release(const Ticket& written);

  Status register_memory(std::span<std::byte> region);

  Result<std::uint64_t> extent_bytes(const Ticket& written) const;

  SwapStoreStats stats() const;

  std::vector<SwapPathInfo> path_infos() const;

  std::string_view engine_name() const;
  const SwapStoreOptions& options() const;

  std::string describe() const;

 private:
  // ---- caller side (mutex_ held) ----

  Status unknown_op(const Ticket& ticket) const;

  Result<Extent*> find_extent(const Ticket& written, std::uint64_t size_bytes, std::string_view what);

  // Bytes path p holds of an extent of `size` bytes whose chunks start on path `first`.
  std::uint64_t part_bytes(std::uint64_t size, std::uint32_t first, std::size_t p) const;

  Result<Extent> allocate_extent(std::uint64_t extent_id, std::uint64_t size);

  Result<std::uint64_t> allocate_on(std::size_t p, std::uint64_t bytes);

  Ticket enqueue(Extent& extent, std::uint64_t extent_id, IoOpKind kind, std::byte* data, std::uint64_t size,
                 std::uint32_t crc, IoPriority priority = IoPriority::kNeeded);

  // Marks `op` and the ops before it on its extent that are not needed yet with `urgency`; true
  // when any changed. Only the order of service changes, never an extent's order of ops.
  bool make_needed(Op& op, std::uint64_t urgency);

  // ---- I/O thread ----

  void run();

  // mutex_ held. Prepares `op` (the front of its extent's queue) for the I/O thread.
  void start(Op* op);

  // Hands chunks to IoQueue until a queue depth of them is pending — more would only sit in
  // IoQueue's backlog holding staging buffers that other chunks could use. First the needed ops, by
  // urgency (see Op::urgency); then the background — writes nobody waits for (written behind) and
  // reads ahead nobody waits for yet — oldest first. A needed read has the compute waiting for its
  // bytes soon (prefetches are issued in the order of use); a read issued behind 40 MiB of
  // optimizer-state write-back, or behind the next sub-groups' states read ahead before the forward
  // pass, would otherwise wait for all of it. Each extent's own order is untouched (only an
  // extent's front op is active).
  //
  // Background chunks take at most a quarter of the queue depth: what is in the drive's queue is
  // out of this ordering's reach. A quarter keeps the drive streaming when no needed read waits.
  void feed();

  // Returns false when the chunk needs a staging buffer and none is free.
  bool submit_chunk(Op& op, bool behind);

  // The index of the registered buffer that holds [data, data + bytes), or -1.
  int registered_index(const std::byte* data, std::uint64_t bytes) const;

  void complete_chunk(const IoDone& done);

  // Finalises every active op whose chunks are all done, in one pass under the lock.
  void finish_ready_ops();

  // mutex_ held.
  void finalize(Op* op);

  // mutex_ held.
  void publish_counters();

  // The engine itself failed (not one op): every op in flight is lost. Fail them all and refuse new
  // ones, so no caller waits forever.
  void fail_everything(const Status& why);

  const SwapStoreOptions options_;
  std::vector<SwapPath> paths_;
  std::unique_ptr<memory::StagingPool> staging_;
  // Declared after the files and buffers it has registered, so it is destroyed (and the ring torn
  // down) before they are.
  std::unique_ptr<IoEngine> engine_;
  const std::uint64_t reserved_bytes_;

  mutable std::mutex mutex_;  // guards everything below up to the I/O-thread section
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  bool stopping_ = false;
  Status broken_;
  std::uint64_t next_extent_id_ = 1;
  std::uint64_t next_op_id_ = 1;
  std::unordered_map<std::uint64_t, Extent> extents_;  // node-based: Extent* stays valid
  std::unordered_map<std::uint64_t, std::unique_ptr<Op>> ops_;
  std::deque<Op*> incoming_;  // ops that reached the front of their extent's queue
  bool idle_ = false;         // the I/O thread sleeps on work_cv_ (no op in service): enqueue() wakes it
  // What the engine has registered, by buffer index: the staging pool's buffers first, then the
  // regions of register_memory() (at most 1 GiB each, the kernel's limit). Changed only while the
  // I/O thread is idle, under mutex_, which it takes before its next read of them.
  bool staging_registered_ = false;  // staging buffer k is registered buffer k
  std::vector<iovec> registered_;
  struct Region {
    std::uintptr_t begin = 0;
    std::uintptr_t end = 0;
    int index = 0;
  };
  std::vector<Region> regions_;  // register_memory()'s, sorted by begin, non-overlapping
  SwapStoreStats stats_;

  // I/O thread only (active_ is also touched under mutex_ by fail_everything, on the I/O thread).
  std::unique_ptr<IoQueue> queue_;
  std::vector<Op*> active_;
  std::vector<ChunkInFlight> chunks_;
  std::vector<std::uint32_t> free_chunk_slots_;
  std::uint64_t staged_ops_ = 0;
  std::uint64_t chunks_completed_ = 0;
  std::uint64_t checksum_failures_delta_ = 0;
  std::size_t behind_in_flight_ = 0;                   // background chunks handed to IoQueue and not completed (feed())
  std::vector<std::pair<std::uint64_t, Op*>> urgent_;  // feed()'s scratch: ops someone waits for, by urgency

  std::thread worker_;  // last: starts after everything above exists
};

}  // namespace zinf::io
