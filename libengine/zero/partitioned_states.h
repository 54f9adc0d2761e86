// PartitionedStates: ZeRO stages 1-3 with ZeRO-Infinity's placement — every kind of model state
// partitioned over the ranks (partition.h) and placed on its own tier: parameters (storage
// precision) on the device, in CPU memory or on NVMe; gradients (storage precision) on the device or
// in CPU memory; the optimizer's fp32 master weights and Adam moments on the device, in CPU memory
// or on NVMe. It implements ModelStates (model_states.h): the trainer cannot tell it from ZeRO-0,
// and at one rank with the same arithmetic it gives the same bits.
//
// - Parameters reach the model through the ParamCoordinator (param_coordinator.h): resident on the
//   device tier, otherwise brought in ahead of use by the prefetcher under zero.max_live_bytes.
// - Each kind of state lives in a StateStore (state_store.h) of its tier; the optimizer states on
//   NVMe live in sub-groups of the optimizer pipeline instead.
// - Gradients (GradSink): the GradientReducer (gradient_reducer.h) hands out fp32 device buffers,
//   reduces them over the ranks a bucket at a time and sends this rank's slices to the gradient
//   store.
// - The optimizer step runs where the optimizer states live: the device's Ops on the device tier,
//   CPU Adam over host memory otherwise; NVMe-resident states stream through a three-buffer
//   pipeline of sub-groups (read ahead, step, write behind) whose size comes from the host budget.
//   A parameter larger than a sub-group is split into several (element ranges of its slice): its
//   read, step and write-behind pipeline like any others', and the host budget needs room for
//   three pieces and one copy of its new values, not three copies of its states.
//   New parameter values go back to their tier (and to resident device copies) after the step.
// - Checkpoints stream array by array (at most one sub-group of NVMe states in host memory).
//
// Everything is allocated at create(): a plan that cannot work in the device or host budget is
// refused there, naming the scenario field to change. Not thread-safe (the training loop's thread
// makes every call; NVMe I/O and transfers run on their own threads and streams behind them).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "libengine/comm/communicator.h"
#include "libengine/core/dtype.h"
#include "libengine/core/status.h"
#include "libengine/device/cpu_ops.h"
#include "libengine/device/device.h"
#include "libengine/io/io_engine.h"
#include "libengine/spec/optimizer_pipeline_shape.h"
#include "libengine/spec/zero_config.h"
#include "libengine/zero/buffer_pool.h"
#include "libengine/zero/gradient_reducer.h"
#include "libengine/zero/model_states.h"
#include "libengine/zero/nvme_state_store.h"
#include "libengine/zero/optimizer_worker.h"
#include "libengine/zero/param_coordinator.h"
#include "libengine/zero/partition.h"
#include "libengine/zero/state_store.h"

namespace zinf::zero {

struct PartitionedStatesOptions {
  DType precision = DType::kF32;      // storage precision of params and grads
  DType compute_dtype = DType::kF32;  // of the views acquire() hands out: fp32, or `precision`
  std::uint64_t seed = 0;             // initial values: ParamTable::init_values(seed, ...)
  spec::ZeroConfig zero;              // stage >= 1; tiers, paths and budgets (0 budgets are derived)
  // The data-parallel ranks: gathers parameters, reduce-scatters gradients, agrees on the gradient
  // norm. Null: one rank. Must outlive the states.
  comm::Communicator* comm = nullptr;
  std::unique_ptr<io::IoEngine> io_engine;  // tests: a fault-injecting engine for the NVMe tier
  std::function<void(const std::string&)> on_warning;
};

class PartitionedStates final : public ModelStates {
 public:
  // Allocates every state on its tier and initialises the parameters as ZeRO-0 does. Fails with
  // InvalidArgument naming the scenario field for a plan that cannot work (a budget too small for
  // the resident states, the prefetch buffers or the optimizer pipeline; stage 0, which is the
  // replicated engine's),
  // with the NVMe store's error for unusable paths, and with OutOfMemory naming the state that did
  // not fit. Nothing stays allocated or on disk then.
  static Result<std::unique_ptr<PartitionedStates>> create(const model::ParamTable& table, device::Device& device,
                                                           PartitionedStatesOptions options);
  ~PartitionedStates() override;
  PartitionedStates(const PartitionedStates&) = delete;
  PartitionedStates& operator=(const PartitionedStates&) = delete;

