#include "libengine/zero/param_coordinator.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>

#include <fmt/format.h>

#include "kernels/copy.h"
#include "libengine/core/check.h"
#include "libengine/core/units.h"

namespace zinf::zero {
namespace {

using Clock = std::chrono::steady_clock;

std::string bytes_text(std::uint64_t bytes) { return format_bytes(static_cast<double>(bytes)); }

const char* phase_name(model::Phase phase) { return phase == model::Phase::kForward ? "forward" : "backward"; }

constexpr std::size_t kForward = static_cast<std::size_t>(model::Phase::kForward);
constexpr std::size_t kBackward = static_cast<std::size_t>(model::Phase::kBackward);

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
    if (home.tier == spec::Tier::kNvme) largest_nvme = std::max<std::uint64_t>(largest_nvme, home.bytes);
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
  return (homes_.home(id).tier == spec::Tier::kDevice && !gathering()) || persistent(id);
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

template <typename Visit>
void ParamCoordinator::for_each_upcoming(Visit&& visit) const {
  const auto walk = [&](const Trace& trace, std::size_t from) {
    for (std::size_t i = from; i < trace.order.size(); ++i) {
      if (!visit(trace.order[i])) return false;
    }
    return true;
  };
  if (!in_pass_) {
    // Between steps: the next forward pass, from its start.
    if (traces_[kForward].known && walk(traces_[kForward], 0) && traces_[kBackward].known) {
      walk(traces_[kBackward], 0);
    }
    return;
  }
  const Trace& current = traces_[static_cast<std::size_t>(phase_)];
  if (!walk(current, recording_ ? current.order.size() : cursor_)) return;
  if (phase_ == model::Phase::kForward && traces_[kBackward].known) walk(traces_[kBackward], 0);
}

void ParamCoordinator::follow_trace(model::ParamId id) {
  if (!in_pass_) return;
  Trace& trace = traces_[static_cast<std::size_t>(phase_)];
  if (recording_) {
    trace.order.push_back(id);
    ++cursor_;
    return;
  }
  if (cursor_ < trace.order.size() && trace.order[cursor_] == id) {
    ++cursor_;
    return;
  }
  ++stats_.trace_mismatches;
  if (warnings_left_ > 0 && options_.on_warning) {
    --warnings_left_;
    options_.on_warning(fmt::format(
        "prefetch: the {} pass acquired {} at position {} where the recorded order has {}; re-recording the order "
        "from there (prefetching continues with the new order)",
        phase_name(phase_), table_[id].name, cursor_,
        cursor_ < trace.order.size() ? table_[trace.order[cursor_]].name : std::string("the end of the pass")));
  }
  trace.order.resize(cursor_);
  trace.order.push_back(id);
  trace.known = false;
  recording_ = true;
  ++cursor_;
}

void ParamCoordinator::close_pass() {
  // A recorded order is complete; a followed one must have been used up.
  if (in_pass_) {
    Trace& trace = traces_[static_cast<std::size_t>(phase_)];
    if (recording_) {
      trace.known = true;
    } else if (cursor_ != trace.order.size()) {
      ++stats_.trace_mismatches;
      if (warnings_left_ > 0 && options_.on_warning) {
        --warnings_left_;
        options_.on_warning(
            fmt::format("prefetch: the {} pass ended after {} of the {} recorded acquires; the order "
                        "is re-recorded",
                        phase_name(phase_), cursor_, trace.order.size()));
      }
      trace.order.resize(cursor_);
    }
    if (static_cast<std::size_t>(phase_) == kForward && trace.known) mark_early_in_forward();
  }
  in_pass_ = false;
  recording_ = false;
}

void ParamCoordinator::mark_early_in_forward() {
  // An NVMe-resident parameter is early when, at its first acquire in the forward pass, the NVMe
  // parameters acquired before it and itself fit in prefetch_bytes (the first one always is).
  early_in_forward_.assign(slots_.size(), false);
  std::vector<bool> seen(slots_.size(), false);
  std::uint64_t ahead = 0;
  for (std::size_t position = 0; position < traces_[kForward].order.size(); ++position) {
    const auto index = static_cast<std::size_t>(traces_[kForward].order[position]);
    const ParamHome home = homes_.home(static_cast<model::ParamId>(index));
    const bool offloaded = home.tier == spec::Tier::kNvme && !resident(static_cast<model::ParamId>(index));
    if (!seen[index]) {
      seen[index] = true;
      early_in_forward_[index] = offloaded && (position == 0 || ahead + home.bytes <= options_.prefetch_bytes);
    }
    if (offloaded) ahead += home.bytes;
  }
}

void ParamCoordinator::begin_phase(model::Phase phase) {
  close_pass();
  phase_ = phase;
  in_pass_ = true;
  cursor_ = 0;
  Trace& next = traces_[static_cast<std::size_t>(phase)];
  recording_ = !next.known;
  if (recording_) next.order.clear();
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
  if (home.tier == spec::Tier::kDevice) {
    // Gathering a device-tier slice: a device-to-device copy into place, then the all-gather.
    device_.copy(own_slice, home.data, home.bytes, device::CopyKind::kDeviceToDevice, h2d);
  } else {
    const void* source = home.tier == spec::Tier::kCpu ? home.data : host_values(slot);
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

bool ParamCoordinator::needed_soon(model::ParamId id) const {
  const std::uint64_t own = gathered_bytes(id);
  std::uint64_t window = 0;
  bool found = false;
  std::vector<bool> seen(slots_.size(), false);
  for_each_upcoming([&](model::ParamId next) {
    if (next == id) {
      found = true;
      return false;
    }
    const auto index = static_cast<std::size_t>(next);
    if (resident(next) || seen[index]) return true;
    seen[index] = true;
    window += gathered_bytes(next);
    return window + own <= options_.max_live_bytes;
  });
  return found;
}

void ParamCoordinator::evict_for(std::size_t bytes) {
  while (!room(live_, bytes)) {
    // Next use of every cached copy not in use; the farthest (or never) goes first.
    std::vector<std::size_t> next_use(slots_.size(), std::numeric_limits<std::size_t>::max());
    std::size_t position = 0;
    for_each_upcoming([&](model::ParamId next) {
      const auto index = static_cast<std::size_t>(next);
      if (next_use[index] == std::numeric_limits<std::size_t>::max()) next_use[index] = position;
      ++position;
      return true;
    });
    model::ParamId victim = -1;
    for (model::ParamId id = 0; id < table_.size(); ++id) {
      const Slot& slot = slots_[static_cast<std::size_t>(id)];
      const bool cached = slot.state == State::kAvailable || slot.state == State::kCopying;
      if (!cached || slot.in_use) continue;
      if (victim < 0 || next_use[static_cast<std::size_t>(id)] > next_use[static_cast<std::size_t>(victim)])
        victim = id;
    }
    if (victim < 0) return;  // everything cached is in use: take() reports the budget
    drop(victim);
  }
}

Status ParamCoordinator::prefetch() {
  std::uint64_t near = 0;
  std::uint64_t far = 0;
  bool near_open = true;
  bool far_open = nvme_ != nullptr;
  std::vector<bool> seen(slots_.size(), false);
  Status status;
  for_each_upcoming([&](model::ParamId id) {
    const auto index = static_cast<std::size_t>(id);
    if (resident(id) || seen[index]) return true;
    seen[index] = true;
    Slot& slot = slots_[index];
    const ParamHome home = homes_.home(static_cast<model::ParamId>(index));
    if (home.tier == spec::Tier::kNvme && far_open) {
      far += home.bytes;
      if (far > far_window_bytes_) {
        far_open = false;
      } else if (slot.state == State::kNotAvailable && room(staging_, home.bytes)) {
        status = start_read(id);
      }
      if (status.is_ok() && slot.state == State::kReading && nvme_->done(home.extent)) status = finish_read(id);
    }
    if (status.is_ok() && near_open) {
      near += gathered_bytes(id);
      if (near > near_window_bytes_) {
        near_open = false;
      } else {
        // Gathering, a read in flight is waited for: whether the gather starts now must not depend
        // on the drive's timing, or the ranks would issue their collectives in different orders.
        if (gathering() && slot.state == State::kReading) status = finish_read(id);
        // Ready to copy: staged from NVMe, or in CPU memory (or, gathering, in its device-tier slice).
        const bool ready =
            slot.state == State::kHost || (slot.state == State::kNotAvailable && home.tier != spec::Tier::kNvme);
        if (status.is_ok() && ready && room(live_, gathered_bytes(id))) status = start_copy(id);
      }
    }
    return status.is_ok() && (near_open || far_open);
  });
  return status;
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
    if (slot.state == State::kNotAvailable && home.tier == spec::Tier::kNvme) {
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

void ParamCoordinator::stage_published(model::ParamId id, const void* values, bool lend) {
  const auto index = static_cast<std::size_t>(id);
  Slot& slot = slots_[index];
  const ParamHome home = homes_.home(static_cast<model::ParamId>(index));
  // Only into an empty slot: one holding an older copy (kept for reuse during the backward pass) is
  // dropped by invalidate() and read back as before.
  if (home.tier != spec::Tier::kNvme || resident(id) || slot.state != State::kNotAvailable ||
      !traces_[kForward].known || !early_in_forward_[index] || (!lend && !room(staging_, home.bytes))) {
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

Status ParamCoordinator::adapt_look_ahead() {
  const Clock::time_point now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - last_adapt_).count();
  const double stalled = stats_.stall_seconds - stall_seconds_seen_;
  last_adapt_ = now;
  stall_seconds_seen_ = stats_.stall_seconds;
  const bool room_to_grow =
      near_window_bytes_ < options_.max_live_bytes || (nvme_ != nullptr && far_window_bytes_ < options_.prefetch_bytes);
  // Every rank takes part in the vote, grown or not: the host collective is issued on all of them.
  std::array<double, 1> grow = {room_to_grow && stalled > 0.01 * elapsed ? 1.0 : 0.0};
  if (gathering()) ZINF_RETURN_IF_ERROR(options_.comm->all_reduce_host(grow));
  if (grow[0] > 0) {
    near_window_bytes_ = std::min(options_.max_live_bytes, 2 * near_window_bytes_);
    far_window_bytes_ = std::min(options_.prefetch_bytes, 2 * far_window_bytes_);
  }
  return Status::ok();
}

Status ParamCoordinator::prefetch_next_forward() {
  close_pass();
  invalidated_ = false;
  ZINF_RETURN_IF_ERROR(adapt_look_ahead());
  return prefetch();
}

}  // namespace zinf::zero
