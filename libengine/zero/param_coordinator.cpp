// The mechanics of the ParamCoordinator (param_coordinator.h): creation and its budget checks,
// a parameter's way from its home to the device (NVMe read into host staging, host-to-device
// copy, all-gather) and back (drop, release), and acquire(). What to fetch when is the prefetch
// policy's (param_prefetch.cpp); new values come in through the ParamPublisher side
// (param_publishing.cpp).
#include "libengine/zero/param_coordinator.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include <fmt/format.h>

#include "libengine/core/check.h"
#include "libengine/core/units.h"

namespace zinf::zero {
namespace {

using Clock = std::chrono::steady_clock;

std::string bytes_text(std::uint64_t bytes) { return format_bytes(static_cast<double>(bytes)); }

}  // namespace

ParamCoordinator::ParamCoordinator(const model::ParamTable& table, device::Device& device, const ParamHomes& homes,
                                   NvmeStateStore* nvme, const ParamCoordinatorOptions& options)
    : table_(table),
      device_(device),
      homes_(homes),
      nvme_(nvme),
      options_(options),
      slots_(static_cast<std::size_t>(table.size())),
      live_(device, BufferPool::Memory::kDevice, options.max_live_bytes, "scenario.zero.max_live_bytes"),
      staging_(device, BufferPool::Memory::kHost, options.prefetch_bytes, "scenario.zero.prefetch_bytes"),
      workspaces_(device, BufferPool::Memory::kDevice, std::numeric_limits<std::uint64_t>::max(), "device memory") {}

ParamCoordinator::~ParamCoordinator() {
  for (model::ParamId id = 0; id < table_.size(); ++id) {
    Slot& slot = slots_[static_cast<std::size_t>(id)];
    // A read still in flight writes into its staging buffer: wait before that buffer goes.
    if (slot.state == State::kReading) (void)nvme_->wait(homes_.home(id).extent);
  }
  (void)device_.synchronize();
}

Result<std::unique_ptr<ParamCoordinator>> ParamCoordinator::create(const model::ParamTable& table,
                                                                   device::Device& device, const ParamHomes& homes,
                                                                   NvmeStateStore* nvme,
                                                                   const ParamCoordinatorOptions& options) {
  std::unique_ptr<ParamCoordinator> c(new ParamCoordinator(table, device, homes, nvme, options));
  // The two largest gathered parameters must fit at once (a linear's weight and bias, the
  // embedding's two tables); the largest NVMe-resident one must fit the read staging.
  std::uint64_t largest = 0, second = 0, largest_nvme = 0;
  std::string largest_name, second_name;
  for (model::ParamId id = 0; id < table.size(); ++id) {
    const ParamHome home = homes.home(id);
    if (c->resident(id)) continue;
    const std::size_t whole = c->gathered_bytes(id);
    if (table[id].numel <= options.persistence_threshold) {
      ZINF_ASSIGN_OR_RETURN(c->slots_[static_cast<std::size_t>(id)].resident,
                            device.allocate(whole, fmt::format("persistent copy of {}", table[id].name)));
      c->persistent_bytes_ += whole;
      continue;
    }
    if (home.on_nvme()) largest_nvme = std::max<std::uint64_t>(largest_nvme, home.bytes);
    if (whole > largest) {
      second = largest;
      second_name = largest_name;
      largest = whole;
      largest_name = table[id].name;
    } else if (whole > second) {
      second = whole;
      second_name = table[id].name;
    }
  }
  if (largest + second > options.max_live_bytes) {
    return Status::invalid_argument(fmt::format(
        "scenario.zero.max_live_bytes: {} cannot hold the two largest gathered parameters at once ({} and {}: {}); "
        "raise it to at least {}",
        bytes_text(options.max_live_bytes), largest_name, second_name.empty() ? "-" : second_name,
        bytes_text(largest + second), bytes_text(largest + second)));
  }
  if (largest_nvme > options.prefetch_bytes) {
    return Status::invalid_argument(
        fmt::format("scenario.zero.prefetch_bytes: {} cannot stage the largest NVMe-resident parameter ({}); raise it "
                    "to at least {}",
                    bytes_text(options.prefetch_bytes), bytes_text(largest_nvme), bytes_text(largest_nvme)));
  }
  c->near_window_bytes_ = std::min(options.max_live_bytes, std::max(largest + second, options.max_live_bytes / 4));
  c->far_window_bytes_ = std::min(options.prefetch_bytes, std::max(2 * largest_nvme, options.prefetch_bytes / 4));
  c->last_adapt_ = Clock::now();
  return c;
}

bool ParamCoordinator::persistent(model::ParamId id) const {
  return !slots_[static_cast<std::size_t>(id)].resident.empty();
}

bool ParamCoordinator::resident(model::ParamId id) const {
  // At several ranks a device-tier parameter holds only this rank's slice: it is gathered like the rest.
  return (homes_.home(id).on_device() && !gathering()) || persistent(id);
}

std::size_t ParamCoordinator::gathered_bytes(model::ParamId id) const {
  const ParamHome home = homes_.home(id);
  if (!gathering()) return home.bytes;
  return static_cast<std::size_t>(home.slice_numel) * static_cast<std::size_t>(options_.comm->world_size()) *
         dtype_size_bytes(options_.precision);
}

std::size_t ParamCoordinator::slice_offset_bytes(model::ParamId id) const {
  if (!gathering()) return 0;
  return static_cast<std::size_t>(homes_.home(id).slice_numel) * static_cast<std::size_t>(options_.comm->rank()) *
         dtype_size_bytes(options_.precision);
}

void ParamCoordinator::gather_into(model::ParamId id, void* copy, device::Event& from, device::Event& done) {
  device::Stream& collective = device_.stream(device::StreamRole::kCollective);
  collective.wait(from);
  options_.comm->all_gather(static_cast<std::byte*>(copy) + slice_offset_bytes(id), copy,
                            static_cast<std::size_t>(homes_.home(id).slice_numel), options_.precision, collective);
  collective.record(done);
}

void ParamCoordinator::add_stats(EngineStats& stats) const {
  stats.host_to_device.forward_backward += stats_.host_to_device.forward_backward;
  stats.stall_seconds += stats_.stall_seconds;
  stats.acquires += stats_.acquires;
  stats.prefetch_hits += stats_.prefetch_hits;
  stats.sync_nvme_reads += stats_.sync_nvme_reads;
  stats.params_kept_on_host_bytes += stats_.params_kept_on_host_bytes;
  stats.trace_mismatches += stats_.trace_mismatches;
  stats.prefetch_near_window_bytes = near_window_bytes_;
  stats.prefetch_near_budget_bytes = options_.max_live_bytes;
  stats.prefetch_far_window_bytes = nvme_ != nullptr ? far_window_bytes_ : 0;
  stats.prefetch_far_budget_bytes = nvme_ != nullptr ? options_.prefetch_bytes : 0;
}

Status ParamCoordinator::start_read(model::ParamId id) {
  Slot& slot = slots_[static_cast<std::size_t>(id)];
  const ParamHome home = homes_.home(id);
  ZINF_ASSIGN_OR_RETURN(slot.host_copy, staging_.take(home.bytes, fmt::format("NVMe read of {}", table_[id].name)));
  Status started =
      nvme_->start_read(home.extent, std::span<std::byte>(static_cast<std::byte*>(slot.host_copy.data()), home.bytes));
  if (!started.is_ok()) {
    staging_.give_now(std::move(slot.host_copy));
    return started;
  }
  slot.state = State::kReading;
  return Status::ok();
}

Status ParamCoordinator::finish_read(model::ParamId id) {
  Slot& slot = slots_[static_cast<std::size_t>(id)];
  Status read = nvme_->wait(homes_.home(id).extent);
  if (!read.is_ok()) {
    staging_.give_now(std::move(slot.host_copy));
    slot.state = State::kNotAvailable;
    return read;
  }
  slot.state = State::kHost;
  return Status::ok();
}

Status ParamCoordinator::start_copy(model::ParamId id) {
  Slot& slot = slots_[static_cast<std::size_t>(id)];
  const ParamHome home = homes_.home(id);
  ZINF_ASSIGN_OR_RETURN(slot.device_copy, live_.take(gathered_bytes(id), fmt::format("gathered {}", table_[id].name)));
  void* own_slice = static_cast<std::byte*>(slot.device_copy.data()) + slice_offset_bytes(id);
  device::Stream& h2d = device_.stream(device::StreamRole::kHostToDevice);
  if (!slot.copied) slot.copied = device_.create_event();
  if (home.on_device()) {
    // Gathering a device-tier slice: a device-to-device copy into place, then the all-gather.
    device_.copy(own_slice, home.data, home.bytes, device::CopyKind::kDeviceToDevice, h2d);
  } else {
    const void* source = home.in_host_memory() ? home.data : host_values(slot);
    slot.copy_from_lent = slot.lent != nullptr;
    device_.copy(own_slice, source, home.bytes, device::CopyKind::kHostToDevice, h2d);
    stats_.host_to_device.forward_backward += home.bytes;
  }
  if (gathering()) {
    if (!slot.staged) slot.staged = device_.create_event();
    h2d.record(*slot.staged);
    gather_into(id, slot.device_copy.data(), *slot.staged, *slot.copied);
  } else {
    h2d.record(*slot.copied);
  }
  slot.state = State::kCopying;
  return Status::ok();
}

void ParamCoordinator::drop(model::ParamId id) {
  Slot& slot = slots_[static_cast<std::size_t>(id)];
  device::Stream& h2d = device_.stream(device::StreamRole::kHostToDevice);
  device::Stream& compute = device_.stream(device::StreamRole::kCompute);
  switch (slot.state) {
    case State::kNotAvailable:
      break;
    case State::kReading:
      (void)nvme_->wait(homes_.home(id).extent);  // the staging is written into until then
      staging_.give_now(std::move(slot.host_copy));
      break;
    case State::kHost:
      staging_.give_now(std::move(slot.host_copy));
      slot.lent = nullptr;
      break;
    case State::kCopying:
      staging_.give(std::move(slot.host_copy), h2d);
      slot.lent = nullptr;  // end_loan() still waits for the copy (copy_from_lent)
      // Gathering: the all-gather (after the copy) writes into the buffer until the collective stream passes.
      live_.give(std::move(slot.device_copy), gathering() ? device_.stream(device::StreamRole::kCollective) : h2d);
      break;
    case State::kAvailable:
      live_.give(std::move(slot.device_copy), compute);
      break;
  }
  slot.state = State::kNotAvailable;
}

Result<Tensor> ParamCoordinator::acquire(model::ParamId id) {
  ZINF_CHECK(id >= 0 && id < table_.size(), "acquire: parameter id out of range");
  const auto index = static_cast<std::size_t>(id);
  Slot& slot = slots_[index];
  ZINF_CHECK(!slot.in_use, "acquire: parameter is already acquired");
  const model::ParamInfo& info = table_[id];
  const ParamHome home = homes_.home(static_cast<model::ParamId>(index));
  follow_trace(id);
  void* data = nullptr;
  if (resident(id)) {
    data = persistent(id) ? slot.resident.data() : home.data;
  } else {
    ++stats_.acquires;
    if (slot.state != State::kNotAvailable) ++stats_.prefetch_hits;
    const Clock::time_point start = Clock::now();
    if (slot.state == State::kNotAvailable && home.on_nvme()) {
      ++stats_.sync_nvme_reads;
      ZINF_RETURN_IF_ERROR(start_read(id));
    }
    if (slot.state == State::kReading) ZINF_RETURN_IF_ERROR(finish_read(id));
    if (slot.state == State::kHost || slot.state == State::kNotAvailable) {
      evict_for(gathered_bytes(id));
      ZINF_RETURN_IF_ERROR(start_copy(id));
    }
    if (slot.state == State::kCopying) {
      device::Stream& compute = device_.stream(device::StreamRole::kCompute);
      compute.wait(*slot.copied);
      staging_.give(std::move(slot.host_copy), device_.stream(device::StreamRole::kHostToDevice));
      slot.lent = nullptr;  // end_loan() still waits for the copy (copy_from_lent)
      slot.state = State::kAvailable;
    }
    stats_.stall_seconds += std::chrono::duration<double>(Clock::now() - start).count();
    data = slot.device_copy.data();
  }
  ZINF_RETURN_IF_ERROR(prefetch());
  const Tensor stored(data, options_.precision, info.shape, &device_);
  if (options_.compute_dtype == options_.precision) {
    slot.in_use = true;
    return stored;
  }
  ZINF_ASSIGN_OR_RETURN(slot.workspace, workspaces_.take(static_cast<std::size_t>(info.numel) * 4,
                                                         fmt::format("fp32 view of {}", info.name)));
  const Tensor values(slot.workspace.data(), DType::kF32, info.shape, &device_);
  device_.ops().copy(values, stored);
  slot.in_use = true;
  return values;
}

void ParamCoordinator::release(model::ParamId id) {
  ZINF_CHECK(id >= 0 && id < table_.size(), "release: parameter id out of range");
  Slot& slot = slots_[static_cast<std::size_t>(id)];
  ZINF_CHECK(slot.in_use, "release: parameter is not acquired");
  slot.in_use = false;
  device::Stream& compute = device_.stream(device::StreamRole::kCompute);
  if (!slot.workspace.empty()) workspaces_.give(std::move(slot.workspace), compute);
  if (resident(id) || needed_soon(id)) return;
  drop(id);
}

void ParamCoordinator::invalidate() {
  for (model::ParamId id = 0; id < table_.size(); ++id) {
    Slot& slot = slots_[static_cast<std::size_t>(id)];
    ZINF_CHECK(!slot.in_use, "invalidate: a parameter is still acquired");
    if (!resident(id) && !slot.kept_across_invalidate) drop(id);
    slot.kept_across_invalidate = false;
  }
  invalidated_ = true;
  close_pass();
}

}  // namespace zinf::zero