  Result<Tensor> acquire(model::ParamId id) override;
  void release(model::ParamId id) override { coordinator_->release(id); }
  void begin_phase(model::Phase phase) override;
  Result<Tensor> grad_buffer(model::ParamId id) override;
  Status commit(model::ParamId id) override;

  Status zero_grads() override;
  // Optimizer on the CPU or NVMe with zero.overlap_optimizer: starts this step's optimizer
  // pipeline — sub-groups' states are read from NVMe from now on, and when `optimizer` can plan
  // the step without the gradient norm (no clipping, no dynamic loss scaling) each sub-group is
  // stepped on the optimizer thread as soon as the backward pass has committed its gradients.
  // Nothing otherwise. optimizer_step() must follow with the same optimizer, lr and scaler.
  Status prepare_step(const optim::AdamOptimizer& optimizer, double lr, const optim::LossScaler& scaler) override;
  Result<optim::StepReport> optimizer_step(optim::AdamOptimizer& optimizer, double lr,
                                           optim::LossScaler& scaler) override;
  std::vector<CheckpointArrayInfo> checkpoint_layout() const override;
  Status save_checkpoint(CheckpointSink& sink) override;
  Status load_checkpoint(CheckpointSource& source) override;
  std::vector<StateBytes> state_bytes() const override;
  spec::StatePlacement placement() const override { return zero_.placement(); }
  EngineStats stats() const override;
  // The coordinator's recorded trace (ParamCoordinator::recorded_order).
  std::vector<model::ParamId> acquire_order(model::Phase phase) const override {
    return coordinator_->recorded_order(phase);
  }

  device::Device& device() const override { return device_; }
  const model::ParamTable& table() const override { return table_; }
  const Partition* partition() const override { return &partition_; }
  // The resolved budgets (derived where the configuration left 0) and the optimizer's sub-groups.
  const spec::ZeroConfig& resolved() const { return zero_; }
  std::size_t sub_group_count() const { return groups_.size(); }
  // One line for the start of a run: placement, budgets, NVMe store.
  std::string describe() const override;

 private:
  // The optimizer states of the flat element range [flat_begin, flat_end), moved as one NVMe extent:
  // either a run of whole parameters [first, last], or one piece of a parameter larger than a
  // sub-group (first == last; see piece_of()).
  struct SubGroup {
    model::ParamId first = 0;
    model::ParamId last = 0;
    std::int64_t flat_begin = 0;  // element range of the flat per-kind arrays
    std::int64_t flat_end = 0;
    NvmeStateStore::ExtentId extent = 0;
  };
  // Host buffers of one sub-group in the optimizer pipeline: [master | m | v] fp32, and the new
  // parameters in storage precision (mixed precision).
  struct PipelineSet {
    device::DeviceBuffer states;
    device::DeviceBuffer params_out;
    std::unique_ptr<device::Event> copies_done;  // host→device copies out of this set
    int group = -1;                              // the sub-group it holds, -1: none
    std::vector<model::ParamId> lent;            // parameters whose new values in params_out are on loan
    bool carried = false;                        // group is the last step's, its write behind maybe in flight
  };

