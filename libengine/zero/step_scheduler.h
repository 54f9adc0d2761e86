// StepScheduler: what runs when on the training thread of the partitioned states. The training
// loop drives the engine through ParamSource/GradSink calls and the step; there is no event loop
// of its own, so those calls are the events, and this object is the one place that turns them
// into work:
//   - a parameter is needed (acquire): the overlapped optimizer pipeline moves along first (a
//     sub-group whose gradients reached the host since the last event goes to the optimizer
//     thread), then the ParamCoordinator hands the parameter out and prefetches what follows it;
//   - a gradient is complete (commit): the GradientReducer sends it on its way (a bucket closes by
//     byte count), the pipeline counts it against its sub-groups and moves along;
//   - a phase begins: the coordinator follows or records that pass's order;
//   - the step: prepare_step() starts the pipeline's reads before the forward pass,
//     optimizer_step() runs it to the end, and at the step boundary the new values' copies and
//     gathers finish and the next forward pass's first transfers start.
//
// The collective-order rule (collective_order.h) is enforced here: every event is counted in
// program order, and every decision that reads timing — the pipeline's non-blocking advance,
// which asks whether reads, copies and the optimizer thread are done — runs inside a
// CollectiveOrder::LocalOnly scope, where issuing a collective stops the process. The decisions
// that issue collectives (bucket closes, gathers, the look-ahead vote, the norm) are taken outside
// those scopes, from byte accounting and program order.
//
// Lifetime: the parts it schedules (and `order`, null at one rank) must outlive it. Not
// thread-safe: the training loop's thread makes every call.
#pragma once

#include "libengine/core/status.h"
#include "libengine/model/param_table.h"
#include "libengine/tensor/tensor.h"
#include "libengine/zero/collective_order.h"
#include "libengine/zero/gradient_reducer.h"
#include "libengine/zero/nvme_state_store.h"
#include "libengine/zero/optimizer_pipeline.h"
#include "libengine/zero/param_coordinator.h"

namespace zinf::zero {

class StepScheduler {
 public:
  // `nvme` is null without an NVMe store (it only labels the traffic of each phase).
  StepScheduler(ParamCoordinator& coordinator, GradientReducer& reducer, OptimizerPipeline& optimizer,
                NvmeStateStore* nvme, CollectiveOrder* order)
      : coordinator_(coordinator), reducer_(reducer), optimizer_(optimizer), nvme_(nvme), order_(order) {}
  StepScheduler(const StepScheduler&) = delete;
  StepScheduler& operator=(const StepScheduler&) = delete;

  // ParamSource and GradSink (model/param_source.h, model/grad_sink.h), as PartitionedStates
  // documents them. Errors are the coordinator's, the reducer's or the NVMe store's; the pipeline
  // keeps its state on a failure (the step aborts it).
  void begin_phase(model::Phase phase);
  Result<Tensor> acquire(model::ParamId id);
  void release(model::ParamId id) { coordinator_.release(id); }
  Result<Tensor> grad_buffer(model::ParamId id);
  Status commit(model::ParamId id);

  // ModelStates::prepare_step() and optimizer_step(). After a step (applied or skipped) the step
  // boundary: the published values' copies and gathers finish and the next forward pass's first
  // transfers start (with the look-ahead vote, a host collective at several ranks).
  Status prepare_step(const optim::Optimizer& optimizer, double lr, const optim::LossScaler& scaler);
  Result<optim::StepReport> optimizer_step(optim::Optimizer& optimizer, double lr, optim::LossScaler& scaler);
  // The step boundary on its own: after a checkpoint load has republished every parameter. The
  // coordinator's error (a copy, a gather, the look-ahead vote).
  Status step_boundary();

 private:
  // One program-order event.
  void event() {
    if (order_ != nullptr) order_->note_event();
  }
  // The overlapped optimizer pipeline moves as far as it can without blocking: a timing-driven
  // decision, so rank-local only.
  Status tick();

  ParamCoordinator& coordinator_;
  GradientReducer& reducer_;
  OptimizerPipeline& optimizer_;
  NvmeStateStore* nvme_;
  CollectiveOrder* order_;
};

}  // namespace zinf::zero
