// The prefetch policy of the ParamCoordinator (param_coordinator.h): the acquire order recorded
// and followed per phase, what is needed next (reuse and eviction by next use), how far ahead reads
// and copies are issued, and the adaptive look-ahead. The mechanics it drives — reads, copies,
// gathers, drops — are in param_coordinator.cpp. Every decision that starts a gather is taken
// from the recorded order and the pools' accounting (collective_order.h).
#include <algorithm>
#include <array>
#include <chrono>
#include <limits>

#include <fmt/format.h>

#include "libengine/core/check.h"
#include "libengine/zero/param_coordinator.h"

namespace zinf::zero {
namespace {

using Clock = std::chrono::steady_clock;

const char* phase_name(model::Phase phase) { return phase == model::Phase::kForward ? "forward" : "backward"; }

constexpr std::size_t kForward = static_cast<std::size_t>(model::Phase::kForward);
constexpr std::size_t kBackward = static_cast<std::size_t>(model::Phase::kBackward);

}  // namespace

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
    const bool offloaded = home.on_nvme() && !resident(static_cast<model::ParamId>(index));
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
    if (home.on_nvme() && far_open) {
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
        const bool ready = slot.state == State::kHost || (slot.state == State::kNotAvailable && !home.on_nvme());
        if (status.is_ok() && ready && room(live_, gathered_bytes(id))) status = start_copy(id);
      }
    }
    return status.is_ok() && (near_open || far_open);
  });
  return status;
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
