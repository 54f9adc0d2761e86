// The sub-group pipeline of OptimizerPipeline (optimizer_pipeline.h) for optimizer states in host
// memory or on NVMe. Every sub-group of whole parameters goes, in the pipeline's order:
//   waiting → reading (NVMe → one of the host pipeline sets) → stepping (CPU Adam on the
//   optimizer thread) → writing (new parameters published to their tier, states written behind to
//   NVMe) → done,
// with at most one sub-group on the optimizer thread and at most sets_.size() in host memory.
//
// Overlapped with the backward pass (zero.overlap_optimizer, started by prepare_step()): the order
// is the one the backward pass finishes the sub-groups in (last layers first); reads start with
// the forward pass; when the step can be planned without the gradient norm (no clipping, no dynamic
// loss scaling) a sub-group is stepped as soon as the backward pass has committed all of its
// gradients and they are on the host. Adam is elementwise and the plan is the one begin_step()
// returns, so the bits are those of the step after the backward pass. Every call into the NVMe
// store, the coordinator and the device streams stays on the training thread; the optimizer thread
// only runs the arithmetic of one sub-group at a time. Nothing here issues a collective during the
// backward pass: persistent copies' gathers wait for optimizer_step(), in the pipeline's order.
#include <algorithm>
#include <array>
#include <cstring>
#include <span>
#include <utility>

#include <fmt/format.h>

#include "libengine/core/check.h"
#include "libengine/zero/optimizer_pipeline.h"

namespace zinf::zero {

void OptimizerPipeline::adopt_groups(const std::vector<spec::SubGroupRange>& ranges) {
  for (const spec::SubGroupRange& r : ranges) groups_.push_back(SubGroup{r.first, r.last, r.flat_begin, r.flat_end, 0});
  group_first_.assign(static_cast<std::size_t>(table_.size()), 0);
  group_last_.assign(static_cast<std::size_t>(table_.size()), 0);
  pieces_left_.assign(static_cast<std::size_t>(table_.size()), 0);
  runs_.resize(groups_.size());
  for (std::size_t g = groups_.size(); g-- > 0;) {
    for (model::ParamId id = groups_[g].first; id <= groups_[g].last; ++id)
      group_first_[static_cast<std::size_t>(id)] = g;
  }
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    for (model::ParamId id = groups_[g].first; id <= groups_[g].last; ++id)
      group_last_[static_cast<std::size_t>(id)] = g;
    runs_[g].grads_ready = device_.create_event();
    // The backward pass commits gradients from the last parameters to the first.
    overlap_order_.push_back(groups_.size() - 1 - g);
  }
}

OptimizerPipeline::Piece OptimizerPipeline::piece_of(std::size_t group, model::ParamId id) const {
  const SubGroup& g = groups_[group];
  const ParamSlice& slice = partition_[id];
  const std::int64_t begin = std::max(g.flat_begin, slice.flat_offset) - slice.flat_offset;
  const std::int64_t end = std::min(g.flat_end, slice.flat_offset + slice.owned) - slice.flat_offset;
  return {begin, std::max<std::int64_t>(0, end - begin)};
}

void OptimizerPipeline::start_pipeline(const std::vector<std::size_t>& order, bool overlapped) {
  ZINF_CHECK(!worker_busy_, "optimizer pipeline: started while the optimizer thread is busy");
  pipeline_order_ = &order;
  overlapped_ = overlapped;
  reducer_->forget_pending();
  backward_done_ = false;
  plan_.reset();
  read_position_ = 0;
  step_position_ = 0;
  deferred_gathers_.clear();
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    runs_[g].stage = GroupRun::Stage::kWaiting;
    runs_[g].uncommitted = groups_[g].last - groups_[g].first + 1;
    runs_[g].grads_recorded = false;
  }
  for (model::ParamId id = 0; id < table_.size(); ++id) {
    const auto index = static_cast<std::size_t>(id);
    pieces_left_[index] = static_cast<int>(group_last_[index] - group_first_[index] + 1);
  }
  // The last step's split parameter was published; its NVMe write from split_out_ may still be in
  // flight (the step boundary does not wait for parameter writes): the next one to fill split_out_ waits.
  if (split_out_param_ >= 0) split_out_written_ = split_out_param_;
  split_out_param_ = -1;
}

