#include "libengine/zero/replicated_states.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "libengine/core/check.h"

namespace zinf::zero {
namespace {

// Offsets are rounded up to 32 elements: 64 bytes for the half arrays and 128 for the fp32 ones,
// so one offset table serves every flat buffer and every parameter starts on a cache line (the
// vector kernels then never split a load of a parameter's first elements across two lines).
constexpr std::int64_t kAlignElements = 32;
constexpr std::size_t kWorkspaceAlignBytes = 64;

std::int64_t round_up(std::int64_t value, std::int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// Conversions of large parameters are split into chunks over OpenMP threads (the convert kernels
// are single-threaded by contract); 64 Ki elements per chunk keeps small parameters on one thread.
constexpr std::int64_t kConvertChunk = 64 * 1024;

void widen(kernels::HalfFormat format, const std::uint16_t* in, float* out, std::int64_t n) {
  const std::int64_t chunks = (n + kConvertChunk - 1) / kConvertChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t begin = c * kConvertChunk;
    const std::int64_t count = std::min(kConvertChunk, n - begin);
    kernels::cpu::half_to_f32(format, in + begin, out + begin, static_cast<std::size_t>(count));
  }
}

void narrow(kernels::HalfFormat format, const float* in, std::uint16_t* out, std::int64_t n) {
  const std::int64_t chunks = (n + kConvertChunk - 1) / kConvertChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t begin = c * kConvertChunk;
    const std::int64_t count = std::min(kConvertChunk, n - begin);
    kernels::cpu::f32_to_half(format, in + begin, out + begin, static_cast<std::size_t>(count));
  }
}

}  // namespace

ReplicatedStates::ReplicatedStates(const model::ParamTable& table, device::Device& device,
                                   const ReplicatedStatesOptions& options)
    : table_(table),
      device_(device),
      precision_(options.precision),
      half_format_(options.precision == DType::kF16 ? kernels::HalfFormat::kF16 : kernels::HalfFormat::kBF16),
      seed_(options.seed) {
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
  if (device.kind() != device::DeviceKind::kCpu) {
    return Status::invalid_argument(fmt::format(
        "model states: ZeRO-0 replicated states run the CPU kernels on device memory, which {} cannot "
        "provide; use the cpu device", device.describe()));
  }
  std::unique_ptr<ReplicatedStates> states(new ReplicatedStates(table, device, options));
  ZINF_RETURN_IF_ERROR(states->allocate_states());
  states->initialise_params();
  return states;
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
  // The CPU backend zero-fills allocations; zero explicitly anyway so the contract ("grads and
  // moments start at zero", padding stays zero) does not rest on a backend detail.
  std::memset(adam_m_.data(), 0, adam_m_.bytes());
  std::memset(adam_v_.data(), 0, adam_v_.bytes());
  std::memset(params_.data(), 0, params_.bytes());
  std::memset(grads_.data(), 0, grads_.bytes());
  if (mixed()) std::memset(master_.data(), 0, master_.bytes());
  return Status::ok();
}

void ReplicatedStates::initialise_params() {
  float* master = static_cast<float*>(mixed() ? master_.data() : params_.data());
  for (model::ParamId id = 0; id < table_.size(); ++id) {
    const std::int64_t numel = table_[id].numel;
    table_.init_values(seed_, id, 0, std::span<float>(master + offsets_[static_cast<std::size_t>(id)],
                                                      static_cast<std::size_t>(numel)));
  }
  refresh_working_copy();
}

