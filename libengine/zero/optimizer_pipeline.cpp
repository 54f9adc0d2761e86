// The optimizer pipeline of PartitionedStates (partitioned_states.h) for optimizer states in host
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
#include <span>
#include <utility>

#include <fmt/format.h>

#include "libengine/core/check.h"
#include "libengine/zero/partitioned_states.h"

namespace zinf::zero {

void PartitionedStates::build_groups(std::int64_t target) {
  SubGroup group;
  for (model::ParamId id = 0; id < table_.size(); ++id) {
    const ParamSlice& slice = partition_[id];
    if (id > group.first && slice.flat_offset + slice.slice_numel - group.flat_begin > target) {
      groups_.push_back(group);
      group = SubGroup{id, id, slice.flat_offset, slice.flat_offset, 0};
    }
    group.last = id;
    group.flat_end = slice.flat_offset + slice.slice_numel;
  }
  groups_.push_back(group);
  group_of_.assign(static_cast<std::size_t>(table_.size()), 0);
  runs_.resize(groups_.size());
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    for (model::ParamId id = groups_[g].first; id <= groups_[g].last; ++id) group_of_[static_cast<std::size_t>(id)] = g;
    runs_[g].grads_ready = device_.create_event();
    // The backward pass commits gradients from the last parameters to the first.
    overlap_order_.push_back(groups_.size() - 1 - g);
  }
}

void PartitionedStates::start_pipeline(const std::vector<std::size_t>& order, bool overlapped) {
  ZINF_CHECK(!worker_busy_, "optimizer pipeline: started while the optimizer thread is busy");
  pipeline_order_ = &order;
  overlapped_ = overlapped;
  groups_awaiting_flush_.clear();
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
}

bool PartitionedStates::set_settled(PipelineSet& set) {
  if (set.group < 0) return true;
  const SubGroup& g = groups_[static_cast<std::size_t>(set.group)];
  if (!set.copies_done->query() || !nvme_->done(g.extent)) return false;
  for (model::ParamId id = g.first; id <= g.last && !param_extents_.empty(); ++id) {
    if (!nvme_->done(param_extents_[static_cast<std::size_t>(id)])) return false;
  }
  return true;
}

bool PartitionedStates::grads_final(std::size_t group, bool block) {
  // After the backward pass optimizer_step() has waited for every gradient copy.
  if (backward_done_) return true;
  GroupRun& run = runs_[group];
  // The event still holds the last step's point until this step's is recorded.
  if (run.uncommitted > 0 || !run.grads_recorded) return false;
  if (block) return run.grads_ready->synchronize().is_ok();
  return run.grads_ready->query();
}

Status PartitionedStates::note_committed(model::ParamId id) {
  if (pipeline_order_ == nullptr || !overlapped_) return Status::ok();
  GroupRun& run = runs_[group_of_[static_cast<std::size_t>(id)]];
  if (--run.uncommitted == 0) {
    // The gradients' copies to the host are in order on this stream: after them, the sub-group's
    // are final. Across ranks the last ones may still wait in the open gradient bucket.
    if (bucket_.ids.empty()) {
      device_.stream(device::StreamRole::kDeviceToHost).record(*run.grads_ready);
      run.grads_recorded = true;
    } else {
      groups_awaiting_flush_.push_back(group_of_[static_cast<std::size_t>(id)]);
    }
  }
  return advance_pipeline(false);
}

Status PartitionedStates::check_not_stepped(model::ParamId id, std::string_view what) const {
  if (pipeline_order_ == nullptr || !overlapped_) return Status::ok();
  const GroupRun::Stage stage = runs_[group_of_[static_cast<std::size_t>(id)]].stage;
  if (stage == GroupRun::Stage::kWaiting || stage == GroupRun::Stage::kReading) return Status::ok();
  return Status::internal(fmt::format(
      "{} of {} after its optimizer step began in this step: the model used a parameter again after committing its "
      "gradient, which zero.overlap_optimizer cannot allow; set it to false",
      what, table_[id].name));
}

