#include "libengine/zero/gradient_reducer.h"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "libengine/core/check.h"

namespace zinf::zero {
namespace {
constexpr std::uint64_t kMiB = 1ull << 20;
}  // namespace

GradientReducer::GradientReducer(const model::ParamTable& table, const Partition& partition, device::Device& device,
                                 StateStore& grads, comm::Communicator* comm, const spec::ZeroConfig& zero,
                                 DType precision)
    : table_(table),
      partition_(partition),
      device_(device),
      grads_(grads),
      comm_(comm),
      stage_(zero.stage),
      precision_(precision),
      bucket_bytes_(zero.reduce_bucket_bytes),
      // At most max_live_bytes of gradients travel to the host at once (at least 64 MiB).
      d2h_cap_bytes_(std::max<std::uint64_t>(zero.max_live_bytes, 64 * kMiB)),
      pool_(device, BufferPool::Memory::kDevice, std::numeric_limits<std::uint64_t>::max(), "scenario.device_memory"),
      workspaces_(static_cast<std::size_t>(table.size())),
      out_(static_cast<std::size_t>(table.size()), false),
      computed_(device.create_event()),
      reduced_(device.create_event()) {}

Result<Tensor> GradientReducer::grad_buffer(model::ParamId id) {
  ZINF_CHECK(id >= 0 && id < table_.size(), "grad_buffer: parameter id out of range");
  const auto index = static_cast<std::size_t>(id);
  const model::ParamInfo& info = table_[id];
  if (grads_.on_device() && !mixed() && !gathering()) {
    out_[index] = true;
    return grads_.slice(id).view(info.shape);  // fp32 storage: the model accumulates in place
  }
  // Asked again before the commit (a tied weight), the same buffer: both contributions land in it.
  if (out_[index]) return Tensor(workspaces_[index].data(), DType::kF32, info.shape, &device_);
  // Gathering, the buffer spans every rank's padded slice, the shape the reduce-scatter takes.
  const std::int64_t elements =
      gathering() ? partition_[id].slice_numel * partition_.world_size() : static_cast<std::int64_t>(info.numel);
  ZINF_ASSIGN_OR_RETURN(workspaces_[index], pool_.take(static_cast<std::size_t>(elements) * 4,
                                                       fmt::format("fp32 gradient of {}", info.name)));
  const Tensor values(workspaces_[index].data(), DType::kF32, info.shape, &device_);
  if (gathering()) {
    // Each step's gradient is committed once and reduced whole: no earlier contribution to add.
    device_.ops().zero(values);
  } else if (grads_.on_device()) {
    // The gradient so far (zero after zero_grads()), as ZeRO-0 hands it out.
    device_.ops().copy(values, grads_.slice(id).view(info.shape));
  } else {
    device_.ops().zero(values);
  }
  out_[index] = true;
  return values;
}

Status GradientReducer::track_d2h(std::size_t bytes) {
  const std::uint64_t cap = d2h_cap_bytes_;
  while (!d2h_in_flight_.empty() && (d2h_in_flight_.front().done->query() || d2h_in_flight_bytes_ + bytes > cap)) {
    ZINF_RETURN_IF_ERROR(d2h_in_flight_.front().done->synchronize());
    d2h_in_flight_bytes_ -= d2h_in_flight_.front().bytes;
    d2h_in_flight_.erase(d2h_in_flight_.begin());
  }
  return Status::ok();
}

Status GradientReducer::commit(model::ParamId id) {
  ZINF_CHECK(id >= 0 && id < table_.size(), "commit: parameter id out of range");
  const auto index = static_cast<std::size_t>(id);
  ZINF_CHECK(out_[index], "commit: the gradient buffer was not handed out");
  out_[index] = false;
  if (grads_.on_device() && !mixed() && !gathering()) return Status::ok();
  const model::ParamInfo& info = table_[id];
  device::Stream& compute = device_.stream(device::StreamRole::kCompute);
  const Tensor values(workspaces_[index].data(), DType::kF32, info.shape, &device_);
  if (gathering()) {
    if (!mixed()) return add_to_bucket(id, std::move(workspaces_[index]), DType::kF32);
    // Rounded on the device first (DeepSpeed reduces in the training precision too): half the bytes
    // over the wire; the ranks' rounded gradients are summed in fp32 and rounded once per addition.
    ZINF_ASSIGN_OR_RETURN(device::DeviceBuffer rounded,
                          pool_.take(static_cast<std::size_t>(partition_[id].slice_numel * partition_.world_size()) *
                                         dtype_size_bytes(precision_),
                                     fmt::format("{} gradient of {}", dtype_name(precision_), info.name)));
    device_.ops().copy(Tensor(rounded.data(), precision_, info.shape, &device_), values);
    pool_.give(std::move(workspaces_[index]), compute);
    return add_to_bucket(id, std::move(rounded), precision_);
  }
  if (grads_.on_device()) {
    device_.ops().copy(grads_.slice(id).view(info.shape), values);
    pool_.give(std::move(workspaces_[index]), compute);
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
                          pool_.take(bytes, fmt::format("{} gradient of {}", dtype_name(precision_), info.name)));
    device_.ops().copy(Tensor(staging.data(), precision_, info.shape, &device_), values);
    source = staging.data();
  }
  compute.record(*computed_);
  copy_down(id, source, bytes, *computed_);
  pool_.give(std::move(workspaces_[index]), d2h);
  pool_.give(std::move(staging), d2h);
  return Status::ok();
}

