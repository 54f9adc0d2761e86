// Allocation, initial values and reporting of OptimizerPipeline (optimizer_pipeline.h): the
// optimizer states' stores or NVMe sub-groups, the host pipeline sets, and what they hold.
#include <algorithm>
#include <cstring>
#include <span>
#include <utility>

#include <fmt/format.h>

#include "libengine/core/check.h"
#include "libengine/core/units.h"
#include "libengine/spec/sizing/engine_budgets.h"
#include "libengine/zero/optimizer_pipeline.h"

namespace zinf::zero {
namespace {

std::string bytes_text(std::uint64_t bytes) { return format_bytes(static_cast<double>(bytes)); }

}  // namespace

OptimizerPipeline::OptimizerPipeline(const model::ParamTable& table, const Partition& partition, device::Device& device,
                                     const spec::ZeroConfig& zero, DType precision, StateStore& params,
                                     StateStore& grads, bool gathering)
    : table_(table),
      partition_(partition),
      device_(device),
      zero_(zero),
      precision_(precision),
      gathering_(gathering),
      params_(&params),
      grads_(&grads) {}

OptimizerPipeline::~OptimizerPipeline() {
  if (worker_) worker_->wait();
}

Result<std::unique_ptr<OptimizerPipeline>> OptimizerPipeline::create(const model::ParamTable& table,
                                                                     const Partition& partition, device::Device& device,
                                                                     const spec::ZeroConfig& zero, DType precision,
                                                                     StateStore& params, StateStore& grads,
                                                                     bool gathering) {
  std::unique_ptr<OptimizerPipeline> pipeline(
      new OptimizerPipeline(table, partition, device, zero, precision, params, grads, gathering));
  ZINF_RETURN_IF_ERROR(pipeline->allocate());
  return pipeline;
}

std::size_t OptimizerPipeline::storage_bytes(model::ParamId id) const {
  return static_cast<std::size_t>(partition_[id].owned) * dtype_size_bytes(precision_);
}

Status OptimizerPipeline::allocate() {
  const std::size_t half = dtype_size_bytes(precision_);
  if (!states_on_nvme()) {
    for (auto [store, what] :
         {std::pair{&master_, "fp32 master params"}, std::pair{&adam_m_, "Adam m"}, std::pair{&adam_v_, "Adam v"}}) {
      ZINF_ASSIGN_OR_RETURN(*store, make_state_store(zero_.optimizer, DType::kF32, what, table_, partition_, device_));
    }
  }
  if (master_ != nullptr) checkpoint_stream_ = stream_by_parameter(*master_, *adam_m_, *adam_v_, device_);
  if (master_ != nullptr && master_->in_host_memory() && mixed() && !params_->in_host_memory()) {
    ZINF_ASSIGN_OR_RETURN(params_out_,
                          allocate_host_buffer(device_, static_cast<std::size_t>(partition_.flat_numel()) * half,
                                               "new params after the step"));
  }
  if (!host_optimizer()) return Status::ok();

  // Sub-groups and pipeline buffers: spec/optimizer_pipeline_shape.h (the planner uses the same).
  std::vector<std::int64_t> slices;
  std::int64_t largest_slice = 0;
  for (model::ParamId id = 0; id < table_.size(); ++id) {
    slices.push_back(partition_[id].slice_numel);
    largest_slice = std::max(largest_slice, partition_[id].slice_numel);
  }
  const memory::TierUsage host = device_.host_memory().usage();
  const std::uint64_t slack = sizing::host_slack_bytes(host.capacity_bytes);
  const spec::OptimizerPipelineInput input =
      sizing::optimizer_pipeline_input(slices, zero_, precision_, host.capacity_bytes, host.current_bytes);
  const spec::OptimizerPipelineShape shape = spec::shape_optimizer_pipeline(input);
  if (!shape.fits()) {
    return Status::invalid_argument(fmt::format(
        "scenario.zero.host_memory: {} leaves {} for the optimizer's NVMe pipeline after {} of host-resident "
        "states, {} of prefetch staging and {} of slack; its 3 buffers of sub-groups of {} elements and the "
        "new values of the largest parameter ({} elements) need {}; raise host_memory to at least {}",
        bytes_text(host.capacity_bytes), bytes_text(input.host_left_bytes), bytes_text(host.current_bytes),
        bytes_text(zero_.prefetch_bytes), bytes_text(slack), shape.smallest, largest_slice,
        bytes_text(shape.needed_bytes), bytes_text(host.capacity_bytes + shape.needed_bytes - input.host_left_bytes)));
  }
  adopt_groups(shape.groups);
  if (states_on_nvme()) {
    // Adam is elementwise, so the sub-groups may be stepped in any order: the widest one goes to
    // the middle, so the exposed first read and last write are small ones. The pieces of a split
    // parameter stay consecutive: the order starts at a parameter's first.
    const std::size_t count = groups_.size();
    const std::size_t start =
        group_first_[static_cast<std::size_t>(groups_[(shape.widest_group + count - count / 2) % count].first)];
    for (std::size_t i = 0; i < count; ++i) group_order_.push_back((start + i) % count);
    sets_.resize(shape.buffers);
    for (PipelineSet& set : sets_) {
      ZINF_ASSIGN_OR_RETURN(
          set.states,
          allocate_host_buffer(device_, static_cast<std::size_t>(shape.widest) * sizing::kNvmeOptimizerBytesPerElement,
                               "optimizer pipeline buffer (master, m, v)"));
      if (mixed()) {
        ZINF_ASSIGN_OR_RETURN(set.params_out,
                              allocate_host_buffer(device_, static_cast<std::size_t>(shape.widest) * half,
                                                   "optimizer pipeline buffer (new params)"));
      }
      set.copies_done = device_.create_event();
    }
    split_out_copied_ = device_.create_event();
    if (shape.split_out_bytes > 0) {
      ZINF_ASSIGN_OR_RETURN(split_out_,
                            allocate_host_buffer(device_, static_cast<std::size_t>(shape.split_out_bytes),
                                                 "optimizer pipeline buffer (new values of a split parameter)"));
    }
  }
  if (states_on_nvme()) checkpoint_stream_ = make_sub_group_stream();
  // On the CPU backend CPU Adam runs on the training thread, in the compute's OpenMP team (optimizer_worker.h).
  worker_ = std::make_unique<OptimizerWorker>(device_.kind() == device::DeviceKind::kCpu
                                                  ? OptimizerWorker::Placement::kOnCaller
                                                  : OptimizerWorker::Placement::kThread);
  return Status::ok();
}

// Every sub-group's [master | m | v] bytes when the states live on NVMe. With the optimizer on the
// cpu tier (parameters on NVMe) the states stay in host memory: nothing of theirs is on NVMe.
std::uint64_t OptimizerPipeline::planned_nvme_bytes() const {
  std::uint64_t bytes = 0;
  if (!states_on_nvme()) return 0;
  for (const SubGroup& g : groups_) bytes += static_cast<std::uint64_t>(g.flat_end - g.flat_begin) * 12;
  return bytes;
}

std::uint64_t OptimizerPipeline::largest_nvme_transfer_bytes() const {
  std::uint64_t largest = 0;
  if (!states_on_nvme()) return 0;
  for (const SubGroup& g : groups_) {
    largest = std::max<std::uint64_t>(largest, static_cast<std::uint64_t>(g.flat_end - g.flat_begin) * 12);
  }
  return largest;
}

void OptimizerPipeline::register_transfer_buffers(NvmeStateStore& nvme,
                                                  const std::function<void(const std::string&)>& on_warning) {
  std::vector<device::DeviceBuffer*> buffers;
  for (PipelineSet& set : sets_) {
    buffers.push_back(&set.states);
    buffers.push_back(&set.params_out);
  }
  buffers.push_back(&split_out_);
  std::vector<std::span<std::byte>> regions;
  for (device::DeviceBuffer* buffer : buffers) {
    regions.emplace_back(static_cast<std::byte*>(buffer->data()), buffer->bytes());
  }
  // The optimizer on the cpu tier with parameters on NVMe (the only host optimizer beside an NVMe
  // store that has master weights in host memory): the sources of the parameters' NVMe writes, the
  // new half values or the fp32 master weights.
  if (mixed()) {
    regions.emplace_back(static_cast<std::byte*>(params_out_.data()), params_out_.bytes());
  } else if (master_ != nullptr) {
    regions.push_back(master_->host_region());
  }
  for (std::span<std::byte> region : regions) {
    if (region.empty()) continue;
    const Status status = nvme.register_memory(region);
    if (!status.is_ok()) {
      if (on_warning) on_warning(status.message());  // it says what then happens
      return;
    }
  }
}

void OptimizerPipeline::connect(NvmeStateStore* nvme, ParamPublisher& publisher, GradientReducer& reducer) {
  nvme_ = nvme;
  publisher_ = &publisher;
  reducer_ = &reducer;
}

Status OptimizerPipeline::put_initial_states(model::ParamId id, const float* values, device::Stream& compute) {
  const std::size_t bytes = static_cast<std::size_t>(partition_[id].owned) * sizeof(float);
  if (states_on_nvme()) {
    // Into each of its sub-groups (several: a split parameter); a sub-group complete with this
    // parameter goes to NVMe.
    PipelineSet* set = &sets_[0];
    const auto index = static_cast<std::size_t>(id);
    for (std::size_t group = group_first_[index]; group <= group_last_[index]; ++group) {
      if (set->group != static_cast<int>(group)) {
        std::memset(set->states.data(), 0, set->states.bytes());
        set->group = static_cast<int>(group);
      }
      const Piece piece = piece_of(group, id);
      std::memcpy(set_states(*set, id).master.data(), values + piece.begin,
                  static_cast<std::size_t>(piece.count) * sizeof(float));
      if (id != groups_[group].last) continue;
      const SubGroup& g = groups_[group];
      ZINF_ASSIGN_OR_RETURN(
          groups_[group].extent,
          nvme_->create(split(id) ? fmt::format("optimizer states of sub-group {} ({} elements {}..{})", group,
                                                table_[id].name, piece.begin, piece.begin + piece.count)
                                  : fmt::format("optimizer states of sub-group {} ({}..{})", group,
                                                table_[g.first].name, table_[g.last].name),
                        std::span<const std::byte>(static_cast<const std::byte*>(set->states.data()),
                                                   static_cast<std::size_t>(g.flat_end - g.flat_begin) * 12)));
    }
  } else if (!host_optimizer()) {
    device_.copy(master_->slice(id).data(), values, bytes, device::CopyKind::kHostToDevice, compute);
    device_.zero(adam_m_->slice(id).data(), bytes, compute);
    device_.zero(adam_v_->slice(id).data(), bytes, compute);
  } else {
    std::memcpy(host_states(id).master.data(), values, bytes);
  }
  return Status::ok();
}

void OptimizerPipeline::finish_initial_states() {
  if (!sets_.empty()) sets_[0].group = -1;
}

OptimizerPipeline::HostStates OptimizerPipeline::set_states(const PipelineSet& set, model::ParamId id) const {
  const auto g = static_cast<std::size_t>(set.group < 0 ? 0 : set.group);
  const SubGroup& group = groups_[g];
  const Piece piece = piece_of(g, id);
  const std::int64_t width = group.flat_end - group.flat_begin;
  const std::int64_t at = partition_[id].flat_offset + piece.begin - group.flat_begin;
  auto* base = static_cast<float*>(set.states.data());
  const Shape shape{piece.count};
  return {Tensor(base + at, DType::kF32, shape), Tensor(base + width + at, DType::kF32, shape),
          Tensor(base + 2 * width + at, DType::kF32, shape)};
}

OptimizerPipeline::HostStates OptimizerPipeline::host_states(model::ParamId id) const {
  return {master_->slice(id), adam_m_->slice(id), adam_v_->slice(id)};
}

void OptimizerPipeline::add_state_bytes(std::vector<StateBytes>& out) const {
  std::uint64_t optimizer_nvme = 0;
  for (const SubGroup& g : groups_) optimizer_nvme += static_cast<std::uint64_t>(g.flat_end - g.flat_begin) * 4;
  for (const auto& [name, buffer] :
       {std::pair{"master_params", &master_}, std::pair{"adam_m", &adam_m_}, std::pair{"adam_v", &adam_v_}}) {
    out.push_back({name, zero_.optimizer, *buffer != nullptr ? (*buffer)->bytes() : optimizer_nvme});
  }
  if (!params_out_.empty()) out.push_back({"params_staging", spec::Tier::kCpu, params_out_.bytes()});
  std::uint64_t pipeline = 0;
  for (const PipelineSet& set : sets_) pipeline += set.states.bytes() + set.params_out.bytes();
  pipeline += split_out_.bytes();
  if (pipeline > 0) out.push_back({"optimizer_pipeline", spec::Tier::kCpu, pipeline});
}

void OptimizerPipeline::add_stats(EngineStats& stats) const {
  stats.host_to_device.optimizer += host_to_device_.optimizer;
  stats.host_to_device.other += host_to_device_.other;
  stats.optimizer_elements = elements_stepped_;
  stats.optimizer_elements_overlapped = elements_overlapped_;
  stats.optimizer_worker_seconds = worker_seconds_seen_;
  stats.optimizer_overlapped_seconds = overlapped_worker_seconds_;
}

std::string OptimizerPipeline::describe() const {
  std::string line;
  if (!sets_.empty()) {
    line += fmt::format("; optimizer in {} sub-groups through {} host buffers of {}", groups_.size(), sets_.size(),
                        bytes_text(sets_[0].states.bytes() + sets_[0].params_out.bytes()));
  } else if (!groups_.empty()) {
    line += fmt::format("; optimizer in {} sub-groups", groups_.size());
  }
  if (host_optimizer()) {
    line += zero_.overlap_optimizer ? "; optimizer overlapped with the backward pass"
                                    : "; optimizer after the backward pass";
  }
  return line;
}

}  // namespace zinf::zero
