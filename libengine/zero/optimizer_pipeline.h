// OptimizerPipeline: the optimizer side of PartitionedStates (partitioned_states.h) — it owns the
// fp32 master weights and Adam moments of this rank's slices on their tier (zero.optimizer), runs
// the optimizer step where they live and sends the new parameter values back through the
// parameter store and the coordinator's ParamPublisher (param_publisher.h). Every branch on the optimizer's tier is
// here:
// - device: the master weights and moments are StateStores in device memory (state_store.h); the
//   step runs the device's Ops after the backward pass, parameter by parameter;
// - cpu: StateStores in host memory; CPU Adam on the optimizer thread (optimizer_worker.h), one
//   sub-group of parameters at a time, each published as soon as it is stepped;
// - nvme: one NVMe extent per sub-group ([master | m | v], fp32), streamed through a few host
//   pipeline sets: read ahead → step → publish and write behind (optimizer_pipeline.cpp). A
//   parameter larger than a sub-group is split into several (element ranges of its slice).
// With zero.overlap_optimizer on a host tier, prepare_step() starts the step's pipeline before the
// forward pass and each acquire()/commit() of the ParamSource/GradSink moves it along without
// blocking (the StepScheduler calls advance()); optimizer_step() runs it to the end. Sub-groups
// and pipeline sets come from spec/optimizer_pipeline_shape.h, which the planner calls too.
//
// Nothing here issues a collective during the backward pass: the gathers of persistent parameter
// copies wait for optimizer_step() and go out in the pipeline's order (docs/architecture.md §4).
//
// Lifetime: made by create() while PartitionedStates allocates (the host budget it sees decides
// the pipeline's shape), then connect()ed to the NVMe store, the coordinator's ParamPublisher and the gradient
// reducer, which are made after it. The parameter and gradient stores, the table, partition and
// device must outlive it. Thread-safety: one thread (the training loop's) makes every call; the
// optimizer thread only runs a sub-group's arithmetic, and the destructor waits for it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "libengine/core/dtype.h"
#include "libengine/core/status.h"
#include "libengine/device/cpu_ops.h"
#include "libengine/device/device.h"
#include "libengine/spec/optimizer_pipeline_shape.h"
#include "libengine/spec/zero_config.h"
#include "libengine/zero/engine_stats.h"
#include "libengine/zero/gradient_reducer.h"
#include "libengine/zero/model_states.h"
#include "libengine/zero/nvme_state_store.h"
#include "libengine/zero/optimizer_worker.h"
#include "libengine/zero/param_publisher.h"
#include "libengine/zero/partition.h"
#include "libengine/zero/state_store.h"

namespace zinf::zero {

class OptimizerPipeline {
 public:
  // Allocates the optimizer states' stores (device or cpu tier), the sub-groups, the host pipeline
  // sets and the optimizer thread. `zero` is resolved (its budgets derived); `params` and `grads`
  // are the parameter and gradient stores; `gathering`: several ranks. Fails with InvalidArgument
  // naming scenario.zero.host_memory when the pipeline does not fit what the host budget has left,
  // and as allocate_on_tier() for the stores; what was allocated is freed then.
  static Result<std::unique_ptr<OptimizerPipeline>> create(const model::ParamTable& table, const Partition& partition,
                                                           device::Device& device, const spec::ZeroConfig& zero,
                                                           DType precision, StateStore& params, StateStore& grads,
                                                           bool gathering);
  // Waits for the optimizer thread's job (it writes buffers owned here).
  ~OptimizerPipeline();
  // The same, without destroying anything: the owner calls it before it drains the transfers that
  // read this pipeline's buffers.
  void wait_for_worker() {
    if (worker_) worker_->wait();
  }
  OptimizerPipeline(const OptimizerPipeline&) = delete;
  OptimizerPipeline& operator=(const OptimizerPipeline&) = delete;

