// ParamCoordinator: the ParamSource of the partitioned states — brings each parameter from where
// its slice lives to the device ahead of the operator that needs it, and lets it go after.
//
// Life cycle of a parameter (DESIGN §7), per slot:
//   NOT_AVAILABLE → reading (NVMe → host staging, NVMe-resident parameters only) → host →
//   copying (host → device, on the host-to-device stream) → gathering (all-gather of the ranks'
//   slices; the identity at one rank) → AVAILABLE → released (its buffer back to the pool in
//   compute-stream order).
// Parameters on the device tier, and small ones (at most persistence_threshold elements) of the
// other tiers, are resident: acquire() hands out their device copy at once.
//
// Prefetch: the order of acquires is recorded per phase (forward, backward) on the first step and
// checked on every later one; a mismatch is counted, reported through on_warning and the order
// re-recorded from that point — prefetching goes on with the new order, it is never dropped. With
// the order known, every acquire looks ahead: NVMe reads are issued far ahead (up to
// prefetch_bytes of host staging), host→device copies near (up to max_live_bytes of device
// copies, which is also the hard cap on gathered parameters). A parameter released but needed
// again within that window keeps its device copy (reuse distance).
//
// Not thread-safe: the training loop's thread makes every call.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "libengine/core/status.h"
#include "libengine/device/device.h"
#include "libengine/model/param_source.h"
#include "libengine/model/param_table.h"
#include "libengine/spec/state_placement.h"
#include "libengine/zero/buffer_pool.h"
#include "libengine/zero/engine_stats.h"
#include "libengine/zero/nvme_state_store.h"

namespace zinf::zero {

// Where the values of one parameter live, in storage precision (this rank's slice; the whole
// parameter at one rank).
struct ParamHome {
  spec::Tier tier = spec::Tier::kDevice;
  void* data = nullptr;                 // device (tier device) or host (tier cpu) memory
  NvmeStateStore::ExtentId extent = 0;  // tier nvme
  std::size_t bytes = 0;
};

struct ParamCoordinatorOptions {
  DType precision = DType::kF32;      // storage precision of the parameters
  DType compute_dtype = DType::kF32;  // of the views acquire() hands out
  std::uint64_t max_live_bytes = 0;   // device bytes of gathered (non-resident) parameter copies
  std::uint64_t prefetch_bytes = 0;   // host staging for NVMe reads in flight
  std::int64_t persistence_threshold = 0;
  std::function<void(const std::string&)> on_warning;
};

class ParamCoordinator {
 public:
  // `homes[id]` says where parameter id lives; `table`, `device` and `nvme` (may be null when no
  // parameter is on NVMe) must outlive the coordinator. Allocates the resident copies of persistent
  // parameters (filled by refresh_resident()). OutOfMemory names what did not fit.
  static Result<std::unique_ptr<ParamCoordinator>> create(const model::ParamTable& table, device::Device& device,
                                                          std::vector<ParamHome> homes, NvmeStateStore* nvme,
                                                          const ParamCoordinatorOptions& options);
  ~ParamCoordinator();
  ParamCoordinator(const ParamCoordinator&) = delete;
  ParamCoordinator& operator=(const ParamCoordinator&) = delete;

  // ParamSource (model/param_source.h). acquire() blocks the calling thread while a transfer it
  // depends on is not finished (counted as stall time); fails with the NVMe error naming the
  // parameter and path, or OutOfMemory naming zero.max_live_bytes.
  Result<Tensor> acquire(model::ParamId id);
  void release(model::ParamId id);
  void begin_phase(model::Phase phase);

  // The parameters changed (optimizer step, checkpoint load): every gathered copy is dropped.
  // Resident copies are the caller's to refresh. Precondition: nothing acquired.
  void invalidate();
  // Starts the first transfers of the next forward pass (after invalidate() and once the new
  // values are in their homes or being written there in order).
  Status prefetch_next_forward();

  // The NVMe extent of an NVMe-resident parameter, once its initial values are written (the
  // extents are made after the coordinator, which owns the resident copies they start from).
  void set_extent(model::ParamId id, NvmeStateStore::ExtentId extent) {
    homes_[static_cast<std::size_t>(id)].extent = extent;
  }

  // Resident parameters keep a device copy: persistent ones get theirs here. The device memory of
  // parameter id's resident copy, or nullptr when it is not resident (or lives on the device tier,
  // whose storage is its own copy).
  void* persistent_copy(model::ParamId id) const;
  bool persistent(model::ParamId id) const;

  void add_stats(EngineStats& stats) const;
  std::uint64_t live_peak_bytes() const { return live_.peak_owned_bytes(); }
  std::uint64_t staging_peak_bytes() const { return staging_.peak_owned_bytes(); }
  std::uint64_t persistent_bytes() const { return persistent_bytes_; }

 private:
  enum class State { kNotAvailable, kReading, kHost, kCopying, kAvailable };
  struct Slot {
    State state = State::kNotAvailable;
    device::DeviceBuffer device_copy;       // gathered parameter, storage precision
    std::unique_ptr<device::Event> copied;  // the host→device copy into device_copy is done
    device::DeviceBuffer host_copy;         // NVMe-resident parameters: the host staging of a read
    device::DeviceBuffer workspace;         // compute-dtype view while acquired (mixed on the CPU backend)
    device::DeviceBuffer resident;          // persistent copy
    bool in_use = false;
  };
  struct Trace {
    std::vector<model::ParamId> order;
    bool known = false;
  };

  ParamCoordinator(const model::ParamTable& table, device::Device& device, std::vector<ParamHome> homes,
                   NvmeStateStore* nvme, const ParamCoordinatorOptions& options);
  bool resident(model::ParamId id) const;
  void follow_trace(model::ParamId id);
  // Ends the current pass: a recorded order becomes known; a followed one that was cut short is trimmed.
  void close_pass();
  // The parameters expected next, in order, starting after the current position (crossing from
  // the forward into the backward order).
  template <typename Visit>
  void for_each_upcoming(Visit&& visit) const;
  Status start_read(model::ParamId id);
  Status finish_read(model::ParamId id);
  Status start_copy(model::ParamId id);
  // Frees cached copies not in use, farthest next use first, until `bytes` more fit the live budget.
  void evict_for(std::size_t bytes);
  void drop(model::ParamId id);
  Status prefetch();
  bool needed_soon(model::ParamId id) const;

  const model::ParamTable& table_;
  device::Device& device_;
  std::vector<ParamHome> homes_;
  NvmeStateStore* nvme_;
  ParamCoordinatorOptions options_;
  std::vector<Slot> slots_;
  BufferPool live_;        // device copies of gathered parameters
  BufferPool staging_;     // host staging of NVMe reads
  BufferPool workspaces_;  // compute-dtype views (not counted against the live budget)
  std::uint64_t persistent_bytes_ = 0;

  Trace traces_[2];  // by model::Phase
  model::Phase phase_ = model::Phase::kForward;
  bool in_pass_ = false;  // a phase has begun since the last invalidate()
  bool recording_ = false;
  std::size_t cursor_ = 0;  // position of the next acquire in traces_[phase_]
  int warnings_left_ = 3;

  EngineStats stats_;
};

}  // namespace zinf::zero
