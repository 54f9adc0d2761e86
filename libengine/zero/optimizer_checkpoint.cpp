// Checkpoint streaming of OptimizerPipeline (optimizer_pipeline.h): the master weights and Adam
// moments go to and come from the checkpoint array by array, parameter by parameter, from where
// they live — device memory through one host buffer, host memory directly, or NVMe sub-group by
// sub-group through one pipeline set.
#include <array>
#include <cstring>
#include <span>
#include <vector>

#include "libengine/core/check.h"
#include "libengine/zero/optimizer_pipeline.h"

namespace zinf::zero {

std::array<OptimizerPipeline::CheckpointRange, 3> OptimizerPipeline::checkpoint_arrays_of(model::ParamId id,
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

Status OptimizerPipeline::save_checkpoint(CheckpointSink& sink) {
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

Status OptimizerPipeline::load_checkpoint(CheckpointSource& source) {
  const auto read_param = [&](model::ParamId id, const HostStates& s, std::int64_t offset = 0) -> Status {
    for (const CheckpointRange& range : checkpoint_arrays_of(id, s, offset)) {
      ZINF_RETURN_IF_ERROR(source.read(range.index, range.offset, range.values));
    }
    return Status::ok();
  };
  publisher_->invalidate();
  std::vector<std::byte> rounded;
  // The working parameters follow the loaded master weights, rounded as the optimizer rounds them.
  const auto republish = [&](model::ParamId id, const Tensor& master) -> Status {
    if (!mixed()) return publish(id, master.data());
    rounded.resize(storage_bytes(id));
    host_ops_.copy(Tensor(rounded.data(), precision_, master.shape()), master);
    ZINF_RETURN_IF_ERROR(publish(id, rounded.data()));
    // `rounded` is reused for the next parameter: its copies and writes must be done.
    ZINF_RETURN_IF_ERROR(publisher_->wait_published());
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
            if (status.is_ok()) status = publisher_->wait_published();
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
  return Status::ok();
}

}  // namespace zinf::zero