  // The NVMe bytes of the sub-groups' states ([master | m | v] fp32), and of the largest sub-group.
  // 0 unless the states live on NVMe (on the cpu tier they stay in host memory).
  std::uint64_t planned_nvme_bytes() const;
  std::uint64_t largest_nvme_transfer_bytes() const;
  // Declares to `nvme` the host buffers its transfers name every step (the pipeline sets, the new
  // values of parameters on NVMe), so they skip per-transfer page pinning. A refusal
  // (locked-memory limit) is one warning through `on_warning`; the transfers then work unregistered.
  void register_transfer_buffers(NvmeStateStore& nvme, const std::function<void(const std::string&)>& on_warning);
  // The parts made after this one. `nvme` is null without an NVMe store. All must outlive it.
  void connect(NvmeStateStore* nvme, ParamPublisher& publisher, GradientReducer& reducer);

  // Initial master weights of parameter id (this rank's slice, fp32 host memory, kept by the caller
  // until `compute` passes the copies); Adam moments start at zero. On NVMe a sub-group goes to its
  // new extent once its last parameter is in (fails with the NVMe store's error).
  // finish_initial_states() after the last parameter.
  Status put_initial_states(model::ParamId id, const float* values, device::Stream& compute);
  void finish_initial_states();

  // ParamSource/GradSink hooks, called by the StepScheduler (step_scheduler.h). check_not_stepped():
  // Internal, naming `what` and the parameter, when the overlapped pipeline has begun stepping a
  // sub-group of `id` this step (the model used it again after committing its gradient).
  // note_committed(): parameter id's gradient is committed (counted against its sub-groups; their
  // gradients are final once the reducer has stored them all). overlapping(): this step's pipeline
  // was started by prepare_step() and has not finished. advance(): moves every sub-group as far as
  // it can go without blocking — whether a read, a copy or the optimizer thread is done decides
  // how far, so it changes rank-local state only and issues no collective. Errors are the NVMe
  // store's; the pipeline keeps its state (abort comes at the step).
  Status check_not_stepped(model::ParamId id, std::string_view what) const;
  void note_committed(model::ParamId id);
  bool overlapping() const { return pipeline_order_ != nullptr && overlapped_; }
  Status advance() { return advance_pipeline(false); }

  // ModelStates::prepare_step() and optimizer_step() (model_states.h), without the step boundary
  // (the StepScheduler's). On a failure or a skipped step the pipeline is stopped (the thread's job and every transfer
  // into the sets finish) and the next step starts afresh.
  Status prepare_step(const optim::Optimizer& optimizer, double lr, const optim::LossScaler& scaler);
  Result<optim::StepReport> optimizer_step(optim::Optimizer& optimizer, double lr, optim::LossScaler& scaler);
  // The master, m and v arrays of the checkpoint layout (partitioned_checkpoint_layout()), streamed
  // parameter by parameter (at most one sub-group of NVMe states in host memory). A load also
  // republishes every parameter from its master weights; the step boundary (the StepScheduler's)
  // follows it.
  Status save_checkpoint(CheckpointSink& sink);
  Status load_checkpoint(CheckpointSource& source);

  // Appends master_params, adam_m, adam_v and the host buffers it owns (ModelStates::state_bytes()).
  void add_state_bytes(std::vector<StateBytes>& out) const;
  // The optimizer's counters: elements stepped (overlapped), worker seconds, host-to-device bytes.
  void add_stats(EngineStats& stats) const;
  // "; optimizer in N sub-groups ..." for PartitionedStates::describe(); empty on the device tier.
  std::string describe() const;
  std::size_t sub_group_count() const { return groups_.size(); }

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
  // Each sub-group goes read (NVMe → a pipeline set) → stepped (CPU Adam on the optimizer thread) →
  // published (new parameters to their tier) and written behind (NVMe), in the pipeline's order. A
  // sub-group is stepped once the plan is known, its states are in host memory and its gradients
  // are final.
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
  // Views of parameter id's states inside a pipeline set holding its sub-group.
  struct HostStates {
    Tensor master, exp_avg, exp_avg_sq;
  };
  // The elements [begin, begin + count) of parameter id's slice that sub-group `group` holds.
  struct Piece {
    std::int64_t begin = 0;
    std::int64_t count = 0;
  };
  // One of a piece's three checkpoint arrays: the index in the layout, and the piece's elements
  // from `offset` on.
  struct CheckpointRange {
    std::size_t index = 0;
    std::size_t offset = 0;
    std::span<float> values;
  };
  // The optimizer states on NVMe as a checkpoint streams them: sub-group by sub-group through the
  // first pipeline set (optimizer_checkpoint.cpp).
  class SubGroupStream;

