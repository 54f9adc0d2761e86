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

std::string_view tier_word(spec::Tier tier) { return tier == spec::Tier::kDevice ? "device" : spec::tier_name(tier); }

// A budget error found while allocating is the configuration's: it names the field to change.
Status as_field_error(const Status& status, std::string_view field, std::string_view hint) {
  // The system refusing memory is no budget's fault: its message names the machine's limit.
  if (status.code() != ErrorCode::kOutOfMemory || memory::refused_by_system(status)) return status;
  return Status::invalid_argument(fmt::format("{}: {}; {}", field, status.message(), hint));
}

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
      on_warning_(options.on_warning) {
  grad_workspaces_.resize(static_cast<std::size_t>(table.size()));
  grad_out_.assign(static_cast<std::size_t>(table.size()), false);
}

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

Tensor PartitionedStates::view(void* base, DType dtype, model::ParamId id, bool on_device) const {
  auto* at =
      static_cast<std::byte*>(base) + static_cast<std::size_t>(partition_[id].flat_offset) * dtype_size_bytes(dtype);
  return Tensor(at, dtype, Shape{partition_[id].owned}, on_device ? &device_ : nullptr);
}

Status PartitionedStates::plan_and_allocate() {
  using spec::Tier;
  const std::int64_t flat = partition_.flat_numel();
  const std::size_t half = dtype_size_bytes(precision_);
  const auto flat_bytes = [&](std::size_t element_bytes) { return static_cast<std::size_t>(flat) * element_bytes; };
  const std::string storage_name(dtype_name(precision_));

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
  if (zero_.params != Tier::kDevice && zero_.max_live_bytes == 0) {
    zero_.max_live_bytes = std::min(std::max(offloaded_storage, 2 * largest_storage),
                                    std::max<std::uint64_t>(4 * largest_storage, 256 * kMiB));
  }
  // Cannot wrap: a given max_live_bytes is at most spec::kMaxZeroBudgetBytes (2^60), a derived one
  // at most 4 x the largest parameter.
  if (zero_.params == Tier::kNvme && zero_.prefetch_bytes == 0) zero_.prefetch_bytes = 2 * zero_.max_live_bytes;
  // Gradient buckets across ranks: a few MiB per collective (many small parameters share one call),
  // and at least the largest whole gradient (a bucket holds one parameter at least).
  if (zero_.reduce_bucket_bytes == 0) {
    zero_.reduce_bucket_bytes = std::max<std::uint64_t>(4 * kMiB, largest_fp32);
  }

  const auto allocate_on = [&](Tier tier, std::size_t bytes, std::string what) -> Result<device::DeviceBuffer> {
    Result<device::DeviceBuffer> buffer =
        tier == Tier::kDevice ? device_.allocate(bytes, what) : device_.allocate_host(bytes, what);
    if (buffer.is_ok()) return buffer;
    return tier == Tier::kDevice
               ? as_field_error(buffer.status(), "scenario.device_memory", "raise it or move states off the device")
               : as_field_error(buffer.status(), "scenario.zero.host_memory", "raise it or move states to \"nvme\"");
  };
  if (zero_.params != Tier::kNvme) {
    ZINF_ASSIGN_OR_RETURN(params_, allocate_on(zero_.params, flat_bytes(half), storage_name + " params"));
  }
  ZINF_ASSIGN_OR_RETURN(grads_, allocate_on(zero_.grads, flat_bytes(half), storage_name + " grads"));
  if (zero_.optimizer != Tier::kNvme) {
    ZINF_ASSIGN_OR_RETURN(master_, allocate_on(zero_.optimizer, flat_bytes(4), "fp32 master params"));
    ZINF_ASSIGN_OR_RETURN(adam_m_, allocate_on(zero_.optimizer, flat_bytes(4), "Adam m"));
    ZINF_ASSIGN_OR_RETURN(adam_v_, allocate_on(zero_.optimizer, flat_bytes(4), "Adam v"));
  }
  if (zero_.optimizer == Tier::kCpu && mixed() && zero_.params != Tier::kCpu) {
    ZINF_ASSIGN_OR_RETURN(params_out_, allocate_on(Tier::kCpu, flat_bytes(half), "new params after the step"));
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
        ZINF_ASSIGN_OR_RETURN(set.states, allocate_on(Tier::kCpu, static_cast<std::size_t>(shape.widest) * 12,
                                                      "optimizer pipeline buffer (master, m, v)"));
        if (mixed()) {
          ZINF_ASSIGN_OR_RETURN(set.params_out, allocate_on(Tier::kCpu, static_cast<std::size_t>(shape.widest) * half,
                                                            "optimizer pipeline buffer (new params)"));
        }
        set.copies_done = device_.create_event();
      }
      split_out_copied_ = device_.create_event();
      if (shape.split_out_bytes > 0) {
        ZINF_ASSIGN_OR_RETURN(split_out_, allocate_on(Tier::kCpu, static_cast<std::size_t>(shape.split_out_bytes),
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
    if (zero_.params == Tier::kNvme) {
      for (model::ParamId id = 0; id < table_.size(); ++id) nvme.planned_bytes += storage_bytes(id);
      largest_transfer = largest_storage;
    }
    for (const SubGroup& g : groups_) {
      const auto bytes = static_cast<std::uint64_t>(g.flat_end - g.flat_begin) * 12;
      nvme.planned_bytes += bytes;
      largest_transfer = std::max(largest_transfer, bytes);
    }
    nvme.largest_transfer_bytes = largest_transfer;
    nvme.engine = std::move(io_engine_);
    nvme.on_warning = on_warning_;
    ZINF_ASSIGN_OR_RETURN(nvme_, NvmeStateStore::open(std::move(nvme)));
    register_transfer_buffers();
  }

  std::vector<ParamHome> homes(static_cast<std::size_t>(table_.size()));
  for (model::ParamId id = 0; id < table_.size(); ++id) {
    ParamHome& home = homes[static_cast<std::size_t>(id)];
    home.tier = zero_.params;
    home.bytes = storage_bytes(id);
    home.slice_numel = partition_[id].slice_numel;
    if (zero_.params != Tier::kNvme) home.data = view(params_.data(), precision_, id, false).data();
  }
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
    coordination.persistence_threshold = zero_.params == Tier::kDevice ? 0 : zero_.persistence_threshold;
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
    const std::uint64_t transient =
        (zero_.params == Tier::kDevice ? 0 : zero_.max_live_bytes) + 3 * largest_fp32 + buckets;
    const std::uint64_t left = dev.capacity_bytes > dev.current_bytes ? dev.capacity_bytes - dev.current_bytes : 0;
    if (left < transient) {
      return Status::invalid_argument(fmt::format(
          "scenario.device_memory: {} leaves {} after the activations and the device-resident states ({}); the "
          "engine's buffers need {} ({} of gathered parameters, zero.max_live_bytes, {} of fp32 gradient and "
          "view buffers of the largest parameter, {} of gradient buckets, zero.reduce_bucket_bytes); raise "
          "device_memory to at least {} or lower zero.max_live_bytes",
          bytes_text(dev.capacity_bytes), bytes_text(left), bytes_text(dev.current_bytes), bytes_text(transient),
          bytes_text(zero_.params == Tier::kDevice ? 0 : zero_.max_live_bytes), bytes_text(3 * largest_fp32),
          bytes_text(buckets), bytes_text(dev.current_bytes + transient)));
    }
  }
  grad_pool_ = std::make_unique<BufferPool>(device_, BufferPool::Memory::kDevice,
                                            std::numeric_limits<std::uint64_t>::max(), "scenario.device_memory");
  computed_ = device_.create_event();
  reduced_ = device_.create_event();
  return Status::ok();
}

void PartitionedStates::register_transfer_buffers() {
  std::vector<device::DeviceBuffer*> buffers;
  for (PipelineSet& set : sets_) {
    buffers.push_back(&set.states);
    buffers.push_back(&set.params_out);
  }
  buffers.push_back(&split_out_);
  if (zero_.params == spec::Tier::kNvme && zero_.optimizer == spec::Tier::kCpu) {
    // The sources of the parameters' NVMe writes: the new half values, or the fp32 master weights.
    buffers.push_back(mixed() ? &params_out_ : &master_);
  }
  for (device::DeviceBuffer* buffer : buffers) {
    if (buffer->empty()) continue;
    const Status status =
        nvme_->register_memory(std::span<std::byte>(static_cast<std::byte*>(buffer->data()), buffer->bytes()));
    if (!status.is_ok()) {
      if (on_warning_) on_warning_(status.message());  // it says what then happens
      return;
    }
  }
}

Status PartitionedStates::initialise() {
  using spec::Tier;
  device::Stream& compute = device_.stream(device::StreamRole::kCompute);
  if (!grads_.empty()) {
    if (zero_.grads == Tier::kDevice) {
      device_.zero(grads_.data(), grads_.bytes(), compute);
    } else {
      std::memset(grads_.data(), 0, grads_.bytes());
    }
  }
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
      device_.copy(view(master_.data(), DType::kF32, id, true).data(), values.data(), fp32.bytes(),
                   device::CopyKind::kHostToDevice, compute);
      device_.zero(view(adam_m_.data(), DType::kF32, id, true).data(), fp32.bytes(), compute);
      device_.zero(view(adam_v_.data(), DType::kF32, id, true).data(), fp32.bytes(), compute);
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
    if (zero_.params == Tier::kNvme) {
      ZINF_ASSIGN_OR_RETURN(
          const NvmeStateStore::ExtentId extent,
          nvme_->create(fmt::format("{} params of {}", dtype_name(precision_), table_[id].name),
                        std::span<const std::byte>(static_cast<const std::byte*>(source), storage_bytes(id))));
      param_extents_.push_back(extent);
      coordinator_->set_extent(id, extent);
    } else {
      device_.copy(view(params_.data(), precision_, id, false).data(), source, storage_bytes(id),
                   zero_.params == Tier::kDevice ? device::CopyKind::kHostToDevice : device::CopyKind::kHostToHost,
                   compute);
    }
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
  return {view(master_.data(), DType::kF32, id, false), view(adam_m_.data(), DType::kF32, id, false),
          view(adam_v_.data(), DType::kF32, id, false)};
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
  const auto index = static_cast<std::size_t>(id);
  const model::ParamInfo& info = table_[id];
  if (zero_.grads == spec::Tier::kDevice && !mixed() && !gathering()) {
    grad_out_[index] = true;
    return view(grads_.data(), DType::kF32, id, true).view(info.shape);
  }
  // Asked again before the commit (a tied weight), the same buffer: both contributions land in it.
  if (grad_out_[index]) return Tensor(grad_workspaces_[index].data(), DType::kF32, info.shape, &device_);
  // Gathering, the buffer spans every rank's padded slice, the shape the reduce-scatter takes.
  const std::int64_t elements =
      gathering() ? partition_[id].slice_numel * partition_.world_size() : static_cast<std::int64_t>(info.numel);
  ZINF_ASSIGN_OR_RETURN(grad_workspaces_[index], grad_pool_->take(static_cast<std::size_t>(elements) * 4,
                                                                  fmt::format("fp32 gradient of {}", info.name)));
  const Tensor values(grad_workspaces_[index].data(), DType::kF32, info.shape, &device_);
  if (gathering()) {
    // Each step's gradient is committed once and reduced whole: no earlier contribution to add.
    device_.ops().zero(values);
  } else if (zero_.grads == spec::Tier::kDevice) {
    // The gradient so far (zero after zero_grads()), as ZeRO-0 hands it out.
    device_.ops().copy(values, view(grads_.data(), precision_, id, true).view(info.shape));
  } else {
    device_.ops().zero(values);
  }
  grad_out_[index] = true;
  return values;
}

Status PartitionedStates::track_d2h(std::size_t bytes) {
  // At most max_live_bytes of gradients travel to the host at once (at least one).
  const std::uint64_t cap = std::max<std::uint64_t>(zero_.max_live_bytes, 64 * kMiB);
  while (!d2h_in_flight_.empty() && (d2h_in_flight_.front().done->query() || d2h_in_flight_bytes_ + bytes > cap)) {
    ZINF_RETURN_IF_ERROR(d2h_in_flight_.front().done->synchronize());
    d2h_in_flight_bytes_ -= d2h_in_flight_.front().bytes;
    d2h_in_flight_.erase(d2h_in_flight_.begin());
  }
  return Status::ok();
}

Status PartitionedStates::commit(model::ParamId id) {
  ZINF_RETURN_IF_ERROR(store_gradient(id));
  return note_committed(id);
}

Status PartitionedStates::store_gradient(model::ParamId id) {
  ZINF_CHECK(id >= 0 && id < table_.size(), "commit: parameter id out of range");
  const auto index = static_cast<std::size_t>(id);
  ZINF_CHECK(grad_out_[index], "commit: the gradient buffer was not handed out");
  grad_out_[index] = false;
  if (zero_.grads == spec::Tier::kDevice && !mixed() && !gathering()) return Status::ok();
  const model::ParamInfo& info = table_[id];
  device::Stream& compute = device_.stream(device::StreamRole::kCompute);
  const Tensor values(grad_workspaces_[index].data(), DType::kF32, info.shape, &device_);
  if (gathering()) {
    if (!mixed()) return add_to_bucket(id, std::move(grad_workspaces_[index]), DType::kF32);
    // Rounded on the device first (DeepSpeed reduces in the training precision too): half the bytes
    // over the wire; the ranks' rounded gradients are summed in fp32 and rounded once per addition.
    ZINF_ASSIGN_OR_RETURN(
        device::DeviceBuffer rounded,
        grad_pool_->take(static_cast<std::size_t>(partition_[id].slice_numel * partition_.world_size()) *
                             dtype_size_bytes(precision_),
                         fmt::format("{} gradient of {}", dtype_name(precision_), info.name)));
    device_.ops().copy(Tensor(rounded.data(), precision_, info.shape, &device_), values);
    grad_pool_->give(std::move(grad_workspaces_[index]), compute);
    return add_to_bucket(id, std::move(rounded), precision_);
  }
  if (zero_.grads == spec::Tier::kDevice) {
    device_.ops().copy(view(grads_.data(), precision_, id, true).view(info.shape), values);
    grad_pool_->give(std::move(grad_workspaces_[index]), compute);
    return Status::ok();
  }
  // Rounded on the device (as ZeRO-0 rounds), then copied down behind the rest of the backward pass.
  device::Stream& d2h = device_.stream(device::StreamRole::kDeviceToHost);
  const std::size_t bytes = storage_bytes(id);
  ZINF_RETURN_IF_ERROR(track_d2h(bytes));
  device::DeviceBuffer staging;
  const void* source = values.data();
  if (mixed()) {
    ZINF_ASSIGN_OR_RETURN(staging,
                          grad_pool_->take(bytes, fmt::format("{} gradient of {}", dtype_name(precision_), info.name)));
    device_.ops().copy(Tensor(staging.data(), precision_, info.shape, &device_), values);
    source = staging.data();
  }
  compute.record(*computed_);
  copy_grad_down(id, source, bytes, *computed_);
  grad_pool_->give(std::move(grad_workspaces_[index]), d2h);
  grad_pool_->give(std::move(staging), d2h);
  return Status::ok();
}

void PartitionedStates::copy_grad_down(model::ParamId id, const void* source, std::size_t bytes, device::Event& ready) {
  device::Stream& d2h = device_.stream(device::StreamRole::kDeviceToHost);
  d2h.wait(ready);
  device_.copy(view(grads_.data(), precision_, id, false).data(), source, bytes, device::CopyKind::kDeviceToHost, d2h);
  std::unique_ptr<device::Event> done = device_.create_event();
  d2h.record(*done);
  d2h_in_flight_.push_back({std::move(done), bytes});
  d2h_in_flight_bytes_ += bytes;
  device_to_host_.forward_backward += bytes;
  grad_staging_peak_ = std::max(grad_staging_peak_, grad_pool_->peak_owned_bytes());
}

Status PartitionedStates::zero_grads() {
  ZINF_CHECK(std::none_of(grad_out_.begin(), grad_out_.end(), [](bool out) { return out; }),
             "zero_grads: a gradient buffer is still handed out");
  // Host gradients are overwritten whole by each commit; device ones are accumulated into.
  if (zero_.grads == spec::Tier::kDevice) {
    device_.zero(grads_.data(), grads_.bytes(), device_.stream(device::StreamRole::kCompute));
  }
  return Status::ok();
}

std::vector<StateBytes> PartitionedStates::state_bytes() const {
  using spec::Tier;
  std::vector<StateBytes> out;
  const auto param_bytes = [&] {
    std::uint64_t sum = 0;
    for (model::ParamId id = 0; id < table_.size(); ++id) sum += storage_bytes(id);
    return sum;
  };
  out.push_back({"params", zero_.params, zero_.params == Tier::kNvme ? param_bytes() : params_.bytes()});
  out.push_back({"grads", zero_.grads, grads_.bytes()});
  std::uint64_t optimizer_nvme = 0;
  for (const SubGroup& g : groups_) optimizer_nvme += static_cast<std::uint64_t>(g.flat_end - g.flat_begin) * 4;
  for (const auto& [name, buffer] :
       {std::pair{"master_params", &master_}, std::pair{"adam_m", &adam_m_}, std::pair{"adam_v", &adam_v_}}) {
    out.push_back({name, zero_.optimizer, zero_.optimizer == Tier::kNvme ? optimizer_nvme : buffer->bytes()});
  }
  if (!params_out_.empty()) out.push_back({"params_staging", Tier::kCpu, params_out_.bytes()});
  std::uint64_t pipeline = 0;
  for (const PipelineSet& set : sets_) pipeline += set.states.bytes() + set.params_out.bytes();
  pipeline += split_out_.bytes();
  if (pipeline > 0) out.push_back({"optimizer_pipeline", Tier::kCpu, pipeline});
  if (coordinator_->persistent_bytes() > 0)
    out.push_back({"persistent_params", Tier::kDevice, coordinator_->persistent_bytes()});
  if (zero_.params != Tier::kDevice)
    out.push_back({"gathered_params_peak", Tier::kDevice, coordinator_->live_peak_bytes()});
  if (coordinator_->staging_peak_bytes() > 0)
    out.push_back({"nvme_read_staging_peak", Tier::kCpu, coordinator_->staging_peak_bytes()});
  out.push_back({"gradient_buffers_peak", Tier::kDevice, grad_pool_->peak_owned_bytes()});
  return out;
}

EngineStats PartitionedStates::stats() const {
  EngineStats stats;
  coordinator_->add_stats(stats);
  stats.device_to_host = device_to_host_;
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
  if (zero_.params != spec::Tier::kDevice) {
    line += fmt::format("; live params {}, persistent <= {} elements ({})", bytes_text(zero_.max_live_bytes),
                        zero_.persistence_threshold, bytes_text(coordinator_->persistent_bytes()));
  }
  if (zero_.params == spec::Tier::kNvme) line += fmt::format(", prefetch {}", bytes_text(zero_.prefetch_bytes));
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
