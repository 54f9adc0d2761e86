// PartitionedStates: ZeRO stages 1-3 with ZeRO-Infinity's placement — every kind of model state
// partitioned over the ranks (partition.h) and placed on its own tier: parameters (storage
// precision) on the device, in CPU memory or on NVMe; gradients (storage precision) on the device or
// in CPU memory; the optimizer's fp32 master weights and Adam moments on the device, in CPU memory
// or on NVMe. It implements ModelStates (model_states.h): the trainer cannot tell it from ZeRO-0,
// and at one rank with the same arithmetic it gives the same bits.
//
// - Parameters reach the model through the ParamCoordinator (param_coordinator.h): resident on the
//   device tier, otherwise brought in ahead of use by the prefetcher under zero.max_live_bytes.
// - Parameters and gradients each live in a StateStore (state_store.h) of their tier.
// - Gradients (GradSink): the GradientReducer (gradient_reducer.h) hands out fp32 device buffers,
//   reduces them over the ranks a bucket at a time and sends this rank's slices to the gradient
//   store.
// - The optimizer states and the step belong to the OptimizerPipeline (optimizer_pipeline.h): it
//   runs where the optimizer states live — the device's Ops on the device tier, CPU Adam over host
//   memory otherwise; NVMe-resident states stream through a pipeline of sub-groups (read ahead,
//   step, write behind) whose size comes from the host budget — and sends the new parameter values
//   back to their tier (and to resident device copies).
// - What runs when on the training thread — the pipeline moving along at each acquire and commit,
//   prefetching, the step boundary — is the StepScheduler's (step_scheduler.h), which also
//   enforces the collective-order rule (collective_order.h).
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
#include "libengine/zero/collective_order.h"
#include "libengine/zero/gradient_reducer.h"
#include "libengine/zero/model_states.h"
#include "libengine/zero/nvme_state_store.h"
#include "libengine/zero/optimizer_pipeline.h"
#include "libengine/zero/param_coordinator.h"
#include "libengine/zero/partition.h"
#include "libengine/zero/state_store.h"
#include "libengine/zero/step_scheduler.h"

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
  void release(model::ParamId id) override { scheduler_->release(id); }
  void begin_phase(model::Phase phase) override;
  Result<Tensor> grad_buffer(model::ParamId id) override;
  Status commit(model::ParamId id) override;

  Status zero_grads() override;
  // Optimizer on the CPU or NVMe with zero.overlap_optimizer: starts this step's optimizer
  // pipeline — sub-groups' states are read from NVMe from now on, and when `optimizer` can plan
  // the step without the gradient norm (no clipping, no dynamic loss scaling) each sub-group is
  // stepped on the optimizer thread as soon as the backward pass has committed its gradients.
  // Nothing otherwise. optimizer_step() must follow with the same optimizer, lr and scaler.
  Status prepare_step(const optim::Optimizer& optimizer, double lr, const optim::LossScaler& scaler) override;
  Result<optim::StepReport> optimizer_step(optim::Optimizer& optimizer, double lr, optim::LossScaler& scaler) override;
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
  // Null at one rank without a communicator.
  CollectiveOrder* collective_order() override { return order_.get(); }

  device::Device& device() const override { return device_; }
  const model::ParamTable& table() const override { return table_; }
  const Partition* partition() const override { return &partition_; }
  // The resolved budgets (derived where the configuration left 0) and the optimizer's sub-groups.
  const spec::ZeroConfig& resolved() const { return zero_; }
  std::size_t sub_group_count() const { return optimizer_->sub_group_count(); }
  // One line for the start of a run: placement, budgets, NVMe store.
  std::string describe() const override;

 private:
  PartitionedStates(const model::ParamTable& table, device::Device& device, PartitionedStatesOptions& options);
  Status plan_and_allocate();
  Status initialise();
  bool mixed() const { return precision_ != DType::kF32; }
  std::size_t storage_bytes(model::ParamId id) const;
  bool gathering() const { return comm_ != nullptr && comm_->world_size() > 1; }

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
  // The optimizer states and step on zero.optimizer (optimizer_pipeline.h). Destroyed before the
  // stores its optimizer thread's job reads.
  std::unique_ptr<OptimizerPipeline> optimizer_;
  // comm_ as the coordinator and the reducer see it: every collective checked against the
  // collective-order rule. Null at one rank without a communicator.
  std::unique_ptr<CollectiveOrder> order_;
  std::unique_ptr<ParamCoordinator> coordinator_;
  std::unique_ptr<GradientReducer> reducer_;  // the GradSink's work: buffers, buckets, copies to the host
  std::unique_ptr<StepScheduler> scheduler_;  // what runs when (ParamSource, GradSink and step calls)
};

}  // namespace zinf::zero
