// SwapStore: see swap_store.h.
//
// Callers and the I/O thread meet under one mutex: callers allocate extents and enqueue ops; the I/O
// thread turns the op at the head of each extent's queue into chunk transfers, feeds IoQueue as
// long as there is room in the engine's queue (and a staging buffer when a chunk needs one), and
// finalises ops as their chunks complete. Chunk bookkeeping (what is in flight, staging buffers)
// belongs to the I/O thread alone and needs no lock.
#include "libengine/io/swap_store.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "libengine/core/check.h"
#include "libengine/core/thread_name.h"
#include "libengine/core/units.h"
#include "libengine/io/extent_allocator.h"
#include "libengine/io/io_queue.h"
#include "libengine/io/swap_file.h"
#include "libengine/memory/staging_pool.h"

namespace zinf::io {
namespace {

constexpr std::uint64_t kMinAlignmentBytes = 4096;      // page: what O_DIRECT needs almost everywhere
constexpr std::uint64_t kMaxBlockBytes = 256ull << 20;  // one engine op; keeps staging buffers sane
constexpr unsigned kMaxQueueDepth = 4096;

std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

Status validate(const SwapStoreOptions& options) {
  if (options.paths.empty()) return Status::invalid_argument("swap: no path given; name at least one directory");
  std::set<std::string> seen;
  for (const std::string& path : options.paths) {
    if (path.empty()) return Status::invalid_argument("swap: a path is empty; name a directory");
    if (!seen.insert(path).second) {
      return Status::invalid_argument(fmt::format("swap: path '{}' is given twice; give each directory once", path));
    }
  }
  if (options.block_bytes < kMinAlignmentBytes || options.block_bytes > kMaxBlockBytes ||
      options.block_bytes % kMinAlignmentBytes != 0) {
    return Status::invalid_argument(
        fmt::format("swap block size: {} bytes is not a multiple of 4 KiB between 4 KiB and {}", options.block_bytes,
                    format_bytes(static_cast<double>(kMaxBlockBytes))));
  }
  if (options.queue_depth < 1 || options.queue_depth > kMaxQueueDepth) {
    return Status::invalid_argument(
        fmt::format("swap queue depth: {} is not between 1 and {}", options.queue_depth, kMaxQueueDepth));
  }
  return Status::ok();
}

// The free-space check before anything is written: paths on one file system share its free space.
Status check_space(const std::vector<std::string>& paths, std::uint64_t share_bytes) {
  std::map<dev_t, std::pair<std::string, std::uint64_t>> need;  // device -> (first path, bytes)
  for (const std::string& path : paths) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) continue;  // SwapFile::create reports a missing path better
    auto [it, inserted] = need.try_emplace(st.st_dev, path, 0);
    it->second.second += share_bytes;
    if (!inserted) it->second.first += ", " + path;
  }
  for (const auto& [device, entry] : need) {
    const auto& [names, bytes] = entry;
    const std::string first = names.substr(0, names.find(", "));
    // File systems that keep no block counts (ramfs reports 0 of 0) cannot be checked up front;
    // reserve() then reports a real shortage when it happens.
    struct statvfs fs {};
    if (::statvfs(first.c_str(), &fs) == 0 && fs.f_blocks == 0) continue;
    ZINF_ASSIGN_OR_RETURN(std::uint64_t free_bytes, free_space_bytes(first));
    if (free_bytes < bytes) {
      return Status::infeasible(fmt::format(
          "swap path '{}': the plan needs {} there but its file system has {} free; free space, add paths on other "
          "drives or plan fewer bytes",
          names, format_bytes(static_cast<double>(bytes)), format_bytes(static_cast<double>(free_bytes))));
    }
  }
  return Status::ok();
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
  // When someone waits for this op's bytes, the id of the earliest read that does (feed()): a read's
  // own id, or, for a write, that of the first read of the same extent issued behind it; kNotUrgent
  // for a write nobody waits for (written behind). Set under the store's mutex by issuing threads,
  // read by the I/O thread.
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
  bool behind = false;  // a write-behind chunk (feed())
};

}  // namespace

