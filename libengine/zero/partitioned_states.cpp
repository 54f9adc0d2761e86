#include "libengine/zero/partitioned_states.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "libengine/core/check.h"
#include "libengine/core/units.h"
#include "libengine/memory/aligned_buffer.h"
#include "libengine/spec/sizing/engine_budgets.h"

namespace zinf::zero {
namespace {

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
  if (optimizer_) optimizer_->wait_for_worker();
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

  // The budgets (spec/sizing/engine_budgets.h, the planner's rule too), over whole parameters
  // (every rank's padded slice): the same on every rank.
  std::vector<std::int64_t> numels;
  for (model::ParamId id = 0; id < table_.size(); ++id) numels.push_back(table_[id].numel);
  const sizing::ParamSizes sizes =
      sizing::param_sizes(numels, zero_.persistence_threshold, half, partition_.world_size());
  zero_ = sizing::resolve_budgets(zero_, sizes);

  ZINF_ASSIGN_OR_RETURN(grads_, make_store(zero_.grads, precision_, storage_name + " grads"));
  // The optimizer states, their sub-groups and pipeline buffers, sized by what the host budget has
  // left after the stores above.
  ZINF_ASSIGN_OR_RETURN(optimizer_, OptimizerPipeline::create(table_, partition_, device_, zero_, precision_, *params_,
                                                              *grads_, gathering()));

  if (zero_.uses_nvme()) {
    NvmeStateStoreOptions nvme;
    nvme.paths = zero_.nvme_paths;
    std::uint64_t largest_transfer = 0;
    nvme.planned_bytes = params_->planned_nvme_bytes();
    if (nvme.planned_bytes > 0) largest_transfer = sizes.largest_storage;
    nvme.planned_bytes += optimizer_->planned_nvme_bytes();
    largest_transfer = std::max(largest_transfer, optimizer_->largest_nvme_transfer_bytes());
    nvme.largest_transfer_bytes = largest_transfer;
    nvme.engine = std::move(io_engine_);
    nvme.on_warning = on_warning_;
    ZINF_ASSIGN_OR_RETURN(nvme_, NvmeStateStore::open(std::move(nvme)));
    params_->attach(nvme_.get());
    optimizer_->register_transfer_buffers(*nvme_, on_warning_);
  }

  if (comm_ != nullptr) order_ = std::make_unique<CollectiveOrder>(*comm_);
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
  coordination.comm = order_.get();
  Result<std::unique_ptr<ParamCoordinator>> coordinator =
      ParamCoordinator::create(table_, device_, *params_, nvme_.get(), coordination);
  if (!coordinator.is_ok()) {
    return as_field_error(coordinator.status(), "scenario.device_memory",
                          "raise it or lower zero.persistence_threshold");
  }
  coordinator_ = std::move(coordinator).value();

