// SwapStore: see swap_store.h. The caller side: options, files, extents and the ops callers issue.
//
// Callers and the I/O thread meet under one mutex (swap_store_impl.h): callers allocate extents and
// enqueue ops; the I/O thread (swap_store_io_thread.cpp) turns the op at the head of each extent's
// queue into chunk transfers, feeds IoQueue as long as there is room in the engine's queue (and a
// staging buffer when a chunk needs one), and finalises ops as their chunks complete. Chunk
// bookkeeping (what is in flight, staging buffers) belongs to the I/O thread alone and needs no lock.
#include "libengine/io/swap_store.h"
#include "libengine/io/swap_store_impl.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
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

Status validate(const SwapStoreOptions& options) {
  if (options.paths.empty()) return Status::invalid_argument("swap: no path given; name at least one directory");
  // One directory under two spellings ("/x/swap" and "/x/swap/", a symlink, a bind mount) would
  // be striped as two drives: paths are compared by their canonical form and, where they exist, by
  // device and inode.
  std::map<std::string, std::string> seen_names;                    // canonical -> as given
  std::map<std::pair<dev_t, ino_t>, std::string> seen_directories;  // (device, inode) -> as given
  for (const std::string& path : options.paths) {
    if (path.empty()) return Status::invalid_argument("swap: a path is empty; name a directory");
    std::error_code ec;
    std::string canonical = std::filesystem::weakly_canonical(path, ec).lexically_normal().string();
    if (ec) canonical = std::filesystem::path(path).lexically_normal().string();
    while (canonical.size() > 1 && canonical.back() == '/') canonical.pop_back();
    std::optional<std::string> earlier;
    if (auto [it, inserted] = seen_names.try_emplace(canonical, path); !inserted) earlier = it->second;
    struct stat st {};
    if (!earlier && ::stat(path.c_str(), &st) == 0) {
      const std::pair<dev_t, ino_t> id{st.st_dev, st.st_ino};
      if (auto [it, inserted] = seen_directories.try_emplace(id, path); !inserted) {
        earlier = it->second;
      }
    }
    if (earlier && *earlier == path) {
      return Status::invalid_argument(fmt::format("swap: path '{}' is given twice; give each directory once", path));
    }
    if (earlier) {
      return Status::invalid_argument(
          fmt::format("swap: path '{}' is given twice: it is the same directory as '{}'; give each directory once",
                      path, *earlier));
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

}  // namespace

using namespace swap_store_detail;  // NOLINT(google-build-using-namespace): this file implements them

SwapStore::Impl::Impl(SwapStoreOptions options, std::unique_ptr<IoEngine> engine, std::vector<SwapPath> paths,
                      std::unique_ptr<memory::StagingPool> staging, std::uint64_t reserved_bytes,
                      std::vector<iovec> registered)
    : options_(std::move(options)),
      paths_(std::move(paths)),
      staging_(std::move(staging)),
      engine_(std::move(engine)),
      reserved_bytes_(reserved_bytes),
      staging_registered_(!registered.empty()),
      registered_(std::move(registered)) {
  std::vector<std::string> names;
  for (const SwapPath& p : paths_) names.push_back(fmt::format("swap file in {}", p.file.directory()));
  queue_ = std::make_unique<IoQueue>(*engine_, std::move(names));
  worker_ = std::thread([this] {
    name_this_thread("zinf-swap-io");
    run();
  });
}

SwapStore::Impl::~Impl() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_one();
  engine_->wake();
  worker_.join();
}

Result<Ticket> SwapStore::Impl::write(std::span<const std::byte> data) {
  const std::uint32_t crc = options_.checksum == ChecksumKind::kCrc32c ? crc32c(data) : 0;
  std::lock_guard lock(mutex_);
  ZINF_RETURN_IF_ERROR(broken_);
  const std::uint64_t extent_id = next_extent_id_++;
  ZINF_ASSIGN_OR_RETURN(Extent extent, allocate_extent(extent_id, data.size()));
  Extent& placed = extents_.emplace(extent_id, std::move(extent)).first->second;
  return enqueue(placed, extent_id, IoOpKind::kWrite, const_cast<std::byte*>(data.data()), data.size(), crc);
}

Result<Ticket> SwapStore::Impl::rewrite(const Ticket& written, std::span<const std::byte> data) {
  const std::uint32_t crc = options_.checksum == ChecksumKind::kCrc32c ? crc32c(data) : 0;
  std::lock_guard lock(mutex_);
  ZINF_RETURN_IF_ERROR(broken_);
  ZINF_ASSIGN_OR_RETURN(Extent * extent, find_extent(written, data.size(), "rewrite"));
  return enqueue(*extent, written.extent_id, IoOpKind::kWrite, const_cast<std::byte*>(data.data()), data.size(), crc);
}

Result<Ticket> SwapStore::Impl::read(const Ticket& written, std::span<std::byte> into, IoPriority priority) {
  std::lock_guard lock(mutex_);
  ZINF_RETURN_IF_ERROR(broken_);
  ZINF_ASSIGN_OR_RETURN(Extent * extent, find_extent(written, into.size(), "read"));
  return enqueue(*extent, written.extent_id, IoOpKind::kRead, into.data(), into.size(), 0, priority);
}

Status SwapStore::Impl::wait(const Ticket& ticket) {
  std::unique_lock lock(mutex_);
  auto it = ops_.find(ticket.op_id);
  if (it == ops_.end()) return unknown_op(ticket);
  Op* op = it->second.get();
  // Someone blocks on it now: it (and what runs before it on its extent) goes before the background.
  if (!op->done && make_needed(*op, op->id)) engine_->wake();
  done_cv_.wait(lock, [op] { return op->done; });
  Status status = std::move(op->status);
  ops_.erase(it);
  return status;
}

std::optional<Status> SwapStore::Impl::poll(const Ticket& ticket) {
  std::lock_guard lock(mutex_);
  auto it = ops_.find(ticket.op_id);
  if (it == ops_.end()) return unknown_op(ticket);
  if (!it->second->done) return std::nullopt;
  Status status = std::move(it->second->status);
  ops_.erase(it);
  return status;
}

Status SwapStore::Impl::release(const Ticket& written) {
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

Status SwapStore::Impl::register_memory(std::span<std::byte> region) {
  // The kernel's limit per registered buffer.
  constexpr std::size_t kMaxRegisteredBytes = std::size_t{1} << 30;
  std::unique_lock lock(mutex_);
  // The engine re-registers everything at once, which it may do only with nothing in flight; the
  // I/O thread reads the table when it starts chunks. Both hold once it sleeps with no op queued.
  done_cv_.wait(lock, [this] { return (idle_ && incoming_.empty()) || !broken_.is_ok(); });
  ZINF_RETURN_IF_ERROR(broken_);
  if (region.empty()) return Status::ok();
  const auto begin = reinterpret_cast<std::uintptr_t>(region.data());
  const std::uintptr_t end = begin + region.size();
  for (const Region& r : regions_) {
    if (begin < r.end && r.begin < end) {
      return Status::invalid_argument("swap: register_memory: the region overlaps one registered before");
    }
  }
  std::vector<iovec> wanted = registered_;
  std::vector<Region> added;
  for (std::uintptr_t at = begin; at < end; at += kMaxRegisteredBytes) {
    const std::size_t bytes = std::min<std::size_t>(kMaxRegisteredBytes, end - at);
    added.push_back(Region{at, at + bytes, static_cast<int>(wanted.size())});
    wanted.push_back(iovec{reinterpret_cast<void*>(at), bytes});
  }
  if (Status status = engine_->register_buffers(wanted); !status.is_ok()) {
    // Keep what worked before (the staging buffers' indices stay valid).
    if (Status restored = engine_->register_buffers(registered_); !restored.is_ok()) {
      // Nothing is registered now: every transfer goes unregistered.
      registered_.clear();
      regions_.clear();
      staging_registered_ = false;
    }
    return status.with_context(
        fmt::format("swap: registering {} of host buffers", format_bytes(static_cast<double>(region.size()))));
  }
  registered_ = std::move(wanted);
  regions_.insert(regions_.end(), added.begin(), added.end());
  std::sort(regions_.begin(), regions_.end(), [](const Region& a, const Region& b) { return a.begin < b.begin; });
  return Status::ok();
}

Result<std::uint64_t> SwapStore::Impl::extent_bytes(const Ticket& written) const {
  std::lock_guard lock(mutex_);
  auto it = extents_.find(written.extent_id);
  if (it == extents_.end())
    return Status::invalid_argument(fmt::format("swap: extent {} does not exist", written.extent_id));
  return it->second.size_bytes;
}

SwapStoreStats SwapStore::Impl::stats() const {
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

std::vector<SwapPathInfo> SwapStore::Impl::path_infos() const {
  std::lock_guard lock(mutex_);
  std::vector<SwapPathInfo> infos;
  for (const SwapPath& p : paths_) {
    infos.push_back(SwapPathInfo{p.file.directory(), p.file.reopen_path(), p.file.direct(), p.file.why_buffered(),
                                 p.file.memory_alignment(), p.file.offset_alignment(), p.file.size_bytes(),
                                 p.allocator.used_bytes()});
  }
  return infos;
}

std::string_view SwapStore::Impl::engine_name() const { return engine_->name(); }

const SwapStoreOptions& SwapStore::Impl::options() const { return options_; }

std::string SwapStore::Impl::describe() const {
  std::lock_guard lock(mutex_);
  std::size_t direct = 0;
  for (const SwapPath& p : paths_) direct += p.file.direct() ? 1 : 0;
  const std::string mode = direct == paths_.size() ? "O_DIRECT"
                           : direct == 0           ? "buffered"
                                         : fmt::format("{} O_DIRECT, {} buffered", direct, paths_.size() - direct);
  return fmt::format("swap: {} path{} ({}), {} reserved, {} engine qd {}, {} blocks, staging {} x {} = {}, checksum {}",
                     paths_.size(), paths_.size() == 1 ? "" : "s", mode,
                     format_bytes(static_cast<double>(reserved_bytes_)), engine_->name(), options_.queue_depth,
                     format_bytes(static_cast<double>(options_.block_bytes)), staging_->buffer_count(),
                     format_bytes(static_cast<double>(staging_->buffer_bytes())),
                     format_bytes(static_cast<double>(staging_->total_bytes())), checksum_kind_name(options_.checksum));
}

// ---- caller side (mutex_ held) ----

Status SwapStore::Impl::unknown_op(const Ticket& ticket) const {
  return Status::invalid_argument(fmt::format(
      "swap: operation {} is unknown or already retired (a ticket's outcome is returned once)", ticket.op_id));
}

Result<Extent*> SwapStore::Impl::find_extent(const Ticket& written, std::uint64_t size_bytes, std::string_view what) {
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
std::uint64_t SwapStore::Impl::part_bytes(std::uint64_t size, std::uint32_t first, std::size_t p) const {
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

Result<Extent> SwapStore::Impl::allocate_extent(std::uint64_t extent_id, std::uint64_t size) {
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

Result<std::uint64_t> SwapStore::Impl::allocate_on(std::size_t p, std::uint64_t bytes) {
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

bool SwapStore::Impl::make_needed(Op& op, std::uint64_t urgency) {
  bool changed = false;
  for (Op* ahead : op.extent->queue) {
    if (ahead->urgency.load(std::memory_order_relaxed) == Op::kNotUrgent) {
      ahead->urgency.store(urgency, std::memory_order_relaxed);
      changed = true;
    }
    if (ahead == &op) return changed;
  }
  // Not queued yet (enqueue() marks it before queueing it).
  if (op.urgency.load(std::memory_order_relaxed) == Op::kNotUrgent) {
    op.urgency.store(urgency, std::memory_order_relaxed);
    changed = true;
  }
  return changed;
}

Ticket SwapStore::Impl::enqueue(Extent& extent, std::uint64_t extent_id, IoOpKind kind, std::byte* data,
                                std::uint64_t size, std::uint32_t crc, IoPriority priority) {
  auto op = std::make_unique<Op>();
  op->id = next_op_id_++;
  op->extent = &extent;
  op->kind = kind;
  op->data = data;
  op->size_bytes = size;
  op->write_crc = crc;
  Op* raw = op.get();
  ops_.emplace(raw->id, std::move(op));
  // A needed read makes the writes it waits behind on its extent needed too.
  if (kind == IoOpKind::kRead && priority == IoPriority::kNeeded) make_needed(*raw, raw->id);
  extent.queue.push_back(raw);
  if (extent.queue.size() == 1) {
    incoming_.push_back(raw);
    // The I/O thread takes incoming ops at the top of its loop, which it reaches after every
    // completion. While it has ops in service a write waits for the next one (a chunk's time at
    // most): waking it for each write — an eventfd write, an interrupt to the other core and a
    // context switch, ~10 us of a core on a VM, 65 times a step on offload-nvme — costs the
    // compute more than the write gains by starting sooner. Reads are waited for: they wake it.
    if (idle_ || kind == IoOpKind::kRead) {
      work_cv_.notify_one();
      engine_->wake();
    }
  }
  return Ticket{raw->id, extent_id};
}

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
    ZINF_ASSIGN_OR_RETURN(SwapFile file,
                          SwapFile::create(directory, options.allow_buffered_fallback, options.how_to_allow_buffered));
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
  // Registered staging is a speed-up: an engine that refuses it (RLIMIT_MEMLOCK for unprivileged
  // users) transfers through the same buffers unregistered.
  std::vector<iovec> registered = staging->iovecs();
  if (Status status = engine->register_buffers(registered); !status.is_ok()) {
    if (options.on_warning) options.on_warning("swap: registering staging buffers: " + status.message());
    registered.clear();
  }

  const std::uint64_t reserved = share_bytes * count;
  auto impl = std::make_unique<Impl>(std::move(options), std::move(engine), std::move(paths), std::move(staging),
                                     reserved, std::move(registered));
  return std::unique_ptr<SwapStore>(new SwapStore(std::move(impl)));
}

SwapStore::SwapStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SwapStore::~SwapStore() = default;

Result<Ticket> SwapStore::write(std::span<const std::byte> data) { return impl_->write(data); }
Result<Ticket> SwapStore::rewrite(const Ticket& written, std::span<const std::byte> data) {
  return impl_->rewrite(written, data);
}
Result<Ticket> SwapStore::read(const Ticket& written, std::span<std::byte> into, IoPriority priority) {
  return impl_->read(written, into, priority);
}
Status SwapStore::wait(const Ticket& ticket) { return impl_->wait(ticket); }
std::optional<Status> SwapStore::poll(const Ticket& ticket) { return impl_->poll(ticket); }
Status SwapStore::release(const Ticket& written) { return impl_->release(written); }
Status SwapStore::register_memory(std::span<std::byte> region) { return impl_->register_memory(region); }
Result<std::uint64_t> SwapStore::extent_bytes(const Ticket& written) const { return impl_->extent_bytes(written); }
SwapStoreStats SwapStore::stats() const { return impl_->stats(); }
std::vector<SwapPathInfo> SwapStore::paths() const { return impl_->path_infos(); }
std::string_view SwapStore::engine_name() const { return impl_->engine_name(); }
std::uint64_t SwapStore::block_bytes() const { return impl_->options().block_bytes; }
unsigned SwapStore::queue_depth() const { return impl_->options().queue_depth; }
std::string SwapStore::describe() const { return impl_->describe(); }

}  // namespace zinf::io