void PartitionedStates::submit_group(std::size_t position) {
  const std::size_t g = (*pipeline_order_)[position];
  const SubGroup& group = groups_[g];
  const bool streamed = zero_.optimizer == spec::Tier::kNvme;
  const PipelineSet* set = streamed ? &sets_[position % sets_.size()] : nullptr;
  struct Slice {
    HostStates states;
    Tensor grad;
    Tensor out;  // mixed precision: the new storage-precision parameters
    bool decays = false;
  };
  std::vector<Slice> slices;
  publishing_.clear();
  for (model::ParamId id = group.first; id <= group.last; ++id) {
    Slice slice{streamed ? set_states(*set, id) : host_states(id),
                view(grads_.data(), precision_, id, false),
                {},
                table_[id].weight_decay};
    if (mixed()) {
      if (streamed) {
        const std::int64_t at = partition_[id].flat_offset - group.flat_begin;
        slice.out = Tensor(static_cast<std::byte*>(set->params_out.data()) +
                               static_cast<std::size_t>(at) * dtype_size_bytes(precision_),
                           precision_, Shape{partition_[id].owned});
      } else {
        slice.out = view(zero_.params == spec::Tier::kCpu ? params_.data() : params_out_.data(), precision_, id, false);
      }
    }
    publishing_.push_back({id, mixed() ? slice.out.data() : slice.states.master.data()});
    slices.push_back(std::move(slice));
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
      optimizer->step_slice(worker_ops_, plan, s.decays, s.states.master, s.states.exp_avg, s.states.exp_avg_sq, s.grad,
                            mixed() ? &s.out : nullptr);
    }
  });
}

Status PartitionedStates::finish_group(std::size_t position) {
  worker_busy_ = false;
  const double worker_seconds = worker_->busy_seconds();
  if (job_overlapped_) overlapped_worker_seconds_ += worker_seconds - worker_seconds_seen_;
  worker_seconds_seen_ = worker_seconds;
  const std::size_t g = (*pipeline_order_)[position];
  // Gathering, the persistent copies' collectives wait for optimizer_step(): the same order on every rank.
  for (const PublishItem& item : publishing_) ZINF_RETURN_IF_ERROR(publish(item.id, item.source, gathering()));
  if (zero_.optimizer != spec::Tier::kNvme) {
    runs_[g].stage = GroupRun::Stage::kDone;
    return Status::ok();
  }
  PipelineSet& set = sets_[position % sets_.size()];
  device_.stream(device::StreamRole::kHostToDevice).record(*set.copies_done);
  // Write behind: the sub-group goes back while the next one is stepped.
  const SubGroup& group = groups_[g];
  const auto bytes = static_cast<std::size_t>(group.flat_end - group.flat_begin) * 12;
  runs_[g].stage = GroupRun::Stage::kWriting;
  return nvme_->start_write(group.extent,
                            std::span<const std::byte>(static_cast<const std::byte*>(set.states.data()), bytes));
}

Status PartitionedStates::advance_pipeline(bool block) {
  if (pipeline_order_ == nullptr) return Status::ok();
  const std::vector<std::size_t>& order = *pipeline_order_;
  const std::size_t count = order.size();
  const bool streamed = zero_.optimizer == spec::Tier::kNvme;
  for (;;) {
    bool moved = false;
    if (worker_busy_ && worker_->idle()) {
      ZINF_RETURN_IF_ERROR(finish_group(stepping_));
      moved = true;
    }
    // Reads ahead, each into the set whose last sub-group is on its way out.
    while (streamed && read_position_ < count) {
      PipelineSet& set = sets_[read_position_ % sets_.size()];
      if (set.group >= 0) {
        const GroupRun::Stage stage = runs_[static_cast<std::size_t>(set.group)].stage;
        if (stage != GroupRun::Stage::kWriting && stage != GroupRun::Stage::kDone) break;
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
        submit_group(step_position_);
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
  // Every sub-group is stepped: the sets' writes (and the copies out of them) finish before they
  // are reused, and the persistent copies' gathers go out in the pipeline's order.
  Status first;
  for (PipelineSet& set : sets_) {
    Status status = finish_set(set);
    if (!status.is_ok() && first.is_ok()) first = std::move(status);
  }
  ZINF_RETURN_IF_ERROR(first);
  for (model::ParamId id : deferred_gathers_) coordinator_->gather_persistent(id);
  deferred_gathers_.clear();
  pipeline_order_ = nullptr;
  return Status::ok();
}

Status PartitionedStates::abort_pipeline(Status status) {
  if (worker_busy_) {
    worker_->wait();
    worker_busy_ = false;
  }
  for (PipelineSet& set : sets_) (void)finish_set(set);
  pipeline_order_ = nullptr;
  deferred_gathers_.clear();
  return status;
}

}  // namespace zinf::zero
