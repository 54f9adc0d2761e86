#include "libengine/zero/partitioned_states.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "libengine/core/check.h"
#include "libengine/core/units.h"
#include "libengine/memory/aligned_buffer.h"
#include "libengine/spec/optimizer_pipeline_shape.h"

namespace zinf::zero {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
// Host memory the pipeline leaves for what else the engine allocates on the host tier later
// (checkpoint and staging buffers): a sixteenth of the budget, at most 64 MiB.
std::uint64_t host_slack_bytes(std::uint64_t capacity) { return std::min<std::uint64_t>(64 * kMiB, capacity / 16); }

std::string bytes_text(std::uint64_t bytes) { return format_bytes(static_cast<double>(bytes)); }

}  // namespace

PartitionedStates::PartitionedStates(const model::ParamTable& table, device::Device& device,
                                     PartitionedStatesOptions& options)
    : table_(table),
      device_(device),
      comm_(options.comm),
      precision_(options.precision),
      compute_dtype_(options.compute_dtype),
      seed_(options.seed),
      zero_(options.zero),
      partition_(table, options.comm != nullptr ? options.comm->world_size() : 1,
                 options.comm != nullptr ? options.comm->rank() : 0),
      io_engine_(std::move(options.io_engine)),
      on_warning_(options.on_warning) {}

PartitionedStates::~PartitionedStates() {
  // Transfers in flight and the optimizer thread's job read or write buffers owned here: let them
  // finish first.
  if (worker_) worker_->wait();
  (void)device_.synchronize();
  if (nvme_) nvme_->drain();
}

Result<std::unique_ptr<PartitionedStates>> PartitionedStates::create(const model::ParamTable& table,
                                                                     device::Device& device,
                                                                     PartitionedStatesOptions options) {
  if (table.size() == 0 || table.total_numel() == 0) {
    return Status::invalid_argument("model states: the parameter table is empty; there is nothing to train");
  }
  if (!options.zero.partitioned()) {
    return Status::invalid_argument(
        "scenario.zero.stage: 0 is the replicated engine; partitioned states need 1, 2 or 3");
  }
  if (options.compute_dtype != DType::kF32 && options.compute_dtype != options.precision) {
    return Status::invalid_argument(fmt::format("model states: compute precision {} with {} storage is not supported",
                                                dtype_name(options.compute_dtype), dtype_name(options.precision)));
  }
  std::unique_ptr<PartitionedStates> states(new PartitionedStates(table, device, options));
  ZINF_RETURN_IF_ERROR(states->plan_and_allocate());
  ZINF_RETURN_IF_ERROR(states->initialise());
  return states;
}

std::size_t PartitionedStates::storage_bytes(model::ParamId id) const {
  return static_cast<std::size_t>(partition_[id].owned) * dtype_size_bytes(precision_);
}