class SwapStore::Impl {
 public:
  Impl(SwapStoreOptions options, std::unique_ptr<IoEngine> engine, std::vector<SwapPath> paths,
       std::unique_ptr<memory::StagingPool> staging, std::uint64_t reserved_bytes)
      : options_(std::move(options)),
        paths_(std::move(paths)),
        staging_(std::move(staging)),
        engine_(std::move(engine)),
        reserved_bytes_(reserved_bytes) {
    std::vector<std::string> names;
    for (const SwapPath& p : paths_) names.push_back(fmt::format("swap file in {}", p.file.directory()));
    queue_ = std::make_unique<IoQueue>(*engine_, std::move(names));
    worker_ = std::thread([this] {
      name_this_thread("zinf-swap-io");
      run();
    });
  }

  ~Impl() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    work_cv_.notify_one();
    engine_->wake();
    worker_.join();
  }

  Result<Ticket> write(std::span<const std::byte> data) {
    const std::uint32_t crc = options_.checksum == ChecksumKind::kCrc32c ? crc32c(data) : 0;
    std::lock_guard lock(mutex_);
    ZINF_RETURN_IF_ERROR(broken_);
    const std::uint64_t extent_id = next_extent_id_++;
    ZINF_ASSIGN_OR_RETURN(Extent extent, allocate_extent(extent_id, data.size()));
    Extent& placed = extents_.emplace(extent_id, std::move(extent)).first->second;
    return enqueue(placed, extent_id, IoOpKind::kWrite, const_cast<std::byte*>(data.data()), data.size(), crc);
  }

  Result<Ticket> rewrite(const Ticket& written, std::span<const std::byte> data) {
    const std::uint32_t crc = options_.checksum == ChecksumKind::kCrc32c ? crc32c(data) : 0;
    std::lock_guard lock(mutex_);
    ZINF_RETURN_IF_ERROR(broken_);
    ZINF_ASSIGN_OR_RETURN(Extent * extent, find_extent(written, data.size(), "rewrite"));
    return enqueue(*extent, written.extent_id, IoOpKind::kWrite, const_cast<std::byte*>(data.data()), data.size(), crc);
  }

  Result<Ticket> read(const Ticket& written, std::span<std::byte> into) {
    std::lock_guard lock(mutex_);
    ZINF_RETURN_IF_ERROR(broken_);
    ZINF_ASSIGN_OR_RETURN(Extent * extent, find_extent(written, into.size(), "read"));
    return enqueue(*extent, written.extent_id, IoOpKind::kRead, into.data(), into.size(), 0);
  }

  Status wait(const Ticket& ticket) {
    std::unique_lock lock(mutex_);
    auto it = ops_.find(ticket.op_id);
    if (it == ops_.end()) return unknown_op(ticket);
    Op* op = it->second.get();
    done_cv_.wait(lock, [op] { return op->done; });
    Status status = std::move(op->status);
    ops_.erase(it);
    return status;
  }

  std::optional<Status> poll(const Ticket& ticket) {
    std::lock_guard lock(mutex_);
    auto it = ops_.find(ticket.op_id);
    if (it == ops_.end()) return unknown_op(ticket);
    if (!it->second->done) return std::nullopt;
    Status status = std::move(it->second->status);
    ops_.erase(it);
    return status;
  }

  Status release(const Ticket& written) {
    std::lock_guard lock(mutex_);
    auto it = extents_.find(written.extent_id);
    if (it == extents_.end()) {
      return Status::invalid_argument(
          fmt::format("swap: extent {} does not exist (released already?)", written.extent_id));
    }
    Extent& extent = it->second;
    if (!extent.queue.empty()) {
      return Status::invalid_argument(
          fmt::format("swap: extent {} still has {} operation(s) in flight; wait for them first", written.extent_id,
                      extent.queue.size()));
    }
    for (std::size_t p = 0; p < paths_.size(); ++p) {
      if (extent.parts[p].bytes > 0) paths_[p].allocator.free(extent.parts[p].offset, extent.parts[p].bytes);
    }
    extents_.erase(it);
    return Status::ok();
  }

  Result<std::uint64_t> extent_bytes(const Ticket& written) const {
    std::lock_guard lock(mutex_);
    auto it = extents_.find(written.extent_id);
    if (it == extents_.end())
      return Status::invalid_argument(fmt::format("swap: extent {} does not exist", written.extent_id));
    return it->second.size_bytes;
  }

  SwapStoreStats stats() const {
    std::lock_guard lock(mutex_);
    SwapStoreStats s = stats_;
    s.extents_live = extents_.size();
    for (const SwapPath& p : paths_) {
      s.used_bytes += p.allocator.used_bytes();
      s.capacity_bytes += p.file.size_bytes();
    }
    s.staging_bytes = staging_->total_bytes();
    s.staging_buffers = staging_->buffer_count();
    s.staging_in_use = staging_->in_use();
    s.staging_peak_in_use = staging_->peak_in_use();
    return s;
  }

  std::vector<SwapPathInfo> path_infos() const {
    std::lock_guard lock(mutex_);
    std::vector<SwapPathInfo> infos;
    for (const SwapPath& p : paths_) {
      infos.push_back(SwapPathInfo{p.file.directory(), p.file.reopen_path(), p.file.direct(), p.file.why_buffered(),
                                   p.file.memory_alignment(), p.file.offset_alignment(), p.file.size_bytes(),
                                   p.allocator.used_bytes()});
    }
    return infos;
  }

  std::string_view engine_name() const { return engine_->name(); }
  const SwapStoreOptions& options() const { return options_; }

  std::string describe() const {
    std::lock_guard lock(mutex_);
    std::size_t direct = 0;
    for (const SwapPath& p : paths_) direct += p.file.direct() ? 1 : 0;
    const std::string mode = direct == paths_.size() ? "O_DIRECT"
                             : direct == 0           ? "buffered"
                                           : fmt::format("{} O_DIRECT, {} buffered", direct, paths_.size() - direct);
    return fmt::format(
        "swap: {} path{} ({}), {} reserved, {} engine qd {}, {} blocks, staging {} x {} = {}, checksum {}",
        paths_.size(), paths_.size() == 1 ? "" : "s", mode, format_bytes(static_cast<double>(reserved_bytes_)),
        engine_->name(), options_.queue_depth, format_bytes(static_cast<double>(options_.block_bytes)),
        staging_->buffer_count(), format_bytes(static_cast<double>(staging_->buffer_bytes())),
        format_bytes(static_cast<double>(staging_->total_bytes())), checksum_kind_name(options_.checksum));
  }

 private:
  // ---- caller side (mutex_ held) ----

  Status unknown_op(const Ticket& ticket) const {
    return Status::invalid_argument(fmt::format(
        "swap: operation {} is unknown or already retired (a ticket's outcome is returned once)", ticket.op_id));
  }

  Result<Extent*> find_extent(const Ticket& written, std::uint64_t size_bytes, std::string_view what) {
    auto it = extents_.find(written.extent_id);
    if (it == extents_.end()) {
      return Status::invalid_argument(
          fmt::format("swap {}: extent {} does not exist (released already?)", what, written.extent_id));
    }
    if (it->second.size_bytes != size_bytes) {
      return Status::invalid_argument(fmt::format("swap {}: extent {} holds {} bytes but the buffer has {}", what,
                                                  written.extent_id, it->second.size_bytes, size_bytes));
    }
    return &it->second;
  }

  // Bytes path p holds of an extent of `size` bytes whose chunks start on path `first`.
  std::uint64_t part_bytes(std::uint64_t size, std::uint32_t first, std::size_t p) const {
    const std::uint64_t block = options_.block_bytes;
    const std::uint64_t chunks = (size + block - 1) / block;
    const std::uint64_t count = paths_.size();
    const std::uint64_t position = (p + count - first) % count;  // chunks position, position + P, ...
    if (position >= chunks) return 0;
    const std::uint64_t on_path = (chunks - 1 - position) / count + 1;
    const std::uint64_t last_chunk = chunks - 1;
    if (last_chunk % count != position) return on_path * block;
    const std::uint64_t tail = size - last_chunk * block;
    return (on_path - 1) * block + round_up(tail, paths_[p].alignment_bytes);
  }

  Result<Extent> allocate_extent(std::uint64_t extent_id, std::uint64_t size) {
    Extent extent;
    extent.id = extent_id;
    extent.size_bytes = size;
    // Rotating the first path spreads small (single-chunk) extents over every drive too.
    extent.first_path = static_cast<std::uint32_t>(extent_id % paths_.size());
    extent.parts.resize(paths_.size());
    for (std::size_t p = 0; p < paths_.size(); ++p) {
      const std::uint64_t bytes = part_bytes(size, extent.first_path, p);
      if (bytes == 0) continue;
      Result<std::uint64_t> offset = allocate_on(p, bytes);
      if (!offset.is_ok()) {
        for (std::size_t q = 0; q < p; ++q) {
          if (extent.parts[q].bytes > 0) paths_[q].allocator.free(extent.parts[q].offset, extent.parts[q].bytes);
        }
        return offset.status();
      }
      extent.parts[p] = ExtentPart{*offset, bytes};
    }
    return extent;
  }

  Result<std::uint64_t> allocate_on(std::size_t p, std::uint64_t bytes) {
    SwapPath& path = paths_[p];
    if (std::optional<std::uint64_t> offset = path.allocator.allocate(bytes)) return *offset;
    if (!options_.grow_beyond_plan) {
      return Status::out_of_memory(
          fmt::format("swap path '{}' is full: {} more needed, {} of {} in use, and growing beyond the plan is off",
                      path.file.directory(), format_bytes(static_cast<double>(bytes)),
                      format_bytes(static_cast<double>(path.allocator.used_bytes())),
                      format_bytes(static_cast<double>(path.allocator.capacity_bytes()))));
    }
    // Grow by at least a quarter so a run that outgrows its plan does not fallocate on every write.
    const std::uint64_t current = path.file.size_bytes();
    const std::uint64_t grown = round_up(std::max(current + bytes, current + current / 4), options_.block_bytes);
    ZINF_RETURN_IF_ERROR(path.file.reserve(grown));
    path.allocator.grow(path.file.size_bytes());
    if (std::optional<std::uint64_t> offset = path.allocator.allocate(bytes)) return *offset;
    return Status::internal(fmt::format("swap path '{}': no room for {} after growing to {}", path.file.directory(),
                                        format_bytes(static_cast<double>(bytes)),
                                        format_bytes(static_cast<double>(path.file.size_bytes()))));
  }

  Ticket enqueue(Extent& extent, std::uint64_t extent_id, IoOpKind kind, std::byte* data, std::uint64_t size,
                 std::uint32_t crc) {
    auto op = std::make_unique<Op>();
    op->id = next_op_id_++;
    op->extent = &extent;
    op->kind = kind;
    op->data = data;
    op->size_bytes = size;
    op->write_crc = crc;
    Op* raw = op.get();
    ops_.emplace(raw->id, std::move(op));
    if (kind == IoOpKind::kRead) {
      raw->urgency.store(raw->id, std::memory_order_relaxed);
      for (Op* ahead : extent.queue) {
        if (ahead->urgency.load(std::memory_order_relaxed) == Op::kNotUrgent) {
          ahead->urgency.store(raw->id, std::memory_order_relaxed);
        }
      }
    }
    extent.queue.push_back(raw);
    if (extent.queue.size() == 1) {
      incoming_.push_back(raw);
      work_cv_.notify_one();
      engine_->wake();
    }
    return Ticket{raw->id, extent_id};
  }

  // ---- I/O thread ----

  void run() {
    std::vector<IoDone> done;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        if (active_.empty() && queue_->pending() == 0) {
          work_cv_.wait(lock, [this] { return stopping_ || !incoming_.empty(); });
          if (incoming_.empty()) return;  // stopping, and everything has drained
        }
        while (!incoming_.empty()) {
          start(incoming_.front());
          incoming_.pop_front();
        }
      }
      feed();
      done.clear();
      const Status pumped = queue_->pump(std::chrono::milliseconds(200), done);
      if (!pumped.is_ok()) {
        fail_everything(pumped);
        continue;
      }
      for (const IoDone& d : done) complete_chunk(d);
      finish_ready_ops();
    }
  }

  // mutex_ held. Prepares `op` (the front of its extent's queue) for the I/O thread.
  void start(Op* op) {
    Extent& extent = *op->extent;
    op->chunks_total = (op->size_bytes + options_.block_bytes - 1) / options_.block_bytes;
    if (op->kind == IoOpKind::kRead) {
      if (extent.state == Extent::State::kUnwritten) {
        op->status = Status::invalid_argument(fmt::format("swap read: extent {} was never written", extent.id));
        op->chunks_total = 0;
      } else if (extent.state == Extent::State::kFailed) {
        op->status = Status::io_error(fmt::format(
            "swap read: the last write of extent {} failed, so it holds no valid data; rewrite it first", extent.id));
        op->chunks_total = 0;
      }
      op->expected_crc = extent.crc;
      op->verify_crc = options_.checksum == ChecksumKind::kCrc32c;
    }
    active_.push_back(op);
  }

  // Hands chunks to IoQueue until a queue depth of them is pending — more would only sit in
  // IoQueue's backlog holding staging buffers that other chunks could use. First the ops someone
  // waits for, in the order their reads were issued — a read, and a write a read of its extent waits
  // behind, which goes with that read; then the writes nobody waits for (written behind), oldest
  // first. A read has the compute waiting for its bytes soon (prefetches are issued in the order of
  // use); a write is written behind: a read issued behind 40 MiB of optimizer-state write-back
  // would otherwise wait for all of it, and the parameters the next forward pass needs first were
  // written last. Each extent's own order is untouched (only an extent's front op is active).
  //
  // Write-behind chunks take at most a quarter of the queue depth: what is in the drive's queue is
  // out of this ordering's reach. A quarter keeps the drive streaming writes when no read waits.
  void feed() {
    const std::size_t limit = options_.queue_depth;
    const std::size_t behind_limit = std::max<std::size_t>(1, limit / 4);
    urgent_.clear();
    for (Op* op : active_) {
      const std::uint64_t urgency = op->urgency.load(std::memory_order_relaxed);
      if (urgency != Op::kNotUrgent && op->next_chunk < op->chunks_total) urgent_.emplace_back(urgency, op);
    }
    std::sort(urgent_.begin(), urgent_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [urgency, op] : urgent_) {
      while (op->next_chunk < op->chunks_total && queue_->pending() < limit) {
        if (!submit_chunk(*op, false)) return;  // out of staging buffers: wait for completions
      }
      if (queue_->pending() >= limit) return;
    }
    for (Op* op : active_) {
      if (op->urgency.load(std::memory_order_relaxed) != Op::kNotUrgent) continue;
      while (op->next_chunk < op->chunks_total && queue_->pending() < limit && behind_in_flight_ < behind_limit) {
        if (!submit_chunk(*op, true)) return;
      }
      if (queue_->pending() >= limit || behind_in_flight_ >= behind_limit) return;
    }
  }

  // Returns false when the chunk needs a staging buffer and none is free.
  bool submit_chunk(Op& op, bool behind) {
    const std::uint64_t k = op.next_chunk;
    const std::uint64_t block = options_.block_bytes;
    const std::size_t count = paths_.size();
    const auto p = static_cast<std::size_t>((op.extent->first_path + k) % count);
    const SwapPath& path = paths_[p];
    const std::uint64_t data_offset = k * block;
    const std::uint64_t length = std::min(block, op.size_bytes - data_offset);
    const std::uint64_t file_offset = op.extent->parts[p].offset + (k / count) * block;
    std::byte* source = op.data + data_offset;

    const bool direct = path.file.direct();
    const std::uint64_t io_length = direct ? round_up(length, path.alignment_bytes) : length;
    const bool aligned = reinterpret_cast<std::uintptr_t>(source) % path.file.memory_alignment() == 0;
    const bool staged = direct && (!aligned || io_length != length);

    ChunkInFlight chunk{&op, data_offset, length, -1, nullptr, behind};
    if (staged) {
      std::optional<memory::StagingPool::Buffer> buffer = staging_->try_acquire();
      if (!buffer) return false;
      chunk.staging_index = buffer->index;
      chunk.staging = buffer->data;
      if (op.kind == IoOpKind::kWrite) {
        std::memcpy(chunk.staging, source, length);
        std::memset(chunk.staging + length, 0, io_length - length);  // never write stale bytes to disk
      }
    }
    std::uint32_t slot = 0;
    if (free_chunk_slots_.empty()) {
      slot = static_cast<std::uint32_t>(chunks_.size());
      chunks_.push_back(chunk);
    } else {
      slot = free_chunk_slots_.back();
      free_chunk_slots_.pop_back();
      chunks_[slot] = chunk;
    }
    IoTransfer transfer;
    transfer.kind = op.kind;
    transfer.file_index = static_cast<int>(p);
    transfer.offset = file_offset;
    transfer.buffer = staged ? chunk.staging : source;
    transfer.length = io_length;
    transfer.buffer_index = chunk.staging_index;
    transfer.tag = slot;
    queue_->push(transfer);
    if (behind) ++behind_in_flight_;
    ++op.next_chunk;
    ++op.chunks_outstanding;
    if (staged) ++staged_ops_;
    return true;
  }

  void complete_chunk(const IoDone& done) {
    ChunkInFlight chunk = chunks_[done.tag];
    free_chunk_slots_.push_back(static_cast<std::uint32_t>(done.tag));
    if (chunk.behind) --behind_in_flight_;
    Op& op = *chunk.op;
    if (done.status.is_ok()) {
      ++chunks_completed_;
      if (chunk.staging != nullptr && op.kind == IoOpKind::kRead) {
        std::memcpy(op.data + chunk.data_offset, chunk.staging, chunk.length);
      }
    } else if (op.status.is_ok()) {
      op.status = done.status;
      op.next_chunk = op.chunks_total;  // submit nothing more for a failed op
    }
    if (chunk.staging_index >= 0) staging_->release(chunk.staging_index);
    --op.chunks_outstanding;
  }

  // Finalises every active op whose chunks are all done, in one pass under the lock.
  void finish_ready_ops() {
    std::vector<Op*> finished;
    for (Op* op : active_) {
      if (op->next_chunk >= op->chunks_total && op->chunks_outstanding == 0) finished.push_back(op);
    }
    if (finished.empty()) return;
    // Verifying a read is the slow part; do it without holding the lock.
    for (Op* op : finished) {
      if (op->kind == IoOpKind::kRead && op->verify_crc && op->status.is_ok()) {
        const std::uint32_t got = crc32c({op->data, op->size_bytes});
        if (got != op->expected_crc) {
          op->status = Status::io_error(fmt::format(
              "swap read: checksum mismatch for an extent of {} ({} written, {} read back): the swap files returned "
              "different bytes than were written",
              format_bytes(static_cast<double>(op->size_bytes)), fmt::format("{:#010x}", op->expected_crc),
              fmt::format("{:#010x}", got)));
          checksum_failures_delta_ += 1;
        }
      }
    }
    std::lock_guard lock(mutex_);
    for (Op* op : finished) {
      active_.erase(std::find(active_.begin(), active_.end(), op));
      finalize(op);
    }
    publish_counters();
    done_cv_.notify_all();
  }

  // mutex_ held.
  void finalize(Op* op) {
    Extent& extent = *op->extent;
    if (op->kind == IoOpKind::kWrite) {
      if (op->status.is_ok()) {
        extent.state = Extent::State::kValid;
        extent.crc = op->write_crc;
        stats_.bytes_written += op->size_bytes;
      } else {
        extent.state = Extent::State::kFailed;
      }
    } else if (op->status.is_ok()) {
      stats_.bytes_read += op->size_bytes;
    }
    if (!op->status.is_ok()) ++stats_.failed_tickets;
    ZINF_CHECK(!extent.queue.empty() && extent.queue.front() == op, "swap: op finished out of its extent's order");
    extent.queue.pop_front();
    op->done = true;  // after this the caller may retire (delete) op at any moment
    if (!extent.queue.empty()) start(extent.queue.front());
  }

  // mutex_ held.
  void publish_counters() {
    const IoQueueCounters& c = queue_->counters();
    stats_.ops_completed = chunks_completed_;
    stats_.short_resubmits = c.short_resubmits;
    stats_.eagain_retries = c.eagain_retries;
    stats_.staged_ops = staged_ops_;
    stats_.checksum_failures += checksum_failures_delta_;
    checksum_failures_delta_ = 0;
  }

  // The engine itself failed (not one op): every op in flight is lost. Fail them all and refuse new
  // ones, so no caller waits forever.
  void fail_everything(const Status& why) {
    std::lock_guard lock(mutex_);
    broken_ =
        Status::io_error(fmt::format("swap: the I/O engine failed, no further I/O is possible: {}", why.message()));
    std::vector<Op*> all(active_.begin(), active_.end());
    for (Op* op : incoming_) all.push_back(op);
    active_.clear();
    incoming_.clear();
    for (Op* op : all) {
      for (Op* queued = op; queued != nullptr;) {
        Extent& extent = *queued->extent;
        queued->status = broken_;
        queued->chunks_total = queued->next_chunk = queued->chunks_outstanding = 0;
        extent.queue.pop_front();
        queued->done = true;
        queued = extent.queue.empty() ? nullptr : extent.queue.front();
      }
    }
    queue_ = std::make_unique<IoQueue>(*engine_, std::vector<std::string>{});  // forget transfers the engine lost
    behind_in_flight_ = 0;
    done_cv_.notify_all();
  }

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
  SwapStoreStats stats_;

  // I/O thread only (active_ is also touched under mutex_ by fail_everything, on the I/O thread).
  std::unique_ptr<IoQueue> queue_;
  std::vector<Op*> active_;
  std::vector<ChunkInFlight> chunks_;
  std::vector<std::uint32_t> free_chunk_slots_;
  std::uint64_t staged_ops_ = 0;
  std::uint64_t chunks_completed_ = 0;
  std::uint64_t checksum_failures_delta_ = 0;
  std::size_t behind_in_flight_ = 0;  // write-behind chunks handed to IoQueue and not completed (feed())
  std::vector<std::pair<std::uint64_t, Op*>> urgent_;  // feed()'s scratch: ops someone waits for, by urgency

  std::thread worker_;  // last: starts after everything above exists
};

