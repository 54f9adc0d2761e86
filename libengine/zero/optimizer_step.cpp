// The optimizer step of OptimizerPipeline (optimizer_pipeline.h): the step runs where the
// optimizer states live — device Ops, CPU Adam over host arrays, or CPU Adam over NVMe-resident
// sub-groups streamed through the host pipeline sets (optimizer_pipeline.cpp) — and the new
// parameter values go back to their tier.
#include <array>
#include <cmath>
#include <span>
#include <utility>

#include <fmt/format.h>

#include "libengine/core/check.h"
#include "libengine/zero/optimizer_pipeline.h"

namespace zinf::zero {

Status OptimizerPipeline::publish(model::ParamId id, const void* source, bool defer_gather, bool lend) {
  device::Stream& h2d = device_.stream(device::StreamRole::kHostToDevice);
  ZINF_ASSIGN_OR_RETURN(const std::size_t to_device, params_->publish(id, source, h2d));
  host_to_device_.optimizer += to_device;
  host_to_device_.optimizer += publisher_->publish(id, source, {.defer_gather = defer_gather, .lend = lend});
  if (defer_gather) deferred_gathers_.push_back(id);
  return Status::ok();
}

void OptimizerPipeline::republish_device_slice(model::ParamId id) {
  publisher_->publish_from_device(id, params_->slice(id).data());
}

Status OptimizerPipeline::prepare_step(const optim::Optimizer& optimizer, double lr, const optim::LossScaler& scaler) {
  if (!host_optimizer() || !zero_.overlap_optimizer) return Status::ok();
  // Stepping sub-groups while the backward pass commits gradients needs the plan now; without it
  // (clipping, dynamic loss scaling) only the reads of the optimizer states run ahead.
  start_pipeline(overlap_order_, true);
  plan_ = optimizer.plan_without_norm(lr, scaler);
  step_optimizer_ = &optimizer;
  prepared_lr_ = lr;
  return advance_pipeline(false);
}

Result<optim::StepReport> OptimizerPipeline::optimizer_step(optim::Optimizer& optimizer, double lr,
                                                            optim::LossScaler& scaler) {
  const device::ProfilerRange range(device_, "optimizer");
  ZINF_CHECK(pipeline_order_ == nullptr || (step_optimizer_ == &optimizer && prepared_lr_ == lr),
             "optimizer_step: not the optimizer and learning rate prepare_step() was given");
  // Every gradient must have been reduced and reached its tier, and no gathered copy may outlive
  // the old values.
  const auto fail = [&](Status status) { return abort_pipeline(std::move(status)); };
  if (Status s = reducer_->finish_backward(); !s.is_ok()) return fail(s);
  publisher_->invalidate();
  if (host_optimizer()) {
    if (pipeline_order_ == nullptr) {
      // DeepSpeed's order: the whole step after the backward pass. The first sub-groups' reads do
      // not depend on the gradient norm: they overlap it.
      start_pipeline(states_on_nvme() ? group_order_ : overlap_order_, false);
      step_optimizer_ = &optimizer;
      if (nvme_) nvme_->set_phase(TrafficPhase::kOptimizer);
      Status reading = advance_pipeline(false);
      if (nvme_) nvme_->set_phase(TrafficPhase::kForwardBackward);
      if (!reading.is_ok()) return fail(reading);
    }
    backward_done_ = true;
  }
  Result<double> summed = reducer_->sum_squares(host_ops_);
  if (!summed.is_ok()) return fail(summed.status());
  const double sum_squares = summed.value();
  // A failed kernel also reads as NaN (Ops' contract): report that, not a gradient overflow.
  if (!std::isfinite(sum_squares)) {
    if (Status s = device_.synchronize(); !s.is_ok()) return fail(s);
  }
  Result<optim::StepPlan> planned = optimizer.begin_step(lr, sum_squares, scaler);
  if (!planned.is_ok()) return fail(planned.status());
  const optim::StepPlan plan = planned.value();
  if (!plan.apply) {
    // No step: the reads issued ahead are drained (their buffers are reused next step).
    ZINF_CHECK(!plan_, "optimizer_step: a step planned without the norm was skipped");
    ZINF_RETURN_IF_ERROR(abort_pipeline(Status::ok()));
    return plan.report;
  }
  if (plan_) {
    // The sub-groups stepped during the backward pass used this plan: the same bits.
    ZINF_CHECK(plan_->same_update(plan),
               "optimizer_step: the plan made before the gradient norm differs from begin_step()'s");
  }
  plan_ = plan;
  if (nvme_) nvme_->set_phase(TrafficPhase::kOptimizer);
  Status stepped = host_optimizer() ? advance_pipeline(true) : step_on_device(optimizer, plan);
  if (nvme_) nvme_->set_phase(TrafficPhase::kForwardBackward);
  plan_.reset();
  if (!stepped.is_ok()) return fail(stepped);
  optim::Optimizer::end_step(plan, scaler);
  return plan.report;
}

Status OptimizerPipeline::step_on_device(optim::Optimizer& optimizer, const optim::StepPlan& plan) {
  device::Ops& ops = device_.ops();
  for (model::ParamId id = 0; id < table_.size(); ++id) {
    const Tensor params = params_->slice(id);
    const Tensor grad = grads_->slice(id);
    const Tensor master = master_->slice(id);
    const std::array<Tensor, optim::kMaxStateSlots> slots{adam_m_->slice(id), adam_v_->slice(id)};
    optimizer.step_slice(ops, plan, table_[id].weight_decay, master,
                         std::span<const Tensor>(slots).first(static_cast<std::size_t>(optimizer.state_slots())), grad,
                         mixed() ? &params : nullptr);
    if (!mixed()) ops.copy(params, master);
    republish_device_slice(id);
  }
  return Status::ok();
}

Status OptimizerPipeline::read_group(std::size_t group, PipelineSet& set) {
  // The set's previous contents must be on their way out first: its writes (the sub-group's states,
  // parameter rewrites) and the copies that read it.
  ZINF_RETURN_IF_ERROR(finish_set(set));
  const SubGroup& g = groups_[group];
  set.group = static_cast<int>(group);
  // Read ahead: the parameter reads of the forward and backward passes go first; the pipeline's
  // wait() for the sub-group (advance_pipeline, finish_set) makes it needed when it is.
  return nvme_->start_read(g.extent,
                           std::span<std::byte>(static_cast<std::byte*>(set.states.data()),
                                                static_cast<std::size_t>(g.flat_end - g.flat_begin) * 12),
                           io::IoPriority::kAhead);
}

Status OptimizerPipeline::finish_set(PipelineSet& set) {
  if (set.group < 0) return Status::ok();
  const SubGroup& g = groups_[static_cast<std::size_t>(set.group)];
  ZINF_RETURN_IF_ERROR(set.copies_done->synchronize());
  Status status = nvme_->wait(g.extent);
  for (model::ParamId id = g.first; id <= g.last; ++id) {
    Status written = params_->wait(id);
    if (status.is_ok()) status = std::move(written);
  }
  set.group = -1;
  set.carried = false;
  return status;
}

}  // namespace zinf::zero
