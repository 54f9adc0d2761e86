// NvmeStateStore: the NVMe tier as the state owner sees it — named extents of model state ("bf16
// params of blocks.3.mlp.fc.weight", "optimizer states of sub-group 7") in the swap store
// (io/swap_store), asynchronous reads and rewrites, failures that name the state, and the bytes
// moved per link and phase for the run record.
//
// Extents are created once, at set-up, with their initial contents, and rewritten in place after.
// Reads and writes of one extent run in the order they were issued (SwapStore's rule), so a read
// issued after a rewrite of the same state sees the new bytes.
//
// Not thread-safe: one thread (the training loop's) issues and waits; the swap store's I/O thread
// does the transfers. The swap files are anonymous and vanish when the store is destroyed, on
// error or signal too; so do the swap directories (and parents) that open() created, deepest
// first and each only while empty (io/created_directories.h).
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
#include "libengine/io/created_directories.h"
#include "libengine/io/io_engine.h"
#include "libengine/io/swap_store.h"
#include "libengine/zero/engine_stats.h"

namespace zinf::zero {

// The swap store's queue depth for model state (ops in flight over all paths); the benches that
// measure the drive for the engine use it too.
inline constexpr unsigned kNvmeQueueDepth = 64;

// Which phase is moving bytes, for LinkBytes.
enum class TrafficPhase { kForwardBackward, kOptimizer, kOther };

struct NvmeStateStoreOptions {
  std::vector<std::string> paths;            // directories, one swap file each
  std::uint64_t planned_bytes = 0;           // every extent's bytes, reserved up front
  std::uint64_t largest_transfer_bytes = 0;  // sizes the swap store's staging
  std::unique_ptr<io::IoEngine> engine;      // tests: a FaultInjectingEngine; null: io_uring (posix fallback)
  std::function<void(const std::string&)> on_warning;
};

class NvmeStateStore {
 public:
  using ExtentId = std::size_t;

  // Creates the missing directories, opens the swap store (checking free space for planned_bytes
  // on every path). Errors name "scenario.zero.nvme_paths" and the path; on error the directories
  // it created are removed again.
  static Result<std::unique_ptr<NvmeStateStore>> open(NvmeStateStoreOptions options);
  ~NvmeStateStore();
  NvmeStateStore(const NvmeStateStore&) = delete;
  NvmeStateStore& operator=(const NvmeStateStore&) = delete;

  // A new extent named `what` holding `data`; blocks until written. IoError names `what`.
  Result<ExtentId> create(std::string what, std::span<const std::byte> data);
  // Starts rewriting extent `id` with `data` (its size); `data` must stay unchanged until wait().
  Status start_write(ExtentId id, std::span<const std::byte> data);
  // Starts reading extent `id` into `into` (its size); `into` must stay alive until wait().
  // `priority`: kAhead for states read ahead of their use, served after the needed reads until
  // wait() asks for them (io::IoPriority); the bytes read are the same either way.
  Status start_read(ExtentId id, std::span<std::byte> into, io::IoPriority priority = io::IoPriority::kNeeded);
  // Blocks until every operation started on `id` has finished (ok when none is in flight); the
  // first failure: "NVMe read of <what> failed: <path, offset, errno>". A read may be started while
  // a write of the same extent is in flight (it sees the written bytes), and the other way round.
  Status wait(ExtentId id);
  // Blocks until the writes started on `id` (and what was issued before them) have finished, and
  // leaves reads issued after the last write in flight (ok when no write is pending); failures as
  // wait(). For "the last rewrite is on disk" without waiting for a prefetch issued after it.
  Status wait_writes(ExtentId id);
  // Waits for every operation on every extent (outcomes dropped): before buffers they name go away.
  void drain();
  // Declares host memory that transfers will name for as long as this store is open (the optimizer
  // pipeline's buffers): io::SwapStore::register_memory, which says when it fails and what then.
  Status register_memory(std::span<std::byte> region) { return store_->register_memory(region); }
  // True when nothing is in flight on `id` (outcomes are kept for wait()).
  bool done(ExtentId id);

  void set_phase(TrafficPhase phase) { phase_ = phase; }
  const LinkBytes& bytes_read() const { return read_; }
  const LinkBytes& bytes_written() const { return written_; }
  std::uint64_t extent_bytes() const { return extent_bytes_; }
  std::uint64_t capacity_bytes() const;
  std::uint64_t extent_size(ExtentId id) const { return extents_.at(id).bytes; }
  // One line: the swap store's description.
  std::string describe() const;

 private:
  struct PendingOp {
    io::Ticket ticket;
    bool read = false;
    std::optional<Status> finished;  // outcome, once polled
  };
  struct Extent {
    std::string what;
    io::Ticket written;  // names the extent
    std::uint64_t bytes = 0;
    std::vector<PendingOp> pending;  // in issue order
  };
  NvmeStateStore(std::unique_ptr<io::SwapStore> store, io::CreatedDirectories created)
      : created_(std::move(created)), store_(std::move(store)) {}
  void count(bool read, std::uint64_t bytes);
  Status with_context(const Status& status, const Extent& extent, bool read) const;

  // Declared before store_ so that it is destroyed after it: the directories are removed once the
  // swap files in them are closed.
  io::CreatedDirectories created_;
  std::unique_ptr<io::SwapStore> store_;
  std::vector<Extent> extents_;
  std::uint64_t extent_bytes_ = 0;
  TrafficPhase phase_ = TrafficPhase::kOther;
  LinkBytes read_;
  LinkBytes written_;
};

}  // namespace zinf::zero