Status PartitionedStates::plan_and_allocate() {
  using spec::Tier;
  const std::size_t half = dtype_size_bytes(precision_);
  const std::string storage_name(dtype_name(precision_));
  const auto make_store = [&](Tier tier, DType dtype, std::string what) {
    return make_state_store(tier, dtype, std::move(what), table_, partition_, device_);
  };
  // Where each kind of state lives (state_store.h). Made first: the budgets below depend on them.
  ZINF_ASSIGN_OR_RETURN(params_, make_store(zero_.params, precision_, storage_name + " params"));

  std::uint64_t largest_storage = 0;
  std::uint64_t offloaded_storage = 0;
  std::int64_t largest_slice = 0;
  // Gathered parameters are whole (every rank's padded slice): the live budget is derived from
  // those sizes, the same on every rank.
  for (model::ParamId id = 0; id < table_.size(); ++id) {
    const std::uint64_t whole = static_cast<std::uint64_t>(partition_[id].slice_numel) * partition_.world_size() * half;
    largest_storage = std::max<std::uint64_t>(largest_storage, whole);
    largest_slice = std::max(largest_slice, partition_[id].slice_numel);
    if (table_[id].numel > zero_.persistence_threshold) offloaded_storage += whole;
  }
  // fp32 gradient buffers and views hold the whole parameter (every rank's slice).
  const std::uint64_t largest_fp32 = static_cast<std::uint64_t>(largest_slice) * partition_.world_size() * 4;
  if (!params_->on_device() && zero_.max_live_bytes == 0) {
    zero_.max_live_bytes = std::min(std::max(offloaded_storage, 2 * largest_storage),
                                    std::max<std::uint64_t>(4 * largest_storage, 256 * kMiB));
  }
  // Cannot wrap: a given max_live_bytes is at most spec::kMaxZeroBudgetBytes (2^60), a derived one
  // at most 4 x the largest parameter.
  if (params_->on_nvme() && zero_.prefetch_bytes == 0) zero_.prefetch_bytes = 2 * zero_.max_live_bytes;
  // Gradient buckets across ranks: a few MiB per collective (many small parameters share one call),
  // and at least the largest whole gradient (a bucket holds one parameter at least).
  if (zero_.reduce_bucket_bytes == 0) {
    zero_.reduce_bucket_bytes = std::max<std::uint64_t>(4 * kMiB, largest_fp32);
  }

  ZINF_ASSIGN_OR_RETURN(grads_, make_store(zero_.grads, precision_, storage_name + " grads"));
  if (zero_.optimizer != Tier::kNvme) {
    ZINF_ASSIGN_OR_RETURN(master_, make_store(zero_.optimizer, DType::kF32, "fp32 master params"));
    ZINF_ASSIGN_OR_RETURN(adam_m_, make_store(zero_.optimizer, DType::kF32, "Adam m"));
    ZINF_ASSIGN_OR_RETURN(adam_v_, make_store(zero_.optimizer, DType::kF32, "Adam v"));
  }
  if (master_ != nullptr && master_->in_host_memory() && mixed() && !params_->in_host_memory()) {
    ZINF_ASSIGN_OR_RETURN(params_out_,
                          allocate_host_buffer(device_, static_cast<std::size_t>(partition_.flat_numel()) * half,
                                               "new params after the step"));
  }

  if (host_optimizer()) {
    // Sub-groups and pipeline buffers: spec/optimizer_pipeline_shape.h (the planner uses the same).
    std::vector<std::int64_t> slices;
    for (model::ParamId id = 0; id < table_.size(); ++id) slices.push_back(partition_[id].slice_numel);
    spec::OptimizerPipelineInput input{slices, zero_.optimizer, mixed() ? half : 0};
    input.sub_group_size = zero_.sub_group_size;
    const memory::TierUsage host = device_.host_memory().usage();
    const std::uint64_t slack = host_slack_bytes(host.capacity_bytes);
    const std::uint64_t reserved = host.current_bytes + zero_.prefetch_bytes + slack;
    input.budgeted = host.capacity_bytes > 0;
    input.host_left_bytes = host.capacity_bytes > reserved ? host.capacity_bytes - reserved : 0;
    const spec::OptimizerPipelineShape shape = spec::shape_optimizer_pipeline(input);
    if (!shape.fits()) {
      return Status::invalid_argument(fmt::format(
          "scenario.zero.host_memory: {} leaves {} for the optimizer's NVMe pipeline after {} of host-resident "
          "states, {} of prefetch staging and {} of slack; its 3 buffers of sub-groups of {} elements and the "
          "new values of the largest parameter ({} elements) need {}; raise host_memory to at least {}",
          bytes_text(host.capacity_bytes), bytes_text(input.host_left_bytes), bytes_text(host.current_bytes),
          bytes_text(zero_.prefetch_bytes), bytes_text(slack), shape.smallest, largest_slice,
          bytes_text(shape.needed_bytes),
          bytes_text(host.capacity_bytes + shape.needed_bytes - input.host_left_bytes)));
    }
    adopt_groups(shape.groups);
    if (zero_.optimizer == Tier::kNvme) {
      // Adam is elementwise, so the sub-groups may be stepped in any order: the widest one goes to
      // the middle, so the exposed first read and last write are small ones. The pieces of a split
      // parameter stay consecutive: the order starts at a parameter's first.
      const std::size_t count = groups_.size();
      const std::size_t start =
          group_first_[static_cast<std::size_t>(groups_[(shape.widest_group + count - count / 2) % count].first)];
      for (std::size_t i = 0; i < count; ++i) group_order_.push_back((start + i) % count);
      sets_.resize(shape.buffers);
      for (PipelineSet& set : sets_) {
        ZINF_ASSIGN_OR_RETURN(set.states, allocate_host_buffer(device_, static_cast<std::size_t>(shape.widest) * 12,
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
  }
  // On the CPU backend CPU Adam runs on the training thread, in the compute's OpenMP team (optimizer_worker.h).
  if (host_optimizer()) {
    worker_ = std::make_unique<OptimizerWorker>(device_.kind() == device::DeviceKind::kCpu
                                                    ? OptimizerWorker::Placement::kOnCaller
                                                    : OptimizerWorker::Placement::kThread);
  }

  if (zero_.uses_nvme()) {
    NvmeStateStoreOptions nvme;
    nvme.paths = zero_.nvme_paths;
    std::uint64_t largest_transfer = 0;
    nvme.planned_bytes = params_->planned_nvme_bytes();
    if (nvme.planned_bytes > 0) largest_transfer = largest_storage;
    for (const SubGroup& g : groups_) {
      const auto bytes = static_cast<std::uint64_t>(g.flat_end - g.flat_begin) * 12;
      nvme.planned_bytes += bytes;
      largest_transfer = std::max(largest_transfer, bytes);
    }
    nvme.largest_transfer_bytes = largest_transfer;
    nvme.engine = std::move(io_engine_);
    nvme.on_warning = on_warning_;
    ZINF_ASSIGN_OR_RETURN(nvme_, NvmeStateStore::open(std::move(nvme)));
    params_->attach(nvme_.get());
    register_transfer_buffers();
  }

  std::vector<ParamHome> homes(static_cast<std::size_t>(table_.size()));
  for (model::ParamId id = 0; id < table_.size(); ++id) homes[static_cast<std::size_t>(id)] = params_->home(id);
  ParamCoordinatorOptions coordination;
  coordination.precision = precision_;
  coordination.compute_dtype = compute_dtype_;
  coordination.max_live_bytes = zero_.max_live_bytes;
  coordination.prefetch_bytes = zero_.prefetch_bytes;
  // Stages 1 and 2 keep the parameters whole on every rank: at several ranks each is a persistent
  // device copy, gathered from the ranks' updated slices after every step. At one rank a
  // device-tier parameter's storage is its own copy.
  if (zero_.stage < 3 && partition_.world_size() > 1) {
    coordination.persistence_threshold = std::numeric_limits<std::int64_t>::max();
  } else {
    coordination.persistence_threshold = params_->on_device() ? 0 : zero_.persistence_threshold;
  }
  coordination.on_warning = on_warning_;
  coordination.comm = comm_;
  Result<std::unique_ptr<ParamCoordinator>> coordinator =
      ParamCoordinator::create(table_, device_, std::move(homes), nvme_.get(), coordination);
  if (!coordinator.is_ok()) {
    return as_field_error(coordinator.status(), "scenario.device_memory",
                          "raise it or lower zero.persistence_threshold");
  }
  coordinator_ = std::move(coordinator).value();

  // What the engine takes from the device budget while it runs: gathered parameters, fp32 gradient
  // buffers and compute-precision views of the largest parameter. Refused now, not at step 1.
  const memory::TierUsage dev = device_.memory().usage();
  if (dev.capacity_bytes > 0) {
    // Gathering, a bucket's gradients and their packed copy (the bucket may overrun its size by one gradient).
    const std::uint64_t buckets = gathering() ? 2 * (zero_.reduce_bucket_bytes + largest_fp32) : 0;
    const std::uint64_t transient = (params_->on_device() ? 0 : zero_.max_live_bytes) + 3 * largest_fp32 + buckets;
    const std::uint64_t left = dev.capacity_bytes > dev.current_bytes ? dev.capacity_bytes - dev.current_bytes : 0;
    if (left < transient) {
      return Status::invalid_argument(fmt::format(
          "scenario.device_memory: {} leaves {} after the activations and the device-resident states ({}); the "
          "engine's buffers need {} ({} of gathered parameters, zero.max_live_bytes, {} of fp32 gradient and "
          "view buffers of the largest parameter, {} of gradient buckets, zero.reduce_bucket_bytes); raise "
          "device_memory to at least {} or lower zero.max_live_bytes",
          bytes_text(dev.capacity_bytes), bytes_text(left), bytes_text(dev.current_bytes), bytes_text(transient),
          bytes_text(params_->on_device() ? 0 : zero_.max_live_bytes), bytes_text(3 * largest_fp32),
          bytes_text(buckets), bytes_text(dev.current_bytes + transient)));
    }
  }
  reducer_ = std::make_unique<GradientReducer>(table_, partition_, device_, *grads_, comm_, zero_, precision_);
  computed_ = device_.create_event();
  return Status::ok();
}

void PartitionedStates::register_transfer_buffers() {
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
    const Status status = nvme_->register_memory(region);
    if (!status.is_ok()) {
      if (on_warning_) on_warning_(status.message());  // it says what then happens
      return;
    }
  }
}

Status PartitionedStates::initialise() {
  using spec::Tier;
  device::Stream& compute = device_.stream(device::StreamRole::kCompute);
  grads_->zero(compute);
  if (nvme_) nvme_->set_phase(TrafficPhase::kOther);
  std::vector<float> values;
  std::vector<std::byte> stored;
  PipelineSet* set = sets_.empty() ? nullptr : &sets_[0];
  for (model::ParamId id = 0; id < table_.size(); ++id) {
    const ParamSlice& slice = partition_[id];
    values.assign(static_cast<std::size_t>(slice.owned), 0.0f);
    table_.init_values(seed_, id, slice.begin, std::span<float>(values));
    const Tensor fp32(values.data(), DType::kF32, Shape{slice.owned});
    // The master weights.
    if (zero_.optimizer == Tier::kNvme) {
      // Into each of its sub-groups (several: a split parameter); a sub-group complete with this
      // parameter goes to NVMe.
      const auto index = static_cast<std::size_t>(id);
      for (std::size_t group = group_first_[index]; group <= group_last_[index]; ++group) {
        if (set->group != static_cast<int>(group)) {
          std::memset(set->states.data(), 0, set->states.bytes());
          set->group = static_cast<int>(group);
        }
        const Piece piece = piece_of(group, id);
        std::memcpy(set_states(*set, id).master.data(), values.data() + piece.begin,
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
    } else if (zero_.optimizer == Tier::kDevice) {
      device_.copy(master_->slice(id).data(), values.data(), fp32.bytes(), device::CopyKind::kHostToDevice, compute);
      device_.zero(adam_m_->slice(id).data(), fp32.bytes(), compute);
      device_.zero(adam_v_->slice(id).data(), fp32.bytes(), compute);
    } else {
      std::memcpy(host_states(id).master.data(), values.data(), fp32.bytes());
    }
    // The parameters in storage precision, where they live.
    const void* source = values.data();
    if (mixed()) {
      stored.resize(storage_bytes(id));
      host_ops_.copy(Tensor(stored.data(), precision_, Shape{slice.owned}), fp32);
      source = stored.data();
    }
    ZINF_RETURN_IF_ERROR(params_->put(id, source, compute));
    if (params_->on_nvme()) coordinator_->set_extent(id, params_->home(id).extent);
    if (coordinator_->persistent(id)) coordinator_->publish_persistent(id, source);
    // The host vectors are reused for the next parameter: wait for these copies first.
    ZINF_RETURN_IF_ERROR(compute.synchronize());
    ZINF_RETURN_IF_ERROR(coordinator_->wait_published());
  }
  if (set != nullptr) set->group = -1;
  if (nvme_) nvme_->set_phase(TrafficPhase::kForwardBackward);
  return device_.synchronize();
}

PartitionedStates::HostStates PartitionedStates::set_states(const PipelineSet& set, model::ParamId id) const {
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

PartitionedStates::HostStates PartitionedStates::host_states(model::ParamId id) const {
  return {master_->slice(id), adam_m_->slice(id), adam_v_->slice(id)};
}

void PartitionedStates::begin_phase(model::Phase phase) {
  if (nvme_) nvme_->set_phase(TrafficPhase::kForwardBackward);
  coordinator_->begin_phase(phase);
}

Result<Tensor> PartitionedStates::acquire(model::ParamId id) {
  ZINF_RETURN_IF_ERROR(check_not_stepped(id, "acquire"));
  // Another point to move the optimizer pipeline along: sub-groups whose gradients have reached
  // the host since the last commit go to the optimizer thread now rather than at the next commit.
  if (pipeline_order_ != nullptr && overlapped_) ZINF_RETURN_IF_ERROR(advance_pipeline(false));
  return coordinator_->acquire(id);
}

Result<Tensor> PartitionedStates::grad_buffer(model::ParamId id) {
  ZINF_CHECK(id >= 0 && id < table_.size(), "grad_buffer: parameter id out of range");
  ZINF_RETURN_IF_ERROR(check_not_stepped(id, "a gradient"));
  return reducer_->grad_buffer(id);
}

Status PartitionedStates::zero_grads() { return reducer_->zero_grads(); }

Status PartitionedStates::commit(model::ParamId id) {
  ZINF_RETURN_IF_ERROR(reducer_->commit(id));
  return note_committed(id);
}

std::vector<StateBytes> PartitionedStates::state_bytes() const {
  using spec::Tier;
  std::vector<StateBytes> out;
  out.push_back({"params", params_->tier(), params_->bytes()});
  out.push_back({"grads", grads_->tier(), grads_->bytes()});
  std::uint64_t optimizer_nvme = 0;
  for (const SubGroup& g : groups_) optimizer_nvme += static_cast<std::uint64_t>(g.flat_end - g.flat_begin) * 4;
  for (const auto& [name, buffer] :
       {std::pair{"master_params", &master_}, std::pair{"adam_m", &adam_m_}, std::pair{"adam_v", &adam_v_}}) {
    out.push_back({name, zero_.optimizer, *buffer != nullptr ? (*buffer)->bytes() : optimizer_nvme});
  }
  if (!params_out_.empty()) out.push_back({"params_staging", Tier::kCpu, params_out_.bytes()});
  std::uint64_t pipeline = 0;
  for (const PipelineSet& set : sets_) pipeline += set.states.bytes() + set.params_out.bytes();
  pipeline += split_out_.bytes();
  if (pipeline > 0) out.push_back({"optimizer_pipeline", Tier::kCpu, pipeline});
  if (coordinator_->persistent_bytes() > 0)
    out.push_back({"persistent_params", Tier::kDevice, coordinator_->persistent_bytes()});
  if (!params_->on_device()) out.push_back({"gathered_params_peak", Tier::kDevice, coordinator_->live_peak_bytes()});
  if (coordinator_->staging_peak_bytes() > 0)
    out.push_back({"nvme_read_staging_peak", Tier::kCpu, coordinator_->staging_peak_bytes()});
  out.push_back({"gradient_buffers_peak", Tier::kDevice, reducer_->buffer_peak_bytes()});
  return out;
}

EngineStats PartitionedStates::stats() const {
  EngineStats stats;
  coordinator_->add_stats(stats);
  stats.device_to_host = reducer_->device_to_host();
  stats.host_to_device.optimizer += host_to_device_.optimizer;
  stats.host_to_device.other += host_to_device_.other;
  stats.optimizer_elements = elements_stepped_;
  stats.optimizer_elements_overlapped = elements_overlapped_;
  stats.optimizer_worker_seconds = worker_seconds_seen_;
  stats.optimizer_overlapped_seconds = overlapped_worker_seconds_;
  if (nvme_) {
    stats.nvme_read = nvme_->bytes_read();
    stats.nvme_write = nvme_->bytes_written();
    stats.nvme_bytes = nvme_->extent_bytes();
    stats.nvme_peak_bytes = nvme_->extent_bytes();
    stats.nvme_capacity_bytes = nvme_->capacity_bytes();
  }
  return stats;
}

std::string PartitionedStates::describe() const {
  std::string line = fmt::format("ZeRO-{}: params on {}, grads on {}, optimizer on {}", zero_.stage,
                                 tier_word(zero_.params), tier_word(zero_.grads), tier_word(zero_.optimizer));
  if (!params_->on_device()) {
    line += fmt::format("; live params {}, persistent <= {} elements ({})", bytes_text(zero_.max_live_bytes),
                        zero_.persistence_threshold, bytes_text(coordinator_->persistent_bytes()));
  }
  if (params_->on_nvme()) line += fmt::format(", prefetch {}", bytes_text(zero_.prefetch_bytes));
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
  if (nvme_) line += "; " + nvme_->describe();
  return line;
}

}  // namespace zinf::zero
