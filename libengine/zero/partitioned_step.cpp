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

Result<double> PartitionedStates::grad_sum_squares() {
  // One tensor per parameter in table order, through the kernels ZeRO-0 uses: the same sum, bit
  // for bit, at one rank.
  std::vector<Tensor> grads;
  grads.reserve(static_cast<std::size_t>(table_.size()));
  const bool on_device = zero_.grads == spec::Tier::kDevice;
  for (model::ParamId id = 0; id < table_.size(); ++id) grads.push_back(view(grads_.data(), precision_, id, on_device));
  double sum = on_device ? device_.ops().sum_squares(grads) : host_ops_.sum_squares(grads);
  if (gathering()) {
    // Every rank's slices: the ranks agree on the norm, so they clip and skip alike.
    std::array<double, 1> total = {sum};
    ZINF_RETURN_IF_ERROR(comm_->all_reduce_host(total));
    sum = total[0];
  }
  return sum;
}

Status PartitionedStates::wait_param_writes() {
  Status first;
  for (NvmeStateStore::ExtentId extent : param_extents_) {
    Status status = nvme_->wait(extent);
    if (!status.is_ok() && first.is_ok()) first = std::move(status);
  }
  return first;
}

Status PartitionedStates::publish(model::ParamId id, const void* source) {
  const std::size_t bytes = storage_bytes(id);
  device::Stream& h2d = device_.stream(device::StreamRole::kHostToDevice);
  switch (zero_.params) {
    case spec::Tier::kDevice:
      device_.copy(view(params_.data(), precision_, id, true).data(), source, bytes, device::CopyKind::kHostToDevice,
                   h2d);
      host_to_device_.optimizer += bytes;
      break;
    case spec::Tier::kCpu: {
      void* home = view(params_.data(), precision_, id, false).data();
      if (home != source) std::memcpy(home, source, bytes);
      break;
    }
    case spec::Tier::kNvme:
      ZINF_RETURN_IF_ERROR(
          nvme_->start_write(param_extents_[static_cast<std::size_t>(id)],
                             std::span<const std::byte>(static_cast<const std::byte*>(source), bytes)));
      break;
  }
  if (coordinator_->persistent(id)) host_to_device_.optimizer += coordinator_->publish_persistent(id, source);
  return Status::ok();
}

void PartitionedStates::republish_device_slice(model::ParamId id) {
  if (!coordinator_->persistent(id)) return;
  // The slice was written on the compute stream; the copy into the persistent copy follows it.
  device_.stream(device::StreamRole::kCompute).record(*computed_);
  device_.stream(device::StreamRole::kHostToDevice).wait(*computed_);
  coordinator_->publish_persistent_from_device(id, view(params_.data(), precision_, id, true).data());
}

Result<optim::StepReport> PartitionedStates::optimizer_step(optim::AdamOptimizer& optimizer, double lr,
                                                            optim::LossScaler& scaler) {
  const device::ProfilerRange range(device_, "optimizer");
  // Every gradient must have been reduced and reached its tier, and no gathered copy may outlive
  // the old values.
  ZINF_RETURN_IF_ERROR(device_.stream(device::StreamRole::kCollective).synchronize());
  ZINF_RETURN_IF_ERROR(device_.stream(device::StreamRole::kDeviceToHost).synchronize());
  d2h_in_flight_.clear();
  d2h_in_flight_bytes_ = 0;
  coordinator_->invalidate();
  // The first optimizer sub-groups' reads do not depend on the gradient norm: they overlap it.
  if (zero_.optimizer == spec::Tier::kNvme) {
    nvme_->set_phase(TrafficPhase::kOptimizer);
    Status reading = start_reads_ahead();
    nvme_->set_phase(TrafficPhase::kForwardBackward);
    if (!reading.is_ok()) {
      for (PipelineSet& set : sets_) (void)finish_set(set);
      return reading;
    }
  }
  Result<double> summed = grad_sum_squares();
  if (!summed.is_ok()) {
    for (PipelineSet& set : sets_) (void)finish_set(set);
    return summed.status();
  }
  const double sum_squares = summed.value();
  // A failed kernel also reads as NaN (Ops' contract): report that, not a gradient overflow.
  if (!std::isfinite(sum_squares)) ZINF_RETURN_IF_ERROR(device_.synchronize());
  Result<optim::StepPlan> planned = optimizer.begin_step(lr, sum_squares, scaler);
  if (!planned.is_ok() || !planned.value().apply) {
    // No step: the reads issued ahead are drained (their buffers are reused next step).
    for (PipelineSet& set : sets_) ZINF_RETURN_IF_ERROR(finish_set(set));
  }
  ZINF_ASSIGN_OR_RETURN(const optim::StepPlan plan, std::move(planned));
  if (plan.apply) {
    if (nvme_) nvme_->set_phase(TrafficPhase::kOptimizer);
    Status stepped;
    switch (zero_.optimizer) {
      case spec::Tier::kDevice:
        stepped = step_on_device(optimizer, plan);
        break;
      case spec::Tier::kCpu:
        stepped = step_on_host(optimizer, plan);
        break;
      case spec::Tier::kNvme:
        stepped = step_streamed(optimizer, plan);
        break;
    }
    if (nvme_) nvme_->set_phase(TrafficPhase::kForwardBackward);
    ZINF_RETURN_IF_ERROR(stepped);
    optim::AdamOptimizer::end_step(plan, scaler);
  }
  ZINF_RETURN_IF_ERROR(after_step());
  return plan.report;
}