void ReplicatedStates::refresh_working_copy() {
  if (!mixed()) return;
  narrow(half_format_, static_cast<const float*>(master_.data()), static_cast<std::uint16_t*>(params_.data()),
         padded_numel_);
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

void ReplicatedStates::return_workspace(device::DeviceBuffer buffer) {
  const std::size_t bytes = buffer.bytes();
  free_workspaces_.emplace_back(bytes, std::move(buffer));
}

Result<Tensor> ReplicatedStates::acquire(model::ParamId id) {
  ZINF_CHECK(id >= 0 && id < table_.size(), "acquire: parameter id out of range");
  const auto index = static_cast<std::size_t>(id);
  ZINF_CHECK(!acquired_[index], "acquire: parameter is already acquired");
  const model::ParamInfo& info = table_[id];
  if (!mixed()) {
    acquired_[index] = true;
    return Tensor(static_cast<float*>(params_.data()) + offsets_[index], DType::kF32, info.shape, &device_);
  }
  ZINF_ASSIGN_OR_RETURN(device::DeviceBuffer workspace,
                        take_workspace(static_cast<std::size_t>(info.numel) * 4, id));
  auto* values = static_cast<float*>(workspace.data());
  widen(half_format_, static_cast<const std::uint16_t*>(params_.data()) + offsets_[index], values, info.numel);
  param_workspaces_[index] = std::move(workspace);
  acquired_[index] = true;
  return Tensor(values, DType::kF32, info.shape, &device_);
}

void ReplicatedStates::release(model::ParamId id) {
  ZINF_CHECK(id >= 0 && id < table_.size(), "release: parameter id out of range");
  const auto index = static_cast<std::size_t>(id);
  ZINF_CHECK(acquired_[index], "release: parameter is not acquired");
  acquired_[index] = false;
  if (mixed()) return_workspace(std::move(param_workspaces_[index]));
}

Result<Tensor> ReplicatedStates::grad_buffer(model::ParamId id) {
  ZINF_CHECK(id >= 0 && id < table_.size(), "grad_buffer: parameter id out of range");
  const auto index = static_cast<std::size_t>(id);
  const model::ParamInfo& info = table_[id];
  if (grad_out_[index]) {
    // Handed out already in this backward (a tied weight: the head, then the embedding): the same
    // buffer, so both contributions land in it before the one commit.
    void* data = mixed() ? grad_workspaces_[index].data()
                         : static_cast<void*>(static_cast<float*>(grads_.data()) + offsets_[index]);
    return Tensor(data, DType::kF32, info.shape, &device_);
  }
  if (!mixed()) {
    grad_out_[index] = true;
    return Tensor(static_cast<float*>(grads_.data()) + offsets_[index], DType::kF32, info.shape, &device_);
  }
  ZINF_ASSIGN_OR_RETURN(device::DeviceBuffer workspace,
                        take_workspace(static_cast<std::size_t>(info.numel) * 4, id));
  auto* values = static_cast<float*>(workspace.data());
  // The gradient so far, not zeros: a parameter used twice in one backward (or over several
  // micro-batches) accumulates instead of the second commit overwriting the first.
  widen(half_format_, static_cast<const std::uint16_t*>(grads_.data()) + offsets_[index], values, info.numel);
  grad_workspaces_[index] = std::move(workspace);
  grad_out_[index] = true;
  return Tensor(values, DType::kF32, info.shape, &device_);
}

Status ReplicatedStates::commit(model::ParamId id) {
  ZINF_CHECK(id >= 0 && id < table_.size(), "commit: parameter id out of range");
  const auto index = static_cast<std::size_t>(id);
  ZINF_CHECK(grad_out_[index], "commit: the gradient buffer was not handed out");
  grad_out_[index] = false;
  if (!mixed()) return Status::ok();
  narrow(half_format_, static_cast<const float*>(grad_workspaces_[index].data()),
         static_cast<std::uint16_t*>(grads_.data()) + offsets_[index], table_[id].numel);
  return_workspace(std::move(grad_workspaces_[index]));
  return Status::ok();
}

void ReplicatedStates::zero_grads() {
  ZINF_CHECK(std::none_of(grad_out_.begin(), grad_out_.end(), [](bool out) { return out; }),
             "zero_grads: a gradient buffer is still handed out");
  std::memset(grads_.data(), 0, grads_.bytes());
}

std::vector<std::pair<std::string, std::uint64_t>> ReplicatedStates::state_bytes() const {
  return {
      {"params", params_.bytes()},
      {"grads", grads_.bytes()},
      {"master_params", mixed() ? master_.bytes() : 0},
      {"adam_m", adam_m_.bytes()},
      {"adam_v", adam_v_.bytes()},
      {"workspace", workspace_bytes_},
  };
}

std::vector<NamedArray> ReplicatedStates::checkpoint_arrays() {
  float* master = static_cast<float*>(mixed() ? master_.data() : params_.data());
  const std::pair<const char*, float*> kinds[] = {
      {"master/", master},
      {"adam_m/", static_cast<float*>(adam_m_.data())},
      {"adam_v/", static_cast<float*>(adam_v_.data())},
  };
  std::vector<NamedArray> arrays;
  arrays.reserve(3 * static_cast<std::size_t>(table_.size()));
  for (const auto& [prefix, base] : kinds) {
    for (model::ParamId id = 0; id < table_.size(); ++id) {
      const model::ParamInfo& info = table_[id];
      arrays.push_back(NamedArray{
          std::string(prefix) + info.name,
          std::span<float>(base + offsets_[static_cast<std::size_t>(id)], static_cast<std::size_t>(info.numel))});
    }
  }
  return arrays;
}

ParamStates ReplicatedStates::param_states(model::ParamId id) {
  ZINF_CHECK(id >= 0 && id < table_.size(), "param_states: parameter id out of range");
  const auto index = static_cast<std::size_t>(id);
  ZINF_CHECK(!acquired_[index] && !grad_out_[index],
             "param_states: the parameter is acquired or its gradient buffer is handed out");
  const std::int64_t offset = offsets_[index];
  ParamStates states;
  states.slice.exp_avg = static_cast<float*>(adam_m_.data()) + offset;
  states.slice.exp_avg_sq = static_cast<float*>(adam_v_.data()) + offset;
  states.slice.n = static_cast<std::size_t>(table_[id].numel);
  if (mixed()) {
    states.slice.param = static_cast<float*>(master_.data()) + offset;
    states.slice.param_half = static_cast<std::uint16_t*>(params_.data()) + offset;
    states.slice.param_half_format = half_format_;
    states.grad_half = static_cast<const std::uint16_t*>(grads_.data()) + offset;
    states.grad_format = half_format_;
  } else {
    states.slice.param = static_cast<float*>(params_.data()) + offset;
    states.grad_f32 = static_cast<const float*>(grads_.data()) + offset;
  }
  return states;
}

}  // namespace zinf::zero