  OptimizerPipeline(const model::ParamTable& table, const Partition& partition, device::Device& device,
                    const spec::ZeroConfig& zero, DType precision, StateStore& params, StateStore& grads,
                    bool gathering);
  Status allocate();
  bool mixed() const { return precision_ != DType::kF32; }
  // The optimizer states live in host memory or on NVMe: CPU Adam through the pipeline.
  bool host_optimizer() const { return zero_.optimizer != spec::Tier::kDevice; }
  // ... on NVMe: sub-groups streamed through the pipeline sets.
  bool states_on_nvme() const { return zero_.optimizer == spec::Tier::kNvme; }
  std::size_t storage_bytes(model::ParamId id) const;

  // The host copy of parameter id's storage-precision values after an update (`source`, host
  // memory) goes to the parameter's tier and its resident device copy.
  // `defer_gather`: a persistent copy's gather waits in deferred_gathers_ (see the pipeline).
  // `lend`: `source` stays unchanged until end_loan(id) is called before it changes (a pipeline
  // buffer), so the coordinator may keep it for the next forward pass without a copy.
  Status publish(model::ParamId id, const void* source, bool defer_gather = false, bool lend = false);
  // Parameters on the device tier updated there (optimizer on the device, checkpoint load): this
  // rank's new slice goes into the whole persistent copy and is gathered (stages 1 and 2 at
  // several ranks); nothing otherwise.
  void republish_device_slice(model::ParamId id);
  Status step_on_device(optim::Optimizer& optimizer, const optim::StepPlan& plan);
  Status read_group(std::size_t group, PipelineSet& set);
  Status finish_set(PipelineSet& set);

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
  Piece piece_of(std::size_t group, model::ParamId id) const;
  bool split(model::ParamId id) const {
    return group_first_[static_cast<std::size_t>(id)] != group_last_[static_cast<std::size_t>(id)];
  }
  // Views of parameter id's piece in the sub-group a set holds.
  HostStates set_states(const PipelineSet& set, model::ParamId id) const;
  HostStates host_states(model::ParamId id) const;  // optimizer on the cpu tier
  std::array<CheckpointRange, 3> checkpoint_arrays_of(const OptimizerStatesPiece& piece) const;
  std::unique_ptr<OptimizerStatesStream> make_sub_group_stream();

  const model::ParamTable& table_;
  const Partition& partition_;
  device::Device& device_;
  const spec::ZeroConfig zero_;
  const DType precision_;
  const bool gathering_;
  StateStore* params_;  // storage precision, on zero.params
  StateStore* grads_;   // storage precision, on zero.grads
  // connect():
  NvmeStateStore* nvme_ = nullptr;
  ParamPublisher* publisher_ = nullptr;  // the parameter coordinator's publish/loan side
  GradientReducer* reducer_ = nullptr;
  device::CpuOps host_ops_;

  std::unique_ptr<StateStore> master_;  // fp32 on the device or host tier; null: the optimizer on NVMe (groups_)
  std::unique_ptr<StateStore> adam_m_;
  std::unique_ptr<StateStore> adam_v_;
  device::DeviceBuffer params_out_;       // optimizer on the cpu tier, mixed, params not on cpu: new half values
  std::vector<SubGroup> groups_;          // optimizer on the host tiers
  std::vector<std::size_t> group_order_;  // the order the NVMe optimizer steps them in
  std::vector<PipelineSet> sets_;
  // How save_checkpoint() and load_checkpoint() reach the states: through the stores
  // (stream_by_parameter()) or the NVMe sub-groups (SubGroupStream).
  std::unique_ptr<OptimizerStatesStream> checkpoint_stream_;

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
  const optim::Optimizer* step_optimizer_ = nullptr;
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
  LinkBytes host_to_device_;
  // Last: destroyed first, so no job outlives the buffers it writes.
  std::unique_ptr<OptimizerWorker> worker_;
};

}  // namespace zinf::zero
