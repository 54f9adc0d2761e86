// The optimizer step and checkpoint streaming of PartitionedStates (partitioned_states.h): the step
// runs where the optimizer states live — device Ops, CPU Adam over host arrays, or CPU Adam over
// NVMe-resident sub-groups streamed through three host buffers (read ahead, step, write behind) —
// and the new parameter values go back to their tier.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <span>
#include <utility>

#include <fmt/format.h>

#include "libengine/core/check.h"
#include "libengine/zero/partitioned_states.h"

namespace zinf::zero {

Status PartitionedStates::publish(model::ParamId id, const void* source, bool defer_gather, bool lend) {
  device::Stream& h2d = device_.stream(device::StreamRole::kHostToDevice);
  ZINF_ASSIGN_OR_RETURN(const std::size_t to_device, params_->publish(id, source, h2d));
  host_to_device_.optimizer += to_device;
  if (params_->on_nvme()) coordinator_->stage_published(id, source, lend);
  if (coordinator_->persistent(id)) {
    host_to_device_.optimizer += coordinator_->publish_persistent(id, source, !defer_gather);
    if (defer_gather) deferred_gathers_.push_back(id);
  }
  return Status::ok();
}

void PartitionedStates::republish_device_slice(model::ParamId id) {
  if (!coordinator_->persistent(id)) return;
  // The slice was written on the compute stream; the copy into the persistent copy follows it.
  device_.stream(device::StreamRole::kCompute).record(*computed_);
  device_.stream(device::StreamRole::kHostToDevice).wait(*computed_);
  coordinator_->publish_persistent_from_device(id, params_->slice(id).data());
}

Status PartitionedStates::prepare_step(const optim::AdamOptimizer& optimizer, double lr,
                                       const optim::LossScaler& scaler) {
  if (!host_optimizer() || !zero_.overlap_optimizer) return Status::ok();
  // Stepping sub-groups while the backward pass commits gradients needs the plan now; without it
  // (clipping, dynamic loss scaling) only the reads of the optimizer states run ahead.
  start_pipeline(overlap_order_, true);
  plan_ = optimizer.plan_without_norm(lr, scaler);
  step_optimizer_ = &optimizer;
  prepared_lr_ = lr;
  return advance_pipeline(false);
}

Result<optim::StepReport> PartitionedStates::optimizer_step(optim::AdamOptimizer& optimizer, double lr,
                                                            optim::LossScaler& scaler) {
  const device::ProfilerRange range(device_, "optimizer");
  ZINF_CHECK(pipeline_order_ == nullptr || (step_optimizer_ == &optimizer && prepared_lr_ == lr),
             "optimizer_step: not the optimizer and learning rate prepare_step() was given");
  // Every gradient must have been reduced and reached its tier, and no gathered copy may outlive
  // the old values.
  const auto fail = [&](Status status) { return abort_pipeline(std::move(status)); };
  if (Status s = reducer_->finish_backward(); !s.is_ok()) return fail(s);
  coordinator_->invalidate();
  if (host_optimizer()) {
    if (pipeline_order_ == nullptr) {
      // DeepSpeed's order: the whole step after the backward pass. The first sub-groups' reads do
      // not depend on the gradient norm: they overlap it.
      start_pipeline(zero_.optimizer == spec::Tier::kNvme ? group_order_ : overlap_order_, false);
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
    ZINF_RETURN_IF_ERROR(after_step());
    return plan.report;
  }
  if (plan_) {
    // The sub-groups stepped during the backward pass used this plan: the same bits.
    const kernels::AdamHyper& a = plan_->hyper;
    const kernels::AdamHyper& b = plan.hyper;
    ZINF_CHECK(a.lr == b.lr && a.step == b.step && a.grad_scale == b.grad_scale && a.beta1 == b.beta1 &&
                   a.beta2 == b.beta2 && a.eps == b.eps && a.decoupled_weight_decay == b.decoupled_weight_decay,
               "optimizer_step: the plan made before the gradient norm differs from begin_step()'s");
  }
  plan_ = plan;
  if (nvme_) nvme_->set_phase(TrafficPhase::kOptimizer);
  Status stepped = host_optimizer() ? advance_pipeline(true) : step_on_device(optimizer, plan);
  if (nvme_) nvme_->set_phase(TrafficPhase::kForwardBackward);
  plan_.reset();
  if (!stepped.is_ok()) return fail(stepped);
  optim::AdamOptimizer::end_step(plan, scaler);
  ZINF_RETURN_IF_ERROR(after_step());
  return plan.report;
}

Status PartitionedStates::after_step() {
  // Copies out of host buffers and the gathers of persistent copies finish before those buffers
  // change again; the next forward pass's first transfers start now. The parameters' NVMe writes go
  // on into the forward pass: a read of a parameter is issued behind its write and sees the new
  // bytes (the store keeps each extent's order and serves the writes reads wait for first), and
  // whoever next fills a write's source buffer waits for that write (finish_set, submit_group).
  ZINF_RETURN_IF_ERROR(coordinator_->wait_published());
  return coordinator_->prefetch_next_forward();
}

Status PartitionedStates::step_on_device(optim::AdamOptimizer& optimizer, const optim::StepPlan& plan) {
  device::Ops& ops = device_.ops();
  for (model::ParamId id = 0; id < table_.size(); ++id) {
    const Tensor params = params_->slice(id);
    const Tensor grad = grads_->slice(id);
    const Tensor master = master_->slice(id);
    optimizer.step_slice(ops, plan, table_[id].weight_decay, master, adam_m_->slice(id), adam_v_->slice(id), grad,
                         mixed() ? &params : nullptr);
    if (!mixed()) ops.copy(params, master);
    republish_device_slice(id);
  }
  return Status::ok();
}

Status PartitionedStates::read_group(std::size_t group, PipelineSet& set) {
  // The set's previous contents must be on their way out first: its writes (the sub-group's states,
  // parameter rewrites) and the copies that read it.
  ZINF_RETURN_IF_ERROR(finish_set(set));
  const SubGroup& g = groups_[group];
  set.group = static_cast<int>(group);
  return nvme_->start_read(g.extent, std::span<std::byte>(static_cast<std::byte*>(set.states.data()),
                                                          static_cast<std::size_t>(g.flat_end - g.flat_begin) * 12));
}

Status PartitionedStates::finish_set(PipelineSet& set) {
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

std::vector<CheckpointArrayInfo> PartitionedStates::checkpoint_layout() const {
  return partitioned_checkpoint_layout(table_, partition_);
}

std::array<PartitionedStates::CheckpointRange, 3> PartitionedStates::checkpoint_arrays_of(model::ParamId id,
                                                                                          const HostStates& s,
                                                                                          std::int64_t offset) const {
  // standard_checkpoint_layout(): every master, then every m, then every v.
  const auto count = static_cast<std::size_t>(table_.size());
  const auto index = static_cast<std::size_t>(id);
  const auto at = static_cast<std::size_t>(offset);
  const auto span_of = [](const Tensor& t) { return std::span<float>(t.f32(), static_cast<std::size_t>(t.numel())); };
  return {{{index, at, span_of(s.master)},
           {count + index, at, span_of(s.exp_avg)},
           {2 * count + index, at, span_of(s.exp_avg_sq)}}};
}

Status PartitionedStates::save_checkpoint(CheckpointSink& sink) {
  const auto write_param = [&](model::ParamId id, const HostStates& s, std::int64_t offset = 0) -> Status {
    for (const CheckpointRange& range : checkpoint_arrays_of(id, s, offset)) {
      ZINF_RETURN_IF_ERROR(sink.write(range.index, range.offset, range.values));
    }
    return Status::ok();
  };
  switch (zero_.optimizer) {
    case spec::Tier::kCpu:
      for (model::ParamId id = 0; id < table_.size(); ++id) ZINF_RETURN_IF_ERROR(write_param(id, host_states(id)));
      return Status::ok();
    case spec::Tier::kNvme: {
      if (nvme_) nvme_->set_phase(TrafficPhase::kOther);
      PipelineSet& set = sets_[0];
      // The last step's writes behind land first.
      Status status = finish_sets();
      for (std::size_t g = 0; g < groups_.size() && status.is_ok(); ++g) {
        status = read_group(g, set);
        if (status.is_ok()) status = nvme_->wait(groups_[g].extent);
        // A split parameter's arrays go piece by piece, in order.
        for (model::ParamId id = groups_[g].first; id <= groups_[g].last && status.is_ok(); ++id) {
          status = write_param(id, set_states(set, id), piece_of(g, id).begin);
        }
      }
      Status finished = finish_set(set);
      if (nvme_) nvme_->set_phase(TrafficPhase::kForwardBackward);
      return status.is_ok() ? finished : status;
    }
    case spec::Tier::kDevice: {
      // One parameter at a time through host memory: the device may not be host-addressable.
      device::Stream& compute = device_.stream(device::StreamRole::kCompute);
      std::vector<float> host;
      for (model::ParamId id = 0; id < table_.size(); ++id) {
        const std::int64_t n = partition_[id].owned;
        host.resize(static_cast<std::size_t>(3 * n));
        int kind = 0;
        for (const StateStore* store : {master_.get(), adam_m_.get(), adam_v_.get()}) {
          const Tensor src = store->slice(id);
          device_.copy(host.data() + kind * n, src.data(), src.bytes(), device::CopyKind::kDeviceToHost, compute);
          ++kind;
        }
        ZINF_RETURN_IF_ERROR(compute.synchronize());
        const Shape shape{n};
        ZINF_RETURN_IF_ERROR(
            write_param(id, {Tensor(host.data(), DType::kF32, shape), Tensor(host.data() + n, DType::kF32, shape),
                             Tensor(host.data() + 2 * n, DType::kF32, shape)}));
      }
      return Status::ok();
    }
  }
  return Status::ok();
}

Status PartitionedStates::load_checkpoint(CheckpointSource& source) {
  const auto read_param = [&](model::ParamId id, const HostStates& s, std::int64_t offset = 0) -> Status {
    for (const CheckpointRange& range : checkpoint_arrays_of(id, s, offset)) {
      ZINF_RETURN_IF_ERROR(source.read(range.index, range.offset, range.values));
    }
    return Status::ok();
  };
  coordinator_->invalidate();
  std::vector<std::byte> rounded;
  // The working parameters follow the loaded master weights, rounded as the optimizer rounds them.
  const auto republish = [&](model::ParamId id, const Tensor& master) -> Status {
    if (!mixed()) return publish(id, master.data());
    rounded.resize(storage_bytes(id));
    host_ops_.copy(Tensor(rounded.data(), precision_, master.shape()), master);
    ZINF_RETURN_IF_ERROR(publish(id, rounded.data()));
    // `rounded` is reused for the next parameter: its copies and writes must be done.
    ZINF_RETURN_IF_ERROR(coordinator_->wait_published());
    return params_->wait(id);
  };
  switch (zero_.optimizer) {
    case spec::Tier::kCpu:
      for (model::ParamId id = 0; id < table_.size(); ++id) {
        ZINF_RETURN_IF_ERROR(read_param(id, host_states(id)));
        ZINF_RETURN_IF_ERROR(republish(id, host_states(id).master));
      }
      break;
    case spec::Tier::kNvme: {
      nvme_->set_phase(TrafficPhase::kOther);
      PipelineSet& set = sets_[0];
      // The last step's writes behind land before these writes of the same extents.
      Status status = finish_sets();
      std::vector<float> whole;  // a split parameter's master weights, gathered piece by piece
      for (std::size_t g = 0; g < groups_.size() && status.is_ok(); ++g) {
        set.group = static_cast<int>(g);
        for (model::ParamId id = groups_[g].first; id <= groups_[g].last && status.is_ok(); ++id) {
          const Piece piece = piece_of(g, id);
          status = read_param(id, set_states(set, id), piece.begin);
          if (!status.is_ok()) break;
          if (!split(id)) {
            status = republish(id, set_states(set, id).master);
            continue;
          }
          whole.resize(static_cast<std::size_t>(partition_[id].owned));
          std::memcpy(whole.data() + piece.begin, set_states(set, id).master.data(),
                      static_cast<std::size_t>(piece.count) * sizeof(float));
          if (g == group_last_[static_cast<std::size_t>(id)]) {
            status = republish(id, Tensor(whole.data(), DType::kF32, Shape{partition_[id].owned}));
            // `whole` is reused by the next split parameter: its copies and writes must be done.
            if (status.is_ok()) status = coordinator_->wait_published();
            if (status.is_ok()) status = params_->wait(id);
          }
        }
        // In fp32 the parameters were published straight from the set's master weights: the
        // host-to-device copies into their device slices and persistent copies run on the
        // host-to-device stream's thread and may not have read them yet. finish_set() waits for
        // this point before the set is refilled with the next sub-group, as in the optimizer
        // pipeline (finish_group); without it those copies could read the next sub-group's values.
        device_.stream(device::StreamRole::kHostToDevice).record(*set.copies_done);
        const auto bytes = static_cast<std::size_t>(groups_[g].flat_end - groups_[g].flat_begin) * 12;
        if (status.is_ok()) {
          status = nvme_->start_write(
              groups_[g].extent, std::span<const std::byte>(static_cast<const std::byte*>(set.states.data()), bytes));
        }
        if (status.is_ok()) status = finish_set(set);
      }
      (void)finish_set(set);
      nvme_->set_phase(TrafficPhase::kForwardBackward);
      ZINF_RETURN_IF_ERROR(status);
      break;
    }
    case spec::Tier::kDevice: {
      device::Stream& compute = device_.stream(device::StreamRole::kCompute);
      std::vector<float> host;
      for (model::ParamId id = 0; id < table_.size(); ++id) {
        const std::int64_t n = partition_[id].owned;
        host.resize(static_cast<std::size_t>(3 * n));
        const Shape shape{n};
        ZINF_RETURN_IF_ERROR(
            read_param(id, {Tensor(host.data(), DType::kF32, shape), Tensor(host.data() + n, DType::kF32, shape),
                            Tensor(host.data() + 2 * n, DType::kF32, shape)}));
        int kind = 0;
        for (const StateStore* store : {master_.get(), adam_m_.get(), adam_v_.get()}) {
          const Tensor dst = store->slice(id);
          device_.copy(dst.data(), host.data() + kind * n, dst.bytes(), device::CopyKind::kHostToDevice, compute);
          ++kind;
        }
        device_.ops().copy(params_->slice(id), master_->slice(id));
        republish_device_slice(id);
        ZINF_RETURN_IF_ERROR(compute.synchronize());
      }
      break;
    }
  }
  return after_step();
}

}  // namespace zinf::zero