Result<std::unique_ptr<SwapStore>> SwapStore::open(SwapStoreOptions options) {
  ZINF_RETURN_IF_ERROR(validate(options));
  Result<std::unique_ptr<IoEngine>> engine = make_io_engine(options.engine, options.queue_depth);
  if (!engine.is_ok() && options.engine == EngineKind::kUring && options.fall_back_to_posix) {
    if (options.on_warning) {
      options.on_warning(
          fmt::format("{}; using the posix engine (pread/pwrite threads) instead", engine.status().message()));
    }
    engine = make_io_engine(EngineKind::kPosix, options.queue_depth);
  }
  if (!engine.is_ok()) return engine.status();
  return open(std::move(options), std::move(engine).value());
}

Result<std::unique_ptr<SwapStore>> SwapStore::open(SwapStoreOptions options, std::unique_ptr<IoEngine> engine) {
  ZINF_RETURN_IF_ERROR(validate(options));
  ZINF_CHECK(engine != nullptr, "SwapStore::open: null engine");
  const std::uint64_t count = options.paths.size();
  // Each path's share of the plan, in whole blocks (striping puts equal block counts on each).
  const std::uint64_t blocks = (options.planned_bytes + options.block_bytes - 1) / options.block_bytes;
  const std::uint64_t share_bytes = (blocks + count - 1) / count * options.block_bytes;
  ZINF_RETURN_IF_ERROR(check_space(options.paths, share_bytes));

  std::vector<SwapPath> paths;
  std::uint64_t memory_alignment = kMinAlignmentBytes;
  for (const std::string& directory : options.paths) {
    ZINF_ASSIGN_OR_RETURN(SwapFile file, SwapFile::create(directory, options.allow_buffered_fallback));
    if (!file.direct() && options.on_warning) {
      options.on_warning(
          fmt::format("swap path '{}': {}; using buffered I/O, so swapped data also passes through the "
                      "page cache",
                      directory, file.why_buffered()));
    }
    const std::uint64_t alignment = std::max<std::uint64_t>(kMinAlignmentBytes, file.offset_alignment());
    if (options.block_bytes % alignment != 0) {
      return Status::invalid_argument(
          fmt::format("swap block size: {} bytes is not a multiple of {} bytes, the direct-I/O "
                      "alignment of '{}'",
                      options.block_bytes, alignment, directory));
    }
    memory_alignment = std::max<std::uint64_t>(memory_alignment, file.memory_alignment());
    if (share_bytes > 0) ZINF_RETURN_IF_ERROR(file.reserve(share_bytes));
    ExtentAllocator allocator(file.size_bytes(), alignment);
    paths.push_back(SwapPath{std::move(file), std::move(allocator), alignment});
  }

  const std::uint64_t largest =
      options.largest_transfer_bytes > 0 ? options.largest_transfer_bytes : options.planned_bytes;
  const std::uint64_t staging_bytes = memory::StagingPool::recommended_bytes(
      std::max<std::uint64_t>(largest, 1), options.block_bytes, options.queue_depth, options.staging_budget_bytes);
  ZINF_ASSIGN_OR_RETURN(std::unique_ptr<memory::StagingPool> staging,
                        memory::StagingPool::create(staging_bytes, options.block_bytes, memory_alignment));

  std::vector<int> fds;
  for (const SwapPath& p : paths) fds.push_back(p.file.fd());
  ZINF_RETURN_IF_ERROR(engine->register_files(fds).with_context("swap: registering swap files"));
  const std::vector<iovec> buffers = staging->iovecs();
  ZINF_RETURN_IF_ERROR(engine->register_buffers(buffers).with_context("swap: registering staging buffers"));

  const std::uint64_t reserved = share_bytes * count;
  auto impl =
      std::make_unique<Impl>(std::move(options), std::move(engine), std::move(paths), std::move(staging), reserved);
  return std::unique_ptr<SwapStore>(new SwapStore(std::move(impl)));
}

