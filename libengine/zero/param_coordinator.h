// ParamCoordinator: the ParamSource of the partitioned states — brings each parameter from where
// its slice lives to the device ahead of the operator that needs it, and lets it go after.
//
// Life cycle of a parameter (docs/architecture.md §4), per slot:
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
// Adaptive look-ahead: both windows start at a quarter of their budget (at least the two largest
// gathered parameters near, two of the largest NVMe reads far) and double, up to the budget, after
// every step whose compute thread stalled for more than 1% of its time; they never shrink, so they
// settle at the depth the run needs and EngineStats reports it. At several ranks the ranks agree
// on growing (a host all-reduce at the step boundary): the near window decides when gathers start,
// and every rank must issue them in the same order.
//
// Not thread-safe: the training loop's thread makes every call.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "libengine/comm/communicator.h"
#include "libengine/core/status.h"
#include "libengine/device/device.h"
#include "libengine/model/param_source.h"
#include "libengine/model/param_table.h"
#include "libengine/spec/state_placement.h"
#include "libengine/zero/buffer_pool.h"
#include "libengine/zero/engine_stats.h"
#include "libengine/zero/nvme_state_store.h"
#include "libengine/zero/param_home.h"
#include "libengine/zero/param_publisher.h"

namespace zinf::zero {

struct ParamCoordinatorOptions {
  DType precision = DType::kF32;      // storage precision of the parameters
  DType compute_dtype = DType::kF32;  // of the views acquire() hands out
  std::uint64_t max_live_bytes = 0;   // device bytes of gathered (non-resident) parameter copies
  std::uint64_t prefetch_bytes = 0;   // host staging for NVMe reads in flight
  std::int64_t persistence_threshold = 0;
  std::function<void(const std::string&)> on_warning;
  // Gathers the ranks' slices into whole parameters (all-gather on the collective stream); null or a
  // world of one: a rank's slice is the whole parameter. Must outlive the coordinator.
  comm::Communicator* comm = nullptr;
};

class ParamCoordinator final : public ParamPublisher {
 public:
  // `homes` says where each parameter lives (asked when needed: NVMe extents are written after
  // this); `table`, `homes`, `device` and `nvme` (may be null when no parameter is on NVMe) must
  // outlive the coordinator. Allocates the resident copies of persistent
  // parameters (filled by refresh_resident()). OutOfMemory names what did not fit.
  static Result<std::unique_ptr<ParamCoordinator>> create(const model::ParamTable& table, device::Device& device,
                                                          const ParamHomes& homes, NvmeStateStore* nvme,
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

  // ParamPublisher (param_publisher.h): the optimizer's side. invalidate(): the gathered copies
  // are dropped, but for the values publish() kept since the last step (resident copies are
  // refreshed by publish()). publish() keeps an NVMe-resident parameter's new values (copied into
  // host staging when it has room, or on loan) when the next forward pass needs it within
  // prefetch_bytes of NVMe parameters from its start: the optimizer writes the first layers'
  // parameters last, and the forward pass needs them first. With defer_gather the optimizer
  // overlapped with the backward pass publishes at times that differ between ranks, and gathers
  // wait for gather(), issued in the pipeline's order.
  std::size_t publish(model::ParamId id, const void* host_values, Publish how) override;
  void publish_from_device(model::ParamId id, const void* device_slice) override;
  void gather(model::ParamId id) override;
  void end_loan(model::ParamId id) override;
  void invalidate() override;
  Status wait_published() override;

  // Starts the first transfers of the next forward pass (after invalidate() and once the new
  // values are in their homes or being written there in order). Once per step: the look-ahead
  // grows here when the step stalled (agreed over the ranks: a host collective on every rank).
  Status prefetch_next_forward();

  // True when parameter id has a persistent device copy (not for parameters on the device tier at
  // one rank, whose storage is their own copy).
  bool persistent(model::ParamId id) const;

  // The acquire order of `phase` as recorded (on the first step, or since a mismatch re-recorded
  // it): every acquire, resident parameters included, in call order. Complete once the phase's pass
  // has ended (the next begin_phase, invalidate or prefetch_next_forward closes it); the ranks
  // compare it after their first step (train/order_agreement.h).
  const std::vector<model::ParamId>& recorded_order(model::Phase phase) const {
    return traces_[static_cast<std::size_t>(phase)].order;
  }

  void add_stats(EngineStats& stats) const;
  std::uint64_t live_peak_bytes() const { return live_.peak_owned_bytes(); }
  std::uint64_t staging_peak_bytes() const { return staging_.peak_owned_bytes(); }
  std::uint64_t persistent_bytes() const { return persistent_bytes_; }

 private:
  enum class State { kNotAvailable, kReading, kHost, kCopying, kAvailable };
  struct Slot {
    State state = State::kNotAvailable;
    device::DeviceBuffer device_copy;       // gathered parameter, storage precision (every rank's slice)
    std::unique_ptr<device::Event> copied;  // the host→device copy into device_copy (and its gather) is done
    std::unique_ptr<device::Event> staged;  // gathering: this rank's slice is in device_copy
    device::DeviceBuffer host_copy;         // NVMe-resident parameters: the host staging of a read
    const void* lent = nullptr;             // or the caller's new values, on loan (publish)
    bool copy_from_lent = false;            // the last host-to-device copy read `lent` (end_loan waits)
    device::DeviceBuffer workspace;         // compute-dtype view while acquired (mixed on the CPU backend)
    device::DeviceBuffer resident;          // persistent copy
    bool in_use = false;
    bool kept_across_invalidate = false;  // host_copy holds new values staged before invalidate()
  };
  struct Trace {
    std::vector<model::ParamId> order;
    bool known = false;
  };

  ParamCoordinator(const model::ParamTable& table, device::Device& device, const ParamHomes& homes,
                   NvmeStateStore* nvme, const ParamCoordinatorOptions& options);
  bool resident(model::ParamId id) const;
  bool gathering() const { return options_.comm != nullptr && options_.comm->world_size() > 1; }
  // Whether `bytes` more may be taken from `pool` now. Gathering, by the pool's accounting only
  // (BufferPool::fits): every decision that issues a collective must be the same on every rank.
  bool room(BufferPool& pool, std::size_t bytes) { return gathering() ? pool.fits(bytes) : pool.can_take(bytes); }
  // Bytes of the whole gathered parameter (every rank's padded slice) and of this rank's offset in it.
  std::size_t gathered_bytes(model::ParamId id) const;
  std::size_t slice_offset_bytes(model::ParamId id) const;
  // Gathering: after `from` (on the stream it was recorded on) the ranks' slices of parameter id
  // are all-gathered into `copy` in place; `done` marks the end on the collective stream.
  void gather_into(model::ParamId id, void* copy, device::Event& from, device::Event& done);
  // Writes this rank's new slice of persistent parameter id into its device copy (host-to-device
  // stream) and, with `gather`, gathers the other ranks' slices into it (collective stream).
  std::size_t publish_persistent_copy(model::ParamId id, const void* slice, device::CopyKind kind, bool gather);
  // Keeps an NVMe-resident parameter's new values for the next forward pass (see publish()).
  void stage_published(model::ParamId id, const void* values, bool lend);
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
  // The host values of an NVMe parameter: its staging copy or the caller's values on loan.
  static const void* host_values(const Slot& slot) { return slot.lent != nullptr ? slot.lent : slot.host_copy.data(); }
  Status prefetch();
  bool needed_soon(model::ParamId id) const;
  // Recomputes early_in_forward_ from the forward order (once per forward pass, at its end).
  void mark_early_in_forward();
  // Doubles the windows (up to their budgets) when the compute thread stalled for more than 1% of
  // the time since the last call.
  Status adapt_look_ahead();

  const model::ParamTable& table_;
  device::Device& device_;
  const ParamHomes& homes_;
  std::unique_ptr<device::Event> computed_;  // publish_from_device(): the compute stream's point
  NvmeStateStore* nvme_;
  ParamCoordinatorOptions options_;
  std::vector<Slot> slots_;
  BufferPool live_;        // device copies of gathered parameters
  BufferPool staging_;     // host staging of NVMe reads
  BufferPool workspaces_;  // compute-dtype views (not counted against the live budget)
  std::uint64_t persistent_bytes_ = 0;
  std::uint64_t near_window_bytes_ = 0;  // host->device copies (and gathers) issued ahead
  std::uint64_t far_window_bytes_ = 0;   // NVMe reads issued ahead
  double stall_seconds_seen_ = 0;
  std::chrono::steady_clock::time_point last_adapt_{};

  Trace traces_[2];  // by model::Phase
  model::Phase phase_ = model::Phase::kForward;
  bool in_pass_ = false;      // a phase has begun since the last invalidate()
  bool invalidated_ = false;  // invalidate() ran since the last prefetch_next_forward()
  // By parameter: its new values go to host staging when published (publish()); valid while
  // traces_[kForward] is known.
  std::vector<bool> early_in_forward_;
  bool recording_ = false;
  std::size_t cursor_ = 0;  // position of the next acquire in traces_[phase_]
  int warnings_left_ = 3;

  EngineStats stats_;
};

}  // namespace zinf::zero