bool OptimizerPipeline::set_settled(PipelineSet& set) {
  if (set.group < 0) return true;
  const SubGroup& g = groups_[static_cast<std::size_t>(set.group)];
  if (!set.copies_done->query() || !nvme_->done(g.extent)) return false;
  for (model::ParamId id = g.first; id <= g.last; ++id) {
    if (!params_->done(id)) return false;
  }
  return true;
}

bool OptimizerPipeline::grads_final(std::size_t group, bool block) {
  // After the backward pass optimizer_step() has waited for every gradient copy.
  if (backward_done_) return true;
  GroupRun& run = runs_[group];
  // The event still holds the last step's point until this step's is recorded.
  if (run.uncommitted > 0 || !run.grads_recorded) return false;
  if (block) return run.grads_ready->synchronize().is_ok();
  return run.grads_ready->query();
}

void OptimizerPipeline::note_committed(model::ParamId id) {
  if (!overlapping()) return;
  const auto index = static_cast<std::size_t>(id);
  for (std::size_t g = group_first_[index]; g <= group_last_[index]; ++g) {
    GroupRun& run = runs_[g];
    if (--run.uncommitted > 0) continue;
    // Its gradients are final once they are all in the gradient store.
    reducer_->record_when_stored(*run.grads_ready, run.grads_recorded);
  }
}

Status OptimizerPipeline::check_not_stepped(model::ParamId id, std::string_view what) const {
  if (pipeline_order_ == nullptr || !overlapped_) return Status::ok();
  const auto index = static_cast<std::size_t>(id);
  for (std::size_t g = group_first_[index]; g <= group_last_[index]; ++g) {
    const GroupRun::Stage stage = runs_[g].stage;
    if (stage == GroupRun::Stage::kWaiting || stage == GroupRun::Stage::kReading) continue;
    return Status::internal(fmt::format(
        "{} of {} after its optimizer step began in this step: the model used a parameter again after committing its "
        "gradient, which zero.overlap_optimizer cannot allow; set it to false",
        what, table_[id].name));
  }
  return Status::ok();
}