  PartitionedStates(const model::ParamTable& table, device::Device& device, PartitionedStatesOptions& options);
  Status plan_and_allocate();
  // Declares to the NVMe store the host buffers its transfers name every step (the pipeline sets,
  // the new values of parameters on NVMe), so they skip per-transfer page pinning. A refusal
  // (locked-memory limit) is one warning; the transfers then work unregistered.
  void register_transfer_buffers();
  Status initialise();
  bool mixed() const { return precision_ != DType::kF32; }
  std::size_t storage_bytes(model::ParamId id) const;
  // The host copy of parameter id's storage-precision values after an update (`source`, host
  // memory) goes to the parameter's tier and its resident device copy.
  // `defer_gather`: a persistent copy's gather waits in deferred_gathers_ (see the pipeline).
  // `lend`: `source` stays unchanged until revoke_lent(id) is called before it changes (a pipeline
  // buffer), so the coordinator may keep it for the next forward pass without a copy.
  Status publish(model::ParamId id, const void* source, bool defer_gather = false, bool lend = false);
  // Parameters on the device tier updated there (optimizer on the device, checkpoint load): this
  // rank's new slice goes into the whole persistent copy and is gathered (stages 1 and 2 at
  // several ranks); nothing otherwise.
  void republish_device_slice(model::ParamId id);
  bool gathering() const { return comm_ != nullptr && comm_->world_size() > 1; }
  Status step_on_device(optim::AdamOptimizer& optimizer, const optim::StepPlan& plan);
  Status read_group(std::size_t group, PipelineSet& set);
  Status finish_set(PipelineSet& set);

  // The optimizer pipeline over host- or NVMe-resident states (optimizer_pipeline.cpp). Each
  // sub-group goes read (NVMe → a pipeline set) → stepped (CPU Adam on the optimizer thread) →
  // published (new parameters to their tier) and written behind (NVMe), in `order`. A sub-group is
  // stepped once the plan is known, its states are in host memory and its gradients are final.
  struct GroupRun {
    enum class Stage { kWaiting, kReading, kStepping, kWriting, kDone };
    Stage stage = Stage::kWaiting;
    std::int64_t uncommitted = 0;                // parameters whose gradient this step has not committed
    std::unique_ptr<device::Event> grads_ready;  // device-to-host stream: all its gradients are on the host
    bool grads_recorded = false;                 // grads_ready is recorded for this step's gradients
  };
  struct PublishItem {
    model::ParamId id = 0;
    const void* source = nullptr;  // host memory: the new storage-precision values
  };
  bool host_optimizer() const { return zero_.optimizer != spec::Tier::kDevice; }
  // Takes the sub-groups spec::shape_optimizer_pipeline() cut (their flat ranges are this rank's).
  void adopt_groups(const std::vector<spec::SubGroupRange>& ranges);
  void start_pipeline(const std::vector<std::size_t>& order, bool overlapped);
  // Moves every sub-group as far as it can go without blocking (block false: called from the
  // backward pass), or to the end (block true: the step's plan is known and the backward is over).
  Status advance_pipeline(bool block);
  // Sets the worker on the sub-group at position `position` of the order.
  Status submit_group(std::size_t position);
  // The worker finished the sub-group at `position`: its parameters go to their tier, its states
  // back to NVMe.
  Status finish_group(std::size_t position);
  bool set_settled(PipelineSet& set);
  bool grads_final(std::size_t group, bool block);
  // Stops the pipeline after a failure or a skipped step: the worker and every I/O into the sets
  // finish first. Returns `status`.
  Status abort_pipeline(Status status);
  // Waits for every set's writes and copies; the sets hold nothing afterwards. The first error.
  Status finish_sets();
  Status note_committed(model::ParamId id);
  Status check_not_stepped(model::ParamId id, std::string_view what) const;
  // Views of parameter id's states inside a pipeline set holding its sub-group.
  struct HostStates {
    Tensor master, exp_avg, exp_avg_sq;
  };
  // The elements [begin, begin + count) of parameter id's slice that sub-group `group` holds.
  struct Piece {
    std::int64_t begin = 0;
    std::int64_t count = 0;
  };
  Piece piece_of(std::size_t group, model::ParamId id) const;
  bool split(model::ParamId id) const {
    return group_first_[static_cast<std::size_t>(id)] != group_last_[static_cast<std::size_t>(id)];
  }
  // Views of parameter id's piece in the sub-group a set holds.
  HostStates set_states(const PipelineSet& set, model::ParamId id) const;
  HostStates host_states(model::ParamId id) const;  // optimizer on the cpu tier
  // Parameter id's three checkpoint arrays: the index in the layout, and `s` holding its elements
  // from `offset` on.
  struct CheckpointRange {
    std::size_t index = 0;
    std::size_t offset = 0;
    std::span<float> values;
  };
  std::array<CheckpointRange, 3> checkpoint_arrays_of(model::ParamId id, const HostStates& s,
                                                      std::int64_t offset = 0) const;
  Status after_step();

