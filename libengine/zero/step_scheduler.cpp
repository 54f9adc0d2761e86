#include "libengine/zero/step_scheduler.h"

namespace zinf::zero {

Status StepScheduler::tick() {
  if (!optimizer_.overlapping()) return Status::ok();
  const CollectiveOrder::LocalOnly local(order_);
  return optimizer_.advance();
}

void StepScheduler::begin_phase(model::Phase phase) {
  event();
  if (nvme_ != nullptr) nvme_->set_phase(TrafficPhase::kForwardBackward);
  coordinator_.begin_phase(phase);
}

Result<Tensor> StepScheduler::acquire(model::ParamId id) {
  event();
  ZINF_RETURN_IF_ERROR(optimizer_.check_not_stepped(id, "acquire"));
  // Sub-groups whose gradients have reached the host since the last commit go to the optimizer
  // thread now rather than at the next commit.
  ZINF_RETURN_IF_ERROR(tick());
  // The coordinator's prefetch decisions are byte accounting over the recorded order (its windows
  // and pools), so the gathers it starts are issued in the same order on every rank.
  return coordinator_.acquire(id);
}

Result<Tensor> StepScheduler::grad_buffer(model::ParamId id) {
  ZINF_RETURN_IF_ERROR(optimizer_.check_not_stepped(id, "a gradient"));
  return reducer_.grad_buffer(id);
}

Status StepScheduler::commit(model::ParamId id) {
  event();
  // A bucket closes by byte count alone: its collective is program-ordered.
  ZINF_RETURN_IF_ERROR(reducer_.commit(id));
  optimizer_.note_committed(id);
  return tick();
}

Status StepScheduler::prepare_step(const optim::Optimizer& optimizer, double lr, const optim::LossScaler& scaler) {
  event();
  // Starting the pipeline only issues reads of the optimizer states (and, with the plan known,
  // steps sub-groups whose gradients are final): rank-local.
  const CollectiveOrder::LocalOnly local(order_);
  return optimizer_.prepare_step(optimizer, lr, scaler);
}

Result<optim::StepReport> StepScheduler::optimizer_step(optim::Optimizer& optimizer, double lr,
                                                        optim::LossScaler& scaler) {
  event();
  ZINF_ASSIGN_OR_RETURN(const optim::StepReport report, optimizer_.optimizer_step(optimizer, lr, scaler));
  ZINF_RETURN_IF_ERROR(step_boundary());
  return report;
}

Status StepScheduler::step_boundary() {
  // The step boundary. Copies out of host buffers and the gathers of persistent copies finish
  // before those buffers change again; the next forward pass's first transfers start now. The
  // parameters' NVMe writes go on into the forward pass: a read of a parameter is issued behind its
  // write and sees the new bytes (the store keeps each extent's order and serves the writes reads
  // wait for first), and whoever next fills a write's source buffer waits for that write.
  event();
  ZINF_RETURN_IF_ERROR(coordinator_.wait_published());
  return coordinator_.prefetch_next_forward();
}

}  // namespace zinf::zero