Status OptimizerPipeline::submit_group(std::size_t position) {
  const std::size_t g = (*pipeline_order_)[position];
  const SubGroup& group = groups_[g];
  const bool streamed = states_on_nvme();
  const PipelineSet* set = streamed ? &sets_[position % sets_.size()] : nullptr;
  const std::size_t half = dtype_size_bytes(precision_);
  struct Slice {
    HostStates states;
    Tensor grad;
    Tensor out;            // mixed precision: the new storage-precision parameters
    void* copy = nullptr;  // fp32, a split parameter's piece on NVMe: where its new master values go too
    bool decays = false;
  };
  const auto piece_view = [](const Tensor& whole, Piece piece) {
    return whole.slice(piece.begin, piece.begin + piece.count);
  };
  std::vector<Slice> slices;
  publishing_.clear();
  for (model::ParamId id = group.first; id <= group.last; ++id) {
    const auto index = static_cast<std::size_t>(id);
    const Piece piece = piece_of(g, id);
    // A split parameter's new values gather, piece by piece, in split_out_ (NVMe optimizer: its
    // pieces pass through different sets); that buffer's last copies must be done first.
    const bool gathered = streamed && split(id);
    if (gathered && pieces_left_[index] == static_cast<int>(group_last_[index] - group_first_[index] + 1)) {
      ZINF_CHECK(split_out_param_ < 0 || split_out_param_ == id ||
                     pieces_left_[static_cast<std::size_t>(split_out_param_)] == 0,
                 "optimizer pipeline: a split parameter's pieces are not consecutive in the order");
      ZINF_RETURN_IF_ERROR(split_out_copied_->synchronize());
      const model::ParamId written = split_out_param_ >= 0 ? split_out_param_ : split_out_written_;
      if (written >= 0) ZINF_RETURN_IF_ERROR(params_->wait_writes(written));
      split_out_written_ = -1;
      split_out_param_ = id;
    }
    // In host memory (params_out_, or fp32 master weights) the new values are the source of the last
    // step's NVMe write of the parameter, which may still be in flight: it finishes first; and they
    // may be on loan to the coordinator (finish_group).
    if (!streamed && params_->on_nvme()) {
      ZINF_RETURN_IF_ERROR(params_->wait_writes(id));
      publisher_->end_loan(id);
    }
    Slice slice{streamed ? set_states(*set, id) : host_states(id),
                piece_view(grads_->slice(id), piece),
                {},
                nullptr,
                table_[id].weight_decay};
    if (!streamed) {
      slice.states = {piece_view(slice.states.master, piece), piece_view(slice.states.exp_avg, piece),
                      piece_view(slice.states.exp_avg_sq, piece)};
    }
    const void* source = nullptr;  // the whole parameter's new values, once its last piece is stepped
    if (mixed()) {
      Tensor whole_out;
      if (gathered) {
        whole_out = Tensor(split_out_.data(), precision_, Shape{partition_[id].owned});
      } else if (streamed) {
        const std::int64_t at = partition_[id].flat_offset - group.flat_begin;
        whole_out = Tensor(static_cast<std::byte*>(set->params_out.data()) + static_cast<std::size_t>(at) * half,
                           precision_, Shape{partition_[id].owned});
      } else {
        // The parameters' home in host memory, or the staging for their copy to the device or NVMe.
        whole_out = params_->in_host_memory() ? params_->slice(id)
                                              : Tensor(static_cast<std::byte*>(params_out_.data()) +
                                                           static_cast<std::size_t>(partition_[id].flat_offset) * half,
                                                       precision_, Shape{partition_[id].owned});
      }
      slice.out = piece_view(whole_out, piece);
      source = whole_out.data();
    } else if (gathered) {
      slice.copy = static_cast<float*>(split_out_.data()) + piece.begin;
      source = split_out_.data();
    } else {
      source = streamed ? slice.states.master.data() : host_states(id).master.data();
    }
    if (--pieces_left_[index] == 0) publishing_.push_back({id, source});
    if (piece.count > 0) slices.push_back(std::move(slice));
  }
  // The set's new parameter values are overwritten: the loans of its last sub-group end.
  if (set != nullptr) {
    PipelineSet& lender = sets_[position % sets_.size()];
    for (model::ParamId id : lender.lent) publisher_->end_loan(id);
    lender.lent.clear();
  }
  const std::uint64_t elements = static_cast<std::uint64_t>(group.flat_end - group.flat_begin);
  elements_stepped_ += elements;
  job_overlapped_ = !backward_done_;
  if (job_overlapped_) elements_overlapped_ += elements;
  runs_[g].stage = GroupRun::Stage::kStepping;
  stepping_ = position;
  worker_busy_ = true;
  worker_->submit([this, slices = std::move(slices), plan = *plan_, optimizer = step_optimizer_]() mutable {
    for (Slice& s : slices) {
      const std::array<Tensor, optim::kMaxStateSlots> slots{s.states.exp_avg, s.states.exp_avg_sq};
      optimizer->step_slice(worker_ops_, plan, s.decays, s.states.master,
                            std::span<const Tensor>(slots).first(static_cast<std::size_t>(optimizer->state_slots())),
                            s.grad, mixed() ? &s.out : nullptr);
      if (s.copy != nullptr) std::memcpy(s.copy, s.states.master.data(), s.states.master.bytes());
    }
  });
  return Status::ok();
}

Status OptimizerPipeline::finish_group(std::size_t position) {
  worker_busy_ = false;
  const double worker_seconds = worker_->busy_seconds();
  if (job_overlapped_) overlapped_worker_seconds_ += worker_seconds - worker_seconds_seen_;
  worker_seconds_seen_ = worker_seconds;
  const std::size_t g = (*pipeline_order_)[position];
  // The new values stay where Adam wrote them until Adam next writes there (submit_group), and the
  // coordinator may keep them there for the next forward pass instead of copying them: a set's
  // params_out when no later sub-group of this step reuses the set (if one does, they are copied),
  // params_out_ / the host master weights always. Copied: a split parameter's split_out_, and fp32
  // values in a set's states, which the read ahead of the next step overwrites first.
  const bool streamed = states_on_nvme();
  PipelineSet* lender = streamed ? &sets_[position % sets_.size()] : nullptr;
  const bool set_kept = lender != nullptr && mixed() && position + sets_.size() >= pipeline_order_->size();
  for (const PublishItem& item : publishing_) {
    const bool split_source = !split_out_.empty() && item.source == split_out_.data();
    const bool lend = !split_source && (!streamed || set_kept);
    ZINF_RETURN_IF_ERROR(publish(item.id, item.source, gathering_, lend));
    if (lend && lender != nullptr) lender->lent.push_back(item.id);
    if (split_source) device_.stream(device::StreamRole::kHostToDevice).record(*split_out_copied_);
  }
  if (!streamed) {
    runs_[g].stage = GroupRun::Stage::kDone;
    return Status::ok();
  }
  PipelineSet& set = *lender;
  device_.stream(device::StreamRole::kHostToDevice).record(*set.copies_done);
  // Write behind: the sub-group goes back while the next one is stepped.
  const SubGroup& group = groups_[g];
  const auto bytes = static_cast<std::size_t>(group.flat_end - group.flat_begin) * 12;
  runs_[g].stage = GroupRun::Stage::kWriting;
  return nvme_->start_write(group.extent,
                            std::span<const std::byte>(static_cast<const std::byte*>(set.states.data()), bytes));
}