  const model::ParamTable& table_;
  device::Device& device_;
  comm::Communicator* comm_;
  DType precision_;
  DType compute_dtype_;
  std::uint64_t seed_;
  spec::ZeroConfig zero_;
  Partition partition_;
  std::unique_ptr<io::IoEngine> io_engine_;
  std::function<void(const std::string&)> on_warning_;
  device::CpuOps host_ops_;

  std::unique_ptr<NvmeStateStore> nvme_;
  std::unique_ptr<StateStore> params_;  // storage precision, on zero.params (state_store.h)
  std::unique_ptr<StateStore> grads_;   // storage precision, on zero.grads
  std::unique_ptr<StateStore> master_;  // fp32 on the device or host tier; null: the optimizer on NVMe (groups_)
  std::unique_ptr<StateStore> adam_m_;
  std::unique_ptr<StateStore> adam_v_;
  device::DeviceBuffer params_out_;       // optimizer on the cpu tier, mixed, params not on cpu: new half values
  std::vector<SubGroup> groups_;          // optimizer on NVMe
  std::vector<std::size_t> group_order_;  // the order the optimizer steps them in
  std::vector<PipelineSet> sets_;
  std::unique_ptr<ParamCoordinator> coordinator_;

  // The optimizer pipeline's state for the step in progress (host_optimizer() only).
  std::vector<std::size_t> overlap_order_;  // sub-groups in the order the backward pass finishes them
  std::vector<std::size_t> group_first_;    // parameter id -> its first sub-group
  std::vector<std::size_t> group_last_;     // ... and its last (several: a split parameter)
  // NVMe optimizer, parameters split over several sub-groups: the new values of the split parameter
  // being stepped, whole (each piece lands at its place; published with the last one), and the
  // host-to-device copies out of it. Reused by the next split parameter once those are done.
  device::DeviceBuffer split_out_;
  std::unique_ptr<device::Event> split_out_copied_;
  model::ParamId split_out_param_ = -1;
  // The split parameter of the last step whose NVMe write out of split_out_ may be in flight.
  model::ParamId split_out_written_ = -1;
  std::vector<int> pieces_left_;  // per parameter: its sub-groups not yet stepped this step
  std::vector<GroupRun> runs_;
  std::vector<PublishItem> publishing_;  // the parameters of the sub-group the worker steps
  std::vector<model::ParamId> deferred_gathers_;
  const std::vector<std::size_t>* pipeline_order_ = nullptr;  // null: no pipeline this step yet
  bool overlapped_ = false;                                   // started by prepare_step()
  bool backward_done_ = false;
  std::optional<optim::StepPlan> plan_;
  const optim::AdamOptimizer* step_optimizer_ = nullptr;
  double prepared_lr_ = 0;
  std::size_t read_position_ = 0;
  std::size_t step_position_ = 0;
  std::size_t stepping_ = 0;
  bool worker_busy_ = false;
  std::uint64_t elements_stepped_ = 0;  // cumulative (EngineStats)
  std::uint64_t elements_overlapped_ = 0;
  double overlapped_worker_seconds_ = 0;
  double worker_seconds_seen_ = 0;  // the worker's busy time when its last job was collected
  bool job_overlapped_ = false;     // the job on the worker began before the backward pass ended
  device::CpuOps worker_ops_;

  std::unique_ptr<GradientReducer> reducer_;  // the GradSink's work: buffers, buckets, copies to the host
  std::unique_ptr<device::Event> computed_;   // the compute stream's point a transfer waits for
  LinkBytes host_to_device_;
  // Last: destroyed first, so no job outlives the buffers it writes.
  std::unique_ptr<OptimizerWorker> worker_;
};

}  // namespace zinf::zero
