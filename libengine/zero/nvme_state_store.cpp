#include "libengine/zero/nvme_state_store.h"

#include <algorithm>

#include <fmt/format.h>

#include "libengine/core/check.h"

namespace zinf::zero {

Result<std::unique_ptr<NvmeStateStore>> NvmeStateStore::open(NvmeStateStoreOptions options) {
  // Like checkpoint directories, swap directories are created when missing; unlike them, they are
  // removed again when the store closes (or fails to open), as the swap files leave nothing there.
  io::CreatedDirectories created;
  for (std::size_t i = 0; i < options.paths.size(); ++i) {
    const std::error_code ec = created.create(options.paths[i]);
    if (ec) {
      return Status::invalid_argument(fmt::format("scenario.zero.nvme_paths[{}]: cannot create directory {}: {}", i,
                                                  options.paths[i], ec.message()));
    }
  }
  io::SwapStoreOptions swap;
  swap.paths = options.paths;
  swap.planned_bytes = options.planned_bytes;
  swap.largest_transfer_bytes = options.largest_transfer_bytes;
  swap.on_warning = options.on_warning;
  // One extent per parameter and per optimizer sub-group: deep queues keep every drive busy.
  swap.queue_depth = kNvmeQueueDepth;
  Result<std::unique_ptr<io::SwapStore>> store = options.engine
                                                     ? io::SwapStore::open(std::move(swap), std::move(options.engine))
                                                     : io::SwapStore::open(std::move(swap));
  if (!store.is_ok()) {
    return Status(store.status().code(), fmt::format("scenario.zero.nvme_paths: {}", store.status().message()));
  }
  return std::unique_ptr<NvmeStateStore>(new NvmeStateStore(std::move(store).value(), std::move(created)));
}

NvmeStateStore::~NvmeStateStore() { drain(); }

void NvmeStateStore::drain() {
  // Every op must finish before the buffers it names go away; outcomes no longer matter.
  for (Extent& extent : extents_) {
    for (PendingOp& op : extent.pending) {
      if (!op.finished) (void)store_->wait(op.ticket);
    }
    extent.pending.clear();
  }
}

std::uint64_t NvmeStateStore::capacity_bytes() const { return store_->stats().capacity_bytes; }

std::string NvmeStateStore::describe() const { return store_->describe(); }

void NvmeStateStore::count(bool read, std::uint64_t bytes) {
  LinkBytes& link = read ? read_ : written_;
  switch (phase_) {
    case TrafficPhase::kForwardBackward:
      link.forward_backward += bytes;
      break;
    case TrafficPhase::kOptimizer:
      link.optimizer += bytes;
      break;
    case TrafficPhase::kOther:
      link.other += bytes;
      break;
  }
}

Status NvmeStateStore::with_context(const Status& status, const Extent& extent, bool read) const {
  if (status.is_ok()) return status;
  return Status(status.code(),
                fmt::format("NVMe {} of {} failed: {}", read ? "read" : "write", extent.what, status.message()));
}

Result<NvmeStateStore::ExtentId> NvmeStateStore::create(std::string what, std::span<const std::byte> data) {
  Extent extent;
  extent.what = std::move(what);
  extent.bytes = data.size();
  Result<io::Ticket> ticket = store_->write(data);
  if (!ticket.is_ok()) return with_context(ticket.status(), extent, false);
  extent.written = ticket.value();
  ZINF_RETURN_IF_ERROR(with_context(store_->wait(extent.written), extent, false));
  count(false, data.size());
  extent_bytes_ += data.size();
  extents_.push_back(std::move(extent));
  return extents_.size() - 1;
}

Status NvmeStateStore::start_write(ExtentId id, std::span<const std::byte> data) {
  ZINF_CHECK(id < extents_.size(), "NVMe state store: extent id out of range");
  Extent& extent = extents_[id];
  ZINF_CHECK(data.size() == extent.bytes, "NVMe state store: rewrite of a different size");
  Result<io::Ticket> ticket = store_->rewrite(extent.written, data);
  if (!ticket.is_ok()) return with_context(ticket.status(), extent, false);
  extent.pending.push_back({ticket.value(), false, std::nullopt});
  count(false, data.size());
  return Status::ok();
}

Status NvmeStateStore::start_read(ExtentId id, std::span<std::byte> into, io::IoPriority priority) {
  ZINF_CHECK(id < extents_.size(), "NVMe state store: extent id out of range");
  Extent& extent = extents_[id];
  ZINF_CHECK(into.size() == extent.bytes, "NVMe state store: read into a buffer of a different size");
  Result<io::Ticket> ticket = store_->read(extent.written, into, priority);
  if (!ticket.is_ok()) return with_context(ticket.status(), extent, true);
  extent.pending.push_back({ticket.value(), true, std::nullopt});
  count(true, into.size());
  return Status::ok();
}

bool NvmeStateStore::done(ExtentId id) {
  ZINF_CHECK(id < extents_.size(), "NVMe state store: extent id out of range");
  for (PendingOp& op : extents_[id].pending) {
    if (!op.finished) op.finished = store_->poll(op.ticket);
    if (!op.finished) return false;
  }
  return true;
}

Status NvmeStateStore::wait(ExtentId id) {
  ZINF_CHECK(id < extents_.size(), "NVMe state store: extent id out of range");
  Extent& extent = extents_[id];
  Status first;
  for (PendingOp& op : extent.pending) {
    Status outcome = op.finished ? *op.finished : store_->wait(op.ticket);
    if (!outcome.is_ok() && first.is_ok()) first = with_context(outcome, extent, op.read);
  }
  extent.pending.clear();
  return first;
}

Status NvmeStateStore::wait_writes(ExtentId id) {
  ZINF_CHECK(id < extents_.size(), "NVMe state store: extent id out of range");
  Extent& extent = extents_[id];
  // The ops of one extent run in issue order: once its last write is done so is everything before
  // it, and the reads issued after it may go on.
  const auto last_write =
      std::find_if(extent.pending.rbegin(), extent.pending.rend(), [](const PendingOp& op) { return !op.read; });
  if (last_write == extent.pending.rend()) return Status::ok();
  const auto end = last_write.base();
  Status first;
  for (auto op = extent.pending.begin(); op != end; ++op) {
    Status outcome = op->finished ? *op->finished : store_->wait(op->ticket);
    if (!outcome.is_ok() && first.is_ok()) first = with_context(outcome, extent, op->read);
  }
  extent.pending.erase(extent.pending.begin(), end);
  return first;
}

}  // namespace zinf::zero
