// SwapStore's I/O thread (swap_store_impl.h): turns the op at the head of each extent's queue into
// chunk transfers, feeds IoQueue in the order of service of feed(), and finalises ops as their
// chunks complete. Chunk bookkeeping belongs to this thread alone and needs no lock.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "libengine/core/check.h"
#include "libengine/core/units.h"
#include "libengine/io/checksum.h"
#include "libengine/io/swap_store_impl.h"

namespace zinf::io {

using namespace swap_store_detail;  // NOLINT(google-build-using-namespace): this file implements them

// ---- I/O thread ----

void SwapStore::Impl::run() {
  std::vector<IoDone> done;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (active_.empty() && queue_->pending() == 0) {
        idle_ = true;
        done_cv_.notify_all();  // register_memory() waits for an idle I/O thread
        work_cv_.wait(lock, [this] { return stopping_ || !incoming_.empty(); });
        idle_ = false;
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
void SwapStore::Impl::start(Op* op) {
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

// The order of service: swap_store_impl.h says why.
void SwapStore::Impl::feed() {
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
bool SwapStore::Impl::submit_chunk(Op& op, bool behind) {
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
  transfer.buffer_index =
      staged ? (staging_registered_ ? chunk.staging_index : -1) : registered_index(source, io_length);
  transfer.tag = slot;
  queue_->push(transfer);
  if (behind) ++behind_in_flight_;
  ++op.next_chunk;
  ++op.chunks_outstanding;
  if (staged) ++staged_ops_;
  return true;
}

int SwapStore::Impl::registered_index(const std::byte* data, std::uint64_t bytes) const {
  if (regions_.empty()) return -1;
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  // The last region starting at or before `data`.
  auto it = std::upper_bound(regions_.begin(), regions_.end(), begin,
                             [](std::uintptr_t at, const Region& r) { return at < r.begin; });
  if (it == regions_.begin()) return -1;
  --it;
  return begin + bytes <= it->end ? it->index : -1;
}

void SwapStore::Impl::complete_chunk(const IoDone& done) {
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
void SwapStore::Impl::finish_ready_ops() {
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
void SwapStore::Impl::finalize(Op* op) {
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
void SwapStore::Impl::publish_counters() {
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
void SwapStore::Impl::fail_everything(const Status& why) {
  std::lock_guard lock(mutex_);
  broken_ = Status::io_error(fmt::format("swap: the I/O engine failed, no further I/O is possible: {}", why.message()));
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

}  // namespace zinf::io