SwapStore::SwapStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SwapStore::~SwapStore() = default;

Result<Ticket> SwapStore::write(std::span<const std::byte> data) { return impl_->write(data); }
Result<Ticket> SwapStore::rewrite(const Ticket& written, std::span<const std::byte> data) {
  return impl_->rewrite(written, data);
}
Result<Ticket> SwapStore::read(const Ticket& written, std::span<std::byte> into) { return impl_->read(written, into); }
Status SwapStore::wait(const Ticket& ticket) { return impl_->wait(ticket); }
std::optional<Status> SwapStore::poll(const Ticket& ticket) { return impl_->poll(ticket); }
Status SwapStore::release(const Ticket& written) { return impl_->release(written); }
Result<std::uint64_t> SwapStore::extent_bytes(const Ticket& written) const { return impl_->extent_bytes(written); }
SwapStoreStats SwapStore::stats() const { return impl_->stats(); }
std::vector<SwapPathInfo> SwapStore::paths() const { return impl_->path_infos(); }
std::string_view SwapStore::engine_name() const { return impl_->engine_name(); }
std::uint64_t SwapStore::block_bytes() const { return impl_->options().block_bytes; }
unsigned SwapStore::queue_depth() const { return impl_->options().queue_depth; }
std::string SwapStore::describe() const { return impl_->describe(); }

}  // namespace zinf::io