Status PartitionedStates::after_step() {
  // Parameter writes, copies out of host buffers and the gathers of persistent copies finish before
  // those buffers change again; the next forward pass's first transfers start now.
  ZINF_RETURN_IF_ERROR(coordinator_->wait_published());
  if (nvme_) ZINF_RETURN_IF_ERROR(wait_param_writes());
  return coordinator_->prefetch_next_forward();
}

Status PartitionedStates::step_on_device(optim::AdamOptimizer& optimizer, const optim::StepPlan& plan) {
  device::Ops& ops = device_.ops();
  for (model::ParamId id = 0; id < table_.size(); ++id) {
    const Tensor params = view(params_.data(), precision_, id, true);
    const Tensor grad = view(grads_.data(), precision_, id, true);
    const Tensor master = view(master_.data(), DType::kF32, id, true);
    optimizer.step_slice(ops, plan, table_[id].weight_decay, master, view(adam_m_.data(), DType::kF32, id, true),
                         view(adam_v_.data(), DType::kF32, id, true), grad, mixed() ? &params : nullptr);
    if (!mixed()) ops.copy(params, master);
    republish_device_slice(id);
  }
  return Status::ok();
}

Status PartitionedStates::step_on_host(optim::AdamOptimizer& optimizer, const optim::StepPlan& plan) {
  if (nvme_) ZINF_RETURN_IF_ERROR(wait_param_writes());  // params_out_ is the source of earlier writes
  for (model::ParamId id = 0; id < table_.size(); ++id) {
    const HostStates s = host_states(id);
    const Tensor grad = view(grads_.data(), precision_, id, false);
    Tensor out;
    if (mixed()) {
      out = view(zero_.params == spec::Tier::kCpu ? params_.data() : params_out_.data(), precision_, id, false);
    }
    optimizer.step_slice(host_ops_, plan, table_[id].weight_decay, s.master, s.exp_avg, s.exp_avg_sq, grad,
                         mixed() ? &out : nullptr);
    ZINF_RETURN_IF_ERROR(publish(id, mixed() ? out.data() : s.master.data()));
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
  for (model::ParamId id = g.first; id <= g.last && !param_extents_.empty(); ++id) {
    Status written = nvme_->wait(param_extents_[static_cast<std::size_t>(id)]);
    if (status.is_ok()) status = std::move(written);
  }
  set.group = -1;
  return status;
}

Status PartitionedStates::start_reads_ahead() {
  // The first depth - 1 sub-groups (at least one): the rest follow as sets free up.
  const std::size_t depth = sets_.size();
  for (std::size_t p = 0; p < std::max<std::size_t>(1, depth - 1) && p < groups_.size(); ++p) {
    ZINF_RETURN_IF_ERROR(read_group(group_order_[p], sets_[p % depth]));
  }
  return Status::ok();
}

Status PartitionedStates::step_streamed(optim::AdamOptimizer& optimizer, const optim::StepPlan& plan) {
  const std::size_t count = groups_.size();
  const std::size_t depth = sets_.size();
  device::Stream& h2d = device_.stream(device::StreamRole::kHostToDevice);
  // On any failure, every set is drained before returning: no I/O may still target its buffers.
  const auto fail = [&](Status status) {
    for (PipelineSet& set : sets_) (void)finish_set(set);
    return status;
  };
  // The first sub-groups were read ahead by start_reads_ahead(). Position p in group_order_ uses
  // set p % depth.
  for (std::size_t p = 0; p < count; ++p) {
    PipelineSet& set = sets_[p % depth];
    const SubGroup& group = groups_[group_order_[p]];
    if (Status s = nvme_->wait(group.extent); !s.is_ok()) return fail(s);
    for (model::ParamId id = group.first; id <= group.last; ++id) {
      const HostStates s = set_states(set, id);
      Tensor out;
      if (mixed()) {
        const std::int64_t at = partition_[id].flat_offset - group.flat_begin;
        out = Tensor(static_cast<std::byte*>(set.params_out.data()) +
                         static_cast<std::size_t>(at) * dtype_size_bytes(precision_),
                     precision_, Shape{partition_[id].owned});
      }
      optimizer.step_slice(host_ops_, plan, table_[id].weight_decay, s.master, s.exp_avg, s.exp_avg_sq,
                           view(grads_.data(), precision_, id, false), mixed() ? &out : nullptr);
      if (Status published = publish(id, mixed() ? out.data() : s.master.data()); !published.is_ok()) {
        return fail(published);
      }
    }
    h2d.record(*set.copies_done);
    // Write behind: the sub-group goes back while the next one is stepped.
    const auto bytes = static_cast<std::size_t>(group.flat_end - group.flat_begin) * 12;
    if (Status s = nvme_->start_write(
            group.extent, std::span<const std::byte>(static_cast<const std::byte*>(set.states.data()), bytes));
        !s.is_ok()) {
      return fail(s);
    }
    // Read ahead into the set the previous sub-group used, once its write has had this sub-group's
    // step to finish.
    if (const std::size_t ahead = p + depth - 1; ahead < count && ahead != p) {
      if (Status s = read_group(group_order_[ahead], sets_[ahead % depth]); !s.is_ok()) return fail(s);
    }
  }
  Status first;
  for (PipelineSet& set : sets_) {
    Status status = finish_set(set);
    if (!status.is_ok() && first.is_ok()) first = std::move(status);
  }
  return first;
}

std::vector<CheckpointArrayInfo> PartitionedStates::checkpoint_layout() const {
  return partitioned_checkpoint_layout(table_, partition_);
}

std::array<std::pair<std::size_t, std::span<float>>, 3> PartitionedStates::checkpoint_arrays_of(
    model::ParamId id, const HostStates& s) const {
  // standard_checkpoint_layout(): every master, then every m, then every v.
  const auto count = static_cast<std::size_t>(table_.size());
  const auto index = static_cast<std::size_t>(id);
  const auto span_of = [](const Tensor& t) { return std::span<float>(t.f32(), static_cast<std::size_t>(t.numel())); };
  return {
      {{index, span_of(s.master)}, {count + index, span_of(s.exp_avg)}, {2 * count + index, span_of(s.exp_avg_sq)}}};
}

Status PartitionedStates::save_checkpoint(CheckpointSink& sink) {
  const auto write_param = [&](model::ParamId id, const HostStates& s) -> Status {
    for (const auto& [index, values] : checkpoint_arrays_of(id, s)) ZINF_RETURN_IF_ERROR(sink.write(index, values));
    return Status::ok();
  };
  switch (zero_.optimizer) {
    case spec::Tier::kCpu:
      for (model::ParamId id = 0; id < table_.size(); ++id) ZINF_RETURN_IF_ERROR(write_param(id, host_states(id)));
      return Status::ok();
    case spec::Tier::kNvme: {
      if (nvme_) nvme_->set_phase(TrafficPhase::kOther);
      PipelineSet& set = sets_[0];
      Status status;
      for (std::size_t g = 0; g < groups_.size() && status.is_ok(); ++g) {
        status = read_group(g, set);
        if (status.is_ok()) status = nvme_->wait(groups_[g].extent);
        for (model::ParamId id = groups_[g].first; id <= groups_[g].last && status.is_ok(); ++id) {
          status = write_param(id, set_states(set, id));
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
        for (const device::DeviceBuffer* buffer : {&master_, &adam_m_, &adam_v_}) {
          const Tensor src = view(buffer->data(), DType::kF32, id, true);
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
  const auto read_param = [&](model::ParamId id, const HostStates& s) -> Status {
    for (const auto& [index, values] : checkpoint_arrays_of(id, s)) ZINF_RETURN_IF_ERROR(source.read(index, values));
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
    return nvme_ && !param_extents_.empty() ? nvme_->wait(param_extents_[static_cast<std::size_t>(id)]) : Status::ok();
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
      Status status = finish_set(set);
      for (std::size_t g = 0; g < groups_.size() && status.is_ok(); ++g) {
        set.group = static_cast<int>(g);
        for (model::ParamId id = groups_[g].first; id <= groups_[g].last && status.is_ok(); ++id) {
          status = read_param(id, set_states(set, id));
          if (status.is_ok()) status = republish(id, set_states(set, id).master);
        }
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
        for (const device::DeviceBuffer* buffer : {&master_, &adam_m_, &adam_v_}) {
          const Tensor dst = view(buffer->data(), DType::kF32, id, true);
          device_.copy(dst.data(), host.data() + kind * n, dst.bytes(), device::CopyKind::kHostToDevice, compute);
          ++kind;
        }
        device_.ops().copy(view(params_.data(), precision_, id, true), view(master_.data(), DType::kF32, id, true));
        republish_device_slice(id);
        ZINF_RETURN_IF_ERROR(compute.synchronize());
      }
      break;
    }
  }
  return after_step();
}

}  // namespace zinf::zero