Status OptimizerPipeline::advance_pipeline(bool block) {
  if (pipeline_order_ == nullptr) return Status::ok();
  const std::vector<std::size_t>& order = *pipeline_order_;
  const std::size_t count = order.size();
  const bool streamed = states_on_nvme();
  for (;;) {
    bool moved = false;
    if (worker_busy_ && worker_->idle()) {
      ZINF_RETURN_IF_ERROR(finish_group(stepping_));
      moved = true;
    }
    // Reads ahead, each into the set whose last sub-group is on its way out (this step's, or the
    // last step's write-behind).
    while (streamed && read_position_ < count) {
      PipelineSet& set = sets_[read_position_ % sets_.size()];
      if (set.group >= 0) {
        if (!set.carried) {
          const GroupRun::Stage stage = runs_[static_cast<std::size_t>(set.group)].stage;
          if (stage != GroupRun::Stage::kWriting && stage != GroupRun::Stage::kDone) break;
        }
        if (!block && !set_settled(set)) break;
      }
      const std::size_t g = order[read_position_];
      ZINF_RETURN_IF_ERROR(read_group(g, set));
      runs_[g].stage = GroupRun::Stage::kReading;
      ++read_position_;
      moved = true;
    }
    // The next sub-group to the optimizer thread: the plan is known, its states are in host memory
    // and its gradients are final.
    if (!worker_busy_ && plan_ && step_position_ < count) {
      const std::size_t g = order[step_position_];
      bool ready = !streamed || step_position_ < read_position_;
      if (ready && streamed) {
        if (block) {
          ZINF_RETURN_IF_ERROR(nvme_->wait(groups_[g].extent));
        } else {
          ready = nvme_->done(groups_[g].extent);
          if (ready) ZINF_RETURN_IF_ERROR(nvme_->wait(groups_[g].extent));  // its status
        }
      }
      if (ready && grads_final(g, block)) {
        ZINF_RETURN_IF_ERROR(submit_group(step_position_));
        ++step_position_;
        moved = true;
      }
    }
    if (step_position_ == count && !worker_busy_) {
      // Finished during the backward pass: the rest (and any collective) waits for optimizer_step().
      if (!block) return Status::ok();
      break;
    }
    if (!moved) {
      if (!block) return Status::ok();
      // With the plan known and the backward pass over, only the optimizer thread can hold things up.
      ZINF_CHECK(worker_busy_, "optimizer pipeline: no sub-group can move");
      worker_->wait();
    }
  }
  // Every sub-group is stepped. The last sub-groups' states are still being written behind: those
  // writes go on into the next forward pass (the drives stay busy while compute starts), and a set
  // is waited for when it is next read into (read_group) or drained (finish_sets). The new
  // parameters' copies are waited for at the step boundary (StepScheduler). The persistent copies' gathers
  // go out in the pipeline's order.
  for (PipelineSet& set : sets_) set.carried = set.group >= 0;
  for (model::ParamId id : deferred_gathers_) publisher_->gather(id);
  deferred_gathers_.clear();
  pipeline_order_ = nullptr;
  return Status::ok();
}

Status OptimizerPipeline::finish_sets() {
  Status first;
  for (PipelineSet& set : sets_) {
    Status status = finish_set(set);
    if (!status.is_ok() && first.is_ok()) first = std::move(status);
  }
  return first;
}

Status OptimizerPipeline::abort_pipeline(Status status) {
  if (worker_busy_) {
    worker_->wait();
    worker_busy_ = false;
  }
  (void)finish_sets();
  pipeline_order_ = nullptr;
  deferred_gathers_.clear();
  return status;
}

}  // namespace zinf::zero
