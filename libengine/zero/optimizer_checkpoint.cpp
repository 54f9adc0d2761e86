// Checkpoint streaming of OptimizerPipeline (optimizer_pipeline.h): the master weights and Adam
// moments go to and come from the checkpoint array by array, piece by piece, through host memory.
// Where they live is the OptimizerStatesStream's business (state_store.h): the stores' host
// windows on the device and cpu tiers (stream_by_parameter()), or SubGroupStream below on NVMe,
// sub-group by sub-group through one pipeline set. save_checkpoint() and load_checkpoint() have no
// branch on the tier.
#include <array>
#include <cstring>
#include <span>
#include <vector>

#include "libengine/core/check.h"
#include "libengine/zero/optimizer_pipeline.h"

namespace zinf::zero {

// The NVMe tier: every sub-group read into the first pipeline set, its parameters' pieces visited
// in order, and (a load) the set written back to the sub-group's extent. The last step's writes
// behind land first; the traffic counts as "other".
class OptimizerPipeline::SubGroupStream final : public OptimizerStatesStream {
 public:
  explicit SubGroupStream(OptimizerPipeline& pipeline) : p_(pipeline) {}

  Status stream(bool write_back, const Visit& visit) override {
    p_.nvme_->set_phase(TrafficPhase::kOther);
    PipelineSet& set = p_.sets_[0];
    Status status = p_.finish_sets();
    for (std::size_t g = 0; g < p_.groups_.size() && status.is_ok(); ++g) {
      const SubGroup& group = p_.groups_[g];
      if (write_back) {
        set.group = static_cast<int>(g);  // every element is written by `visit`: nothing to read
      } else {
        status = p_.read_group(g, set);
        if (status.is_ok()) status = p_.nvme_->wait(group.extent);
      }
      // A split parameter's pieces go in order, one per sub-group.
      for (model::ParamId id = group.first; id <= group.last && status.is_ok(); ++id) {
        const HostStates s = p_.set_states(set, id);
        status = visit({id, p_.piece_of(g, id).begin, s.master, s.exp_avg, s.exp_avg_sq});
      }
      if (!write_back) continue;
      // finish_set() waits for this point before the set is refilled with the next sub-group, as
      // the optimizer pipeline does (finish_group): host-to-device copies that `visit` issued out
      // of the set, had it not waited for them, would otherwise read the next sub-group's values.
      p_.device_.stream(device::StreamRole::kHostToDevice).record(*set.copies_done);
      const auto bytes = static_cast<std::size_t>(group.flat_end - group.flat_begin) * 12;
      if (status.is_ok()) {
        status = p_.nvme_->start_write(
            group.extent, std::span<const std::byte>(static_cast<const std::byte*>(set.states.data()), bytes));
      }
      if (status.is_ok()) status = p_.finish_set(set);
    }
    Status finished = p_.finish_set(set);
    p_.nvme_->set_phase(TrafficPhase::kForwardBackward);
    return status.is_ok() ? finished : status;
  }

 private:
  OptimizerPipeline& p_;
};

std::unique_ptr<OptimizerStatesStream> OptimizerPipeline::make_sub_group_stream() {
  return std::make_unique<SubGroupStream>(*this);
}

std::array<OptimizerPipeline::CheckpointRange, 3> OptimizerPipeline::checkpoint_arrays_of(
    const OptimizerStatesPiece& piece) const {
  // standard_checkpoint_layout(): every master, then every m, then every v.
  const auto count = static_cast<std::size_t>(table_.size());
  const auto index = static_cast<std::size_t>(piece.id);
  const auto at = static_cast<std::size_t>(piece.offset);
  const auto span_of = [](const Tensor& t) { return std::span<float>(t.f32(), static_cast<std::size_t>(t.numel())); };
  return {{{index, at, span_of(piece.master)},
           {count + index, at, span_of(piece.exp_avg)},
           {2 * count + index, at, span_of(piece.exp_avg_sq)}}};
}

Status OptimizerPipeline::save_checkpoint(CheckpointSink& sink) {
  return checkpoint_stream_->stream(false, [&](const OptimizerStatesPiece& piece) -> Status {
    for (const CheckpointRange& range : checkpoint_arrays_of(piece)) {
      ZINF_RETURN_IF_ERROR(sink.write(range.index, range.offset, range.values));
    }
    return Status::ok();
  });
}

Status OptimizerPipeline::load_checkpoint(CheckpointSource& source) {
  publisher_->invalidate();
  std::vector<std::byte> rounded;
  // The working parameters follow the loaded master weights, rounded as the optimizer rounds them.
  const auto republish = [&](model::ParamId id, const Tensor& master) -> Status {
    const void* values = master.data();
    if (mixed()) {
      rounded.resize(storage_bytes(id));
      host_ops_.copy(Tensor(rounded.data(), precision_, master.shape()), master);
      values = rounded.data();
    }
    ZINF_RETURN_IF_ERROR(publish(id, values));
    // The values are reused (`rounded`, `whole`, the stream's piece): their copies and writes must be done.
    ZINF_RETURN_IF_ERROR(publisher_->wait_published());
    return params_->wait(id);
  };
  std::vector<float> whole;  // a parameter streamed in several pieces: its master weights, gathered
  return checkpoint_stream_->stream(true, [&](const OptimizerStatesPiece& piece) -> Status {
    for (const CheckpointRange& range : checkpoint_arrays_of(piece)) {
      ZINF_RETURN_IF_ERROR(source.read(range.index, range.offset, range.values));
    }
    const std::int64_t owned = partition_[piece.id].owned;
    const std::int64_t count = piece.master.numel();
    if (piece.offset == 0 && count == owned) return republish(piece.id, piece.master);
    whole.resize(static_cast<std::size_t>(owned));
    std::memcpy(whole.data() + piece.offset, piece.master.data(), static_cast<std::size_t>(count) * sizeof(float));
    if (piece.offset + count < owned) return Status::ok();
    return republish(piece.id, Tensor(whole.data(), DType::kF32, Shape{owned}));
  });
}

}  // namespace zinf::zero