void GradientReducer::copy_down(model::ParamId id, const void* source, std::size_t bytes, device::Event& ready) {
  device::Stream& d2h = device_.stream(device::StreamRole::kDeviceToHost);
  d2h.wait(ready);
  grads_.copy_from_device(id, source, d2h);
  std::unique_ptr<device::Event> done = device_.create_event();
  d2h.record(*done);
  d2h_in_flight_.push_back({std::move(done), bytes});
  d2h_in_flight_bytes_ += bytes;
  device_to_host_.forward_backward += bytes;
}

Status GradientReducer::zero_grads() {
  ZINF_CHECK(std::none_of(out_.begin(), out_.end(), [](bool out) { return out; }),
             "zero_grads: a gradient buffer is still handed out");
  // Host gradients are overwritten whole by each commit; device ones are accumulated into.
  if (grads_.on_device()) grads_.zero(device_.stream(device::StreamRole::kCompute));
  return Status::ok();
}

void GradientReducer::record_when_stored(device::Event& event, bool& recorded) {
  // The copies to the host are in order on this stream: after them, the gradients committed so far
  // are in the store. Across ranks the last ones may still wait in the open bucket.
  if (bucket_.ids.empty()) {
    device_.stream(device::StreamRole::kDeviceToHost).record(event);
    recorded = true;
  } else {
    pending_.push_back({&event, &recorded});
  }
}

void GradientReducer::record_pending() {
  for (const Pending& p : pending_) {
    device_.stream(device::StreamRole::kDeviceToHost).record(*p.event);
    *p.recorded = true;
  }
  pending_.clear();
}

Status GradientReducer::finish_backward() {
  // The last gradient bucket closes with the backward pass.
  if (gathering()) ZINF_RETURN_IF_ERROR(flush_bucket());
  ZINF_RETURN_IF_ERROR(device_.stream(device::StreamRole::kCollective).synchronize());
  ZINF_RETURN_IF_ERROR(device_.stream(device::StreamRole::kDeviceToHost).synchronize());
  d2h_in_flight_.clear();
  d2h_in_flight_bytes_ = 0;
  return Status::ok();
}

Result<double> GradientReducer::sum_squares(device::CpuOps& host_ops) {
  // One tensor per parameter in table order, through the kernels ZeRO-0 uses: the same sum, bit
  // for bit, at one rank.
  double sum = grads_.sum_squares(host_ops);
  if (gathering()) {
    // Every rank's slices: the ranks agree on the norm, so they clip and skip alike.
    std::array<double, 1> total = {sum};
    ZINF_RETURN_IF_ERROR(comm_->all_reduce_host(total));
    sum = total[0];
  }
  return sum;
}

}  // namespace zinf::zero
