// The ParamPublisher side of the ParamCoordinator (param_coordinator.h, param_publisher.h): new
// parameter values into the persistent device copies (and their gathers), and NVMe-resident
// parameters' new values kept in host memory — copied or on loan — for the next forward pass.
#include <fmt/format.h>

#include "kernels/copy.h"
#include "libengine/core/check.h"
#include "libengine/zero/param_coordinator.h"

namespace zinf::zero {
namespace {

constexpr std::size_t kForward = static_cast<std::size_t>(model::Phase::kForward);

}  // namespace

std::size_t ParamCoordinator::publish(model::ParamId id, const void* host_values, Publish how) {
  stage_published(id, host_values, how.lend);
  if (!persistent(id)) return 0;
  return publish_persistent_copy(id, host_values, device::CopyKind::kHostToDevice, !how.defer_gather);
}

void ParamCoordinator::publish_from_device(model::ParamId id, const void* device_slice) {
  if (!persistent(id)) return;
  // The slice was written on the compute stream; the copy into the persistent copy follows it.
  if (!computed_) computed_ = device_.create_event();
  device_.stream(device::StreamRole::kCompute).record(*computed_);
  device_.stream(device::StreamRole::kHostToDevice).wait(*computed_);
  (void)publish_persistent_copy(id, device_slice, device::CopyKind::kDeviceToDevice, true);
}

std::size_t ParamCoordinator::publish_persistent_copy(model::ParamId id, const void* slice, device::CopyKind kind,
                                                      bool gather) {
  Slot& slot = slots_[static_cast<std::size_t>(id)];
  ZINF_CHECK(!slot.resident.empty(), "publish: the parameter has no persistent copy");
  const ParamHome home = homes_.home(id);
  device::Stream& h2d = device_.stream(device::StreamRole::kHostToDevice);
  device_.copy(static_cast<std::byte*>(slot.resident.data()) + slice_offset_bytes(id), slice, home.bytes, kind, h2d);
  if (gathering()) {
    if (!slot.staged) slot.staged = device_.create_event();
    if (!slot.copied) slot.copied = device_.create_event();
    h2d.record(*slot.staged);
    if (gather) gather_into(id, slot.resident.data(), *slot.staged, *slot.copied);
  }
  return home.bytes;
}

void ParamCoordinator::gather(model::ParamId id) {
  if (!gathering() || !persistent(id)) return;
  Slot& slot = slots_[static_cast<std::size_t>(id)];
  ZINF_CHECK(!slot.resident.empty() && slot.staged, "gather: the parameter's slice was not published");
  gather_into(id, slot.resident.data(), *slot.staged, *slot.copied);
}

Status ParamCoordinator::wait_published() {
  Status status = device_.stream(device::StreamRole::kHostToDevice).synchronize();
  Status gathered = device_.stream(device::StreamRole::kCollective).synchronize();
  return status.is_ok() ? gathered : status;
}

void ParamCoordinator::stage_published(model::ParamId id, const void* values, bool lend) {
  const auto index = static_cast<std::size_t>(id);
  Slot& slot = slots_[index];
  const ParamHome home = homes_.home(static_cast<model::ParamId>(index));
  // Only into an empty slot: one holding an older copy (kept for reuse during the backward pass) is
  // dropped by invalidate() and read back as before.
  if (!home.on_nvme() || resident(id) || slot.state != State::kNotAvailable || !traces_[kForward].known ||
      !early_in_forward_[index] || (!lend && !room(staging_, home.bytes))) {
    return;
  }
  if (lend) {
    slot.lent = values;
  } else {
    Result<device::DeviceBuffer> copy = staging_.take(home.bytes, fmt::format("new values of {}", table_[id].name));
    if (!copy.is_ok()) return;  // staging is an optimisation here: the pass reads the values back
    slot.host_copy = std::move(copy).value();
    kernels::cpu::copy_bytes(slot.host_copy.data(), values, home.bytes);  // the training thread's (copy.h)
  }
  slot.state = State::kHost;
  // Published during the backward pass (the optimizer overlapped with it), the copy must outlive
  // the invalidate() that ends the pass.
  slot.kept_across_invalidate = !invalidated_;
  stats_.params_kept_on_host_bytes += home.bytes;
}

void ParamCoordinator::end_loan(model::ParamId id) {
  Slot& slot = slots_[static_cast<std::size_t>(id)];
  if (slot.copy_from_lent) {
    // The copy (and, gathering, the all-gather behind it) may still read the values.
    if (slot.copied) (void)slot.copied->synchronize();  // a failure is the stream's, reported by its synchronize()
    slot.copy_from_lent = false;
  }
  if (slot.lent == nullptr) return;
  slot.lent = nullptr;
  if (slot.state == State::kHost) {
    // Not copied yet: the next pass reads the parameter back after all.
    slot.state = State::kNotAvailable;
    slot.kept_across_invalidate = false;
    stats_.params_kept_on_host_bytes -= homes_.home(id).bytes;
  }
}

}  // namespace zinf::zero
