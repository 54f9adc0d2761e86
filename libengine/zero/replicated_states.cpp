#include "libengine/zero/replicated_states.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <span>

#include <fmt/format.h>

#include "libengine/core/check.h"

namespace zinf::zero {
namespace {

// Offsets are rounded up to 32 elements: 64 bytes for the half arrays and 128 for the fp32 ones,
// so one offset table serves every flat buffer and every parameter starts on a cache line (the
// vector kernels then never split a load of a parameter's first elements across two lines).
constexpr std::int64_t kAlignElements = 32;
constexpr std::size_t kWorkspaceAlignBytes = 64;

std::int64_t round_up(std::int64_t value, std::int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

Shape flat_shape(std::int64_t numel) { return Shape{numel}; }

}  // namespace

ReplicatedStates::ReplicatedStates(const model::ParamTable& table, device::Device& device,
                                   const ReplicatedStatesOptions& options)
    : table_(table),
      device_(device),
      precision_(options.precision),
      compute_dtype_(options.compute_dtype),
      seed_(options.seed),
      comm_(options.comm) {
  const auto count = static_cast<std::size_t>(table.size());
  offsets_.resize(count);
  for (std::size_t id = 0; id < count; ++id) {
    offsets_[id] = padded_numel_;
    padded_numel_ += round_up(table.params()[id].numel, kAlignElements);
  }
  param_workspaces_.resize(count);
  grad_workspaces_.resize(count);
  acquired_.assign(count, false);
  grad_out_.assign(count, false);
}

ReplicatedStates::~ReplicatedStates() = default;

Result<std::unique_ptr<ReplicatedStates>> ReplicatedStates::create(const model::ParamTable& table,
                                                                   device::Device& device,
                                                                   const ReplicatedStatesOptions& options) {
  if (table.size() == 0 || table.total_numel() == 0) {
    return Status::invalid_argument("model states: the parameter table is empty; there is nothing to train");
  }
  if (options.compute_dtype != DType::kF32 && options.compute_dtype != options.precision) {
    return Status::invalid_argument(fmt::format(
        "model states: compute precision {} with {} storage is not supported (allowed: fp32, or the storage "
        "precision itself)",
        dtype_name(options.compute_dtype), dtype_name(options.precision)));
  }
  if (!device.ops().supports_compute_dtype(options.compute_dtype)) {
    return Status::invalid_argument(
        fmt::format("model states: {} cannot compute in {}", device.describe(), dtype_name(options.compute_dtype)));
  }
  std::unique_ptr<ReplicatedStates> states(new ReplicatedStates(table, device, options));
  ZINF_RETURN_IF_ERROR(states->allocate_states());
  ZINF_RETURN_IF_ERROR(states->initialise_params());
  return states;
}

Tensor ReplicatedStates::flat_view(const device::DeviceBuffer& buffer, DType dtype, std::int64_t offset,
                                   Shape shape) const {
  auto* base = static_cast<std::byte*>(buffer.data());
  return Tensor(base + static_cast<std::size_t>(offset) * dtype_size_bytes(dtype), dtype, shape, &device_);
}

Status ReplicatedStates::allocate_states() {
  const auto fp32_bytes = static_cast<std::size_t>(padded_numel_) * 4;
  const std::size_t storage_bytes = static_cast<std::size_t>(padded_numel_) * dtype_size_bytes(precision_);
  const std::string name(dtype_name(precision_));
  // In state_bytes() order; a failure releases what was allocated before it (the buffers are RAII
  // members of an object the caller never receives).
  ZINF_ASSIGN_OR_RETURN(params_, device_.allocate(storage_bytes, name + " params"));
  ZINF_ASSIGN_OR_RETURN(grads_, device_.allocate(storage_bytes, name + " grads"));
  if (mixed()) {
    ZINF_ASSIGN_OR_RETURN(master_, device_.allocate(fp32_bytes, "fp32 master params"));
  }
  ZINF_ASSIGN_OR_RETURN(adam_m_, device_.allocate(fp32_bytes, "Adam m"));
  ZINF_ASSIGN_OR_RETURN(adam_v_, device_.allocate(fp32_bytes, "Adam v"));
  // Zeroed explicitly: the contract ("grads and moments start at zero", padding stays zero, so a
  // sum of squares over a flat buffer equals the parameters') must not rest on whether a backend
  // zero-fills its allocations (the CPU backend does, CUDA's pool does not).
  device::Stream& compute = device_.stream(device::StreamRole::kCompute);
  for (const device::DeviceBuffer* buffer : {&params_, &grads_, &master_, &adam_m_, &adam_v_}) {
    if (!buffer->empty()) device_.zero(buffer->data(), buffer->bytes(), compute);
  }
  return compute.synchronize();
}

Status ReplicatedStates::initialise_params() {
  const device::DeviceBuffer& master = mixed() ? master_ : params_;
  device::Stream& compute = device_.stream(device::StreamRole::kCompute);
  // Values are computed on the host one parameter at a time and copied in, so the host needs one
  // parameter's worth of memory, not the model's.
  std::vector<float> values;
  for (model::ParamId id = 0; id < table_.size(); ++id) {
    const std::int64_t numel = table_[id].numel;
    values.resize(static_cast<std::size_t>(numel));
    table_.init_values(seed_, id, 0, std::span<float>(values));
    const Tensor dst = flat_view(master, DType::kF32, offsets_[static_cast<std::size_t>(id)], flat_shape(numel));
    device_.copy(dst.data(), values.data(), dst.bytes(), device::CopyKind::kHostToDevice, compute);
    // The host vector is reused for the next parameter: wait for this copy first.
    ZINF_RETURN_IF_ERROR(compute.synchronize());
  }
  refresh_working_copy();
  return compute.synchronize();
}

void ReplicatedStates::refresh_working_copy() {
  if (!mixed()) return;
  device_.ops().copy(flat_view(params_, precision_, 0, flat_shape(padded_numel_)),
                     flat_view(master_, DType::kF32, 0, flat_shape(padded_numel_)));
}

Result<device::DeviceBuffer> ReplicatedStates::take_workspace(std::size_t bytes, model::ParamId id) {
  const std::size_t rounded = (bytes + kWorkspaceAlignBytes - 1) / kWorkspaceAlignBytes * kWorkspaceAlignBytes;
  for (auto it = free_workspaces_.begin(); it != free_workspaces_.end(); ++it) {
    if (it->first == rounded) {
      device::DeviceBuffer buffer = std::move(it->second);
      free_workspaces_.erase(it);
      return buffer;
    }
  }
  // Pooled by exact size: a step repeats the previous step's calls, so after the first step every
  // request finds a free buffer of its size and nothing is allocated.
  ZINF_ASSIGN_OR_RETURN(device::DeviceBuffer buffer,
                        device_.allocate(rounded, fmt::format("fp32 workspace for {}", table_[id].name)));
  workspace_bytes_ += rounded;
  return buffer;
}

Result<Tensor> ReplicatedStates::widen_into_workspace(const Tensor& stored, model::ParamId id,
                                                      device::DeviceBuffer& slot) {
  ZINF_ASSIGN_OR_RETURN(device::DeviceBuffer workspace,
                        take_workspace(static_cast<std::size_t>(stored.numel()) * 4, id));
  const Tensor values(workspace.data(), DType::kF32, stored.shape(), &device_);
  device_.ops().copy(values, stored);
  slot = std::move(workspace);
  return values;
}

void ReplicatedStates::return_workspace(device::DeviceBuffer buffer) {
  // Reuse is safe without waiting: every user of a workspace runs on the compute stream, in order.
  const std::size_t bytes = buffer.bytes();
  free_workspaces_.emplace_back(bytes, std::move(buffer));
}

Result<Tensor> ReplicatedStates::acquire(model::ParamId id) {
  ZINF_CHECK(id >= 0 && id < table_.size(), "acquire: parameter id out of range");
  const auto index = static_cast<std::size_t>(id);
  ZINF_CHECK(!acquired_[index], "acquire: parameter is already acquired");
  const model::ParamInfo& info = table_[id];
  const Tensor stored = flat_view(params_, precision_, offsets_[index], info.shape);
  if (compute_dtype_ == precision_) {
    acquired_[index] = true;
    return stored;
  }
  ZINF_ASSIGN_OR_RETURN(Tensor values, widen_into_workspace(stored, id, param_workspaces_[index]));
  acquired_[index] = true;
  return values;
}

void ReplicatedStates::release(model::ParamId id) {
  ZINF_CHECK(id >= 0 && id < table_.size(), "release: parameter id out of range");
  const auto index = static_cast<std::size_t>(id);
  ZINF_CHECK(acquired_[index], "release: parameter is not acquired");
  acquired_[index] = false;
  if (!param_workspaces_[index].empty()) return_workspace(std::move(param_workspaces_[index]));
}

Result<Tensor> ReplicatedStates::grad_buffer(model::ParamId id) {
  ZINF_CHECK(id >= 0 && id < table_.size(), "grad_buffer: parameter id out of range");
  const auto index = static_cast<std::size_t>(id);
  const model::ParamInfo& info = table_[id];
  // Asked again before the commit (a tied weight: the head, then the embedding), the same buffer is
  // handed out, so both contributions land in it before the one commit.
  if (!mixed()) {
    grad_out_[index] = true;
    return flat_view(grads_, DType::kF32, offsets_[index], info.shape);
  }
  if (grad_out_[index]) return Tensor(grad_workspaces_[index].data(), DType::kF32, info.shape, &device_);
  // The gradient so far, not zeros: a parameter used twice in one backward (or over several
  // micro-batches) accumulates instead of the second commit overwriting the first.
  ZINF_ASSIGN_OR_RETURN(Tensor values, widen_into_workspace(flat_view(grads_, precision_, offsets_[index], info.shape),
                                                            id, grad_workspaces_[index]));
  grad_out_[index] = true;
  return values;
}

Status ReplicatedStates::commit(model::ParamId id) {
  ZINF_CHECK(id >= 0 && id < table_.size(), "commit: parameter id out of range");
  const auto index = static_cast<std::size_t>(id);
  ZINF_CHECK(grad_out_[index], "commit: the gradient buffer was not handed out");
  grad_out_[index] = false;
  if (!mixed()) return Status::ok();
  const model::ParamInfo& info = table_[id];
  device_.ops().copy(flat_view(grads_, precision_, offsets_[index], info.shape),
                     Tensor(grad_workspaces_[index].data(), DType::kF32, info.shape, &device_));
  return_workspace(std::move(grad_workspaces_[index]));
  return Status::ok();
}

Status ReplicatedStates::zero_grads() {
  ZINF_CHECK(std::none_of(grad_out_.begin(), grad_out_.end(), [](bool out) { return out; }),
             "zero_grads: a gradient buffer is still handed out");
  device_.zero(grads_.data(), grads_.bytes(), device_.stream(device::StreamRole::kCompute));
  return Status::ok();
}

std::vector<StateBytes> ReplicatedStates::state_bytes() const {
  constexpr spec::Tier kDevice = spec::Tier::kDevice;
  return {
      {"params", kDevice, params_.bytes()},
      {"grads", kDevice, grads_.bytes()},
      {"master_params", kDevice, mixed() ? master_.bytes() : 0},
      {"adam_m", kDevice, adam_m_.bytes()},
      {"adam_v", kDevice, adam_v_.bytes()},
      {"workspace", kDevice, workspace_bytes_},
  };
}

Result<optim::StepReport> ReplicatedStates::optimizer_step(optim::Optimizer& optimizer, double lr,
                                                           optim::LossScaler& scaler) {
  ZINF_RETURN_IF_ERROR(check_state_slots(optimizer));
  const device::ProfilerRange range(device_, "optimizer");
  device::Ops& ops = device_.ops();
  std::vector<Tensor> grads;
  grads.reserve(static_cast<std::size_t>(table_.size()));
  for (model::ParamId id = 0; id < table_.size(); ++id) grads.push_back(param_states(id).grad);
  if (comm_ != nullptr && comm_->world_size() > 1) {
    // Sum the ranks' gradients in place after the backward pass (in the storage precision, as
    // DeepSpeed's ZeRO-0/1 all-reduce does); every rank then steps identically.
    device::Stream& compute = device_.stream(device::StreamRole::kCompute);
    device::Stream& collective = device_.stream(device::StreamRole::kCollective);
    const std::unique_ptr<device::Event> computed = device_.create_event();
    compute.record(*computed);
    collective.wait(*computed);
    for (const Tensor& grad : grads) {
      comm_->all_reduce(grad.data(), grad.data(), static_cast<std::size_t>(grad.numel()), grad.dtype(), collective);
    }
    ZINF_RETURN_IF_ERROR(collective.synchronize());
  }
  const double sum_squares = ops.sum_squares(grads);
  // A failed kernel also reads as NaN (Ops' contract): report that, not a gradient overflow.
  if (!std::isfinite(sum_squares)) ZINF_RETURN_IF_ERROR(device_.synchronize());
  ZINF_ASSIGN_OR_RETURN(const optim::StepPlan plan, optimizer.begin_step(lr, sum_squares, scaler));
  if (!plan.apply) return plan.report;
  for (model::ParamId id = 0; id < table_.size(); ++id) {
    const ParamStates p = param_states(id);
    const std::array<Tensor, optim::kMaxStateSlots> slots{p.exp_avg, p.exp_avg_sq};
    optimizer.step_slice(ops, plan, table_[id].weight_decay, p.master,
                         std::span<const Tensor>(slots).first(static_cast<std::size_t>(optimizer.state_slots())),
                         p.grad, p.param_half.data() != nullptr ? &p.param_half : nullptr);
  }
  optim::Optimizer::end_step(plan, scaler);
  return plan.report;
}

std::vector<CheckpointArrayInfo> ReplicatedStates::checkpoint_layout() const {
  return standard_checkpoint_layout(table_);
}

Status ReplicatedStates::save_checkpoint(CheckpointSink& sink) {
  ZINF_ASSIGN_OR_RETURN(const std::vector<NamedArray> arrays, checkpoint_arrays());
  ZINF_RETURN_IF_ERROR(pull_checkpoint_arrays());
  for (std::size_t i = 0; i < arrays.size(); ++i) ZINF_RETURN_IF_ERROR(sink.write(i, arrays[i].values));
  return Status::ok();
}

Status ReplicatedStates::load_checkpoint(CheckpointSource& source) {
  ZINF_ASSIGN_OR_RETURN(const std::vector<NamedArray> arrays, checkpoint_arrays());
  for (std::size_t i = 0; i < arrays.size(); ++i) ZINF_RETURN_IF_ERROR(source.read(i, arrays[i].values));
  return push_checkpoint_arrays();
}

std::array<const device::DeviceBuffer*, 3> ReplicatedStates::checkpointed_states() const {
  return {mixed() ? &master_ : &params_, &adam_m_, &adam_v_};
}

Result<std::vector<NamedArray>> ReplicatedStates::checkpoint_arrays() {
  const std::array<const device::DeviceBuffer*, 3> states = checkpointed_states();
  std::array<float*, 3> bases{};
  if (host_addressable()) {
    for (std::size_t kind = 0; kind < 3; ++kind) bases[kind] = static_cast<float*>(states[kind]->data());
  } else {
    if (checkpoint_mirror_.empty()) {
      ZINF_ASSIGN_OR_RETURN(checkpoint_mirror_,
                            device_.allocate_host(3 * states[0]->bytes(), "host copy of the states for checkpoints"));
    }
    auto* mirror = static_cast<float*>(checkpoint_mirror_.data());
    bases = {mirror, mirror + padded_numel_, mirror + 2 * padded_numel_};
  }
  const std::array<const char*, 3> prefixes{"master/", "adam_m/", "adam_v/"};
  std::vector<NamedArray> arrays;
  arrays.reserve(3 * static_cast<std::size_t>(table_.size()));
  for (std::size_t kind = 0; kind < 3; ++kind) {
    for (model::ParamId id = 0; id < table_.size(); ++id) {
      const model::ParamInfo& info = table_[id];
      arrays.push_back(NamedArray{std::string(prefixes[kind]) + info.name,
                                  std::span<float>(bases[kind] + offsets_[static_cast<std::size_t>(id)],
                                                   static_cast<std::size_t>(info.numel))});
    }
  }
  return arrays;
}

Status ReplicatedStates::pull_checkpoint_arrays() {
  device::Stream& compute = device_.stream(device::StreamRole::kCompute);
  if (host_addressable()) return compute.synchronize();
  ZINF_CHECK(!checkpoint_mirror_.empty(), "pull_checkpoint_arrays: checkpoint_arrays() was not called");
  auto* mirror = static_cast<std::byte*>(checkpoint_mirror_.data());
  for (const device::DeviceBuffer* state : checkpointed_states()) {
    device_.copy(mirror, state->data(), state->bytes(), device::CopyKind::kDeviceToHost, compute);
    mirror += state->bytes();
  }
  return compute.synchronize();
}

Status ReplicatedStates::push_checkpoint_arrays() {
  device::Stream& compute = device_.stream(device::StreamRole::kCompute);
  if (!host_addressable()) {
    ZINF_CHECK(!checkpoint_mirror_.empty(), "push_checkpoint_arrays: checkpoint_arrays() was not called");
    const auto* mirror = static_cast<const std::byte*>(checkpoint_mirror_.data());
    for (const device::DeviceBuffer* state : checkpointed_states()) {
      device_.copy(state->data(), mirror, state->bytes(), device::CopyKind::kHostToDevice, compute);
      mirror += state->bytes();
    }
  }
  refresh_working_copy();
  return compute.synchronize();
}

ParamStates ReplicatedStates::param_states(model::ParamId id) {
  ZINF_CHECK(id >= 0 && id < table_.size(), "param_states: parameter id out of range");
  const auto index = static_cast<std::size_t>(id);
  ZINF_CHECK(!acquired_[index] && !grad_out_[index],
             "param_states: the parameter is acquired or its gradient buffer is handed out");
  const std::int64_t offset = offsets_[index];
  const Shape shape = flat_shape(table_[id].numel);
  ParamStates states;
  states.master = flat_view(mixed() ? master_ : params_, DType::kF32, offset, shape);
  states.exp_avg = flat_view(adam_m_, DType::kF32, offset, shape);
  states.exp_avg_sq = flat_view(adam_v_, DType::kF32, offset, shape);
  states.grad = flat_view(grads_, precision_, offset, shape);
  if (mixed()) states.param_half = flat_view(params_, precision_, offset, shape);
  return states;
}

}  // namespace zinf::zero