  // What the engine takes from the device budget while it runs: gathered parameters, fp32 gradient
  // buffers and compute-precision views of the largest parameter. Refused now, not at step 1.
  const memory::TierUsage dev = device_.memory().usage();
  if (dev.capacity_bytes > 0) {
    const sizing::TransientDeviceBytes need = sizing::transient_device_bytes(zero_, sizes, gathering());
    const std::uint64_t transient = need.total();
    const std::uint64_t left = dev.capacity_bytes > dev.current_bytes ? dev.capacity_bytes - dev.current_bytes : 0;
    if (left < transient) {
      return Status::invalid_argument(fmt::format(
          "scenario.device_memory: {} leaves {} after the activations and the device-resident states ({}); the "
          "engine's buffers need {} ({} of gathered parameters, zero.max_live_bytes, {} of fp32 gradient and "
          "view buffers of the largest parameter, {} of gradient buckets, zero.reduce_bucket_bytes); raise "
          "device_memory to at least {} or lower zero.max_live_bytes",
          bytes_text(dev.capacity_bytes), bytes_text(left), bytes_text(dev.current_bytes), bytes_text(transient),
          bytes_text(need.gathered), bytes_text(need.fp32_buffers), bytes_text(need.buckets),
          bytes_text(dev.current_bytes + transient)));
    }
  }
  reducer_ = std::make_unique<GradientReducer>(table_, partition_, device_, *grads_, order_.get(), zero_, precision_);
  optimizer_->connect(nvme_.get(), *coordinator_, *reducer_);
  scheduler_ = std::make_unique<StepScheduler>(*coordinator_, *reducer_, *optimizer_, nvme_.get(), order_.get());
  return Status::ok();
}

Status PartitionedStates::initialise() {
  device::Stream& compute = device_.stream(device::StreamRole::kCompute);
  grads_->zero(compute);
  if (nvme_) nvme_->set_phase(TrafficPhase::kOther);
  std::vector<float> values;
  std::vector<std::byte> stored;
  for (model::ParamId id = 0; id < table_.size(); ++id) {
    const ParamSlice& slice = partition_[id];
    values.assign(static_cast<std::size_t>(slice.owned), 0.0f);
    table_.init_values(seed_, id, slice.begin, std::span<float>(values));
    const Tensor fp32(values.data(), DType::kF32, Shape{slice.owned});
    // The master weights.
    ZINF_RETURN_IF_ERROR(optimizer_->put_initial_states(id, values.data(), compute));
    // The parameters in storage precision, where they live.
    const void* source = values.data();
    if (mixed()) {
      stored.resize(storage_bytes(id));
      host_ops_.copy(Tensor(stored.data(), precision_, Shape{slice.owned}), fp32);
      source = stored.data();
    }
    ZINF_RETURN_IF_ERROR(params_->put(id, source, compute));
    // Into the persistent device copy, if it has one (the store now knows its NVMe extent).
    (void)coordinator_->publish(id, source, {});
    // The host vectors are reused for the next parameter: wait for these copies first.
    ZINF_RETURN_IF_ERROR(compute.synchronize());
    ZINF_RETURN_IF_ERROR(coordinator_->wait_published());
  }
  optimizer_->finish_initial_states();
  if (nvme_) nvme_->set_phase(TrafficPhase::kForwardBackward);
  return device_.synchronize();
}

void PartitionedStates::begin_phase(model::Phase phase) { scheduler_->begin_phase(phase); }

Result<Tensor> PartitionedStates::acquire(model::ParamId id) { return scheduler_->acquire(id); }

Result<Tensor> PartitionedStates::grad_buffer(model::ParamId id) {
  ZINF_CHECK(id >= 0 && id < table_.size(), "grad_buffer: parameter id out of range");
  return scheduler_->grad_buffer(id);
}

Status PartitionedStates::zero_grads() { return reducer_->zero_grads(); }

Status PartitionedStates::commit(model::ParamId id) { return scheduler_->commit(id); }

Status PartitionedStates::prepare_step(const optim::Optimizer& optimizer, double lr, const optim::LossScaler& scaler) {
  ZINF_RETURN_IF_ERROR(check_state_slots(optimizer));
  return scheduler_->prepare_step(optimizer, lr, scaler);
}

Result<optim::StepReport> PartitionedStates::optimizer_step(optim::Optimizer& optimizer, double lr,
                                                            optim::LossScaler& scaler) {
  ZINF_RETURN_IF_ERROR(check_state_slots(optimizer));
  return scheduler_->optimizer_step(optimizer, lr, scaler);
}

std::vector<CheckpointArrayInfo> PartitionedStates::checkpoint_layout() const {
  return partitioned_checkpoint_layout(table_, partition_);
}

Status PartitionedStates::save_checkpoint(CheckpointSink& sink) { return optimizer_->save_checkpoint(sink); }

Status PartitionedStates::load_checkpoint(CheckpointSource& source) {
  ZINF_RETURN_IF_ERROR(optimizer_->load_checkpoint(source));
  return scheduler_->step_boundary();
}

std::vector<StateBytes> PartitionedStates::state_bytes() const {
  using spec::Tier;
  std::vector<StateBytes> out;
  out.push_back({"params", params_->tier(), params_->bytes()});
  out.push_back({"grads", grads_->tier(), grads_->bytes()});
  optimizer_->add_state_bytes(out);
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
  optimizer_->add_stats(stats);
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
  line += optimizer_->describe();
  if (nvme_) line += "; " + nvme_->describe();
  return line;
}

}  // namespace zinf::zero
