// EngineStats: what a state owner moved between tiers and how long compute waited for it — the
// counters behind the run record's per-link bytes and GB/s, stall time and prefetch hit rate.
// Plain data, cumulative since the owner was created; the trainer takes differences per step.
#pragma once

#include <cstdint>

namespace zinf::zero {

// Bytes moved over one link, split by the phase that moved them, so GB/s can be computed against
// the phase's wall time (the optimizer phase's NVMe traffic is what the drive's speed bounds).
struct LinkBytes {
  std::uint64_t forward_backward = 0;
  std::uint64_t optimizer = 0;
  std::uint64_t other = 0;  // checkpoints, set-up
  std::uint64_t total() const { return forward_backward + optimizer + other; }
};

struct EngineStats {
  LinkBytes nvme_read;                // NVMe -> host
  LinkBytes nvme_write;               // host -> NVMe
  LinkBytes host_to_device;           // host -> device
  LinkBytes device_to_host;           // device -> host
  double stall_seconds = 0;           // compute thread blocked in acquire() waiting for a transfer
  std::uint64_t acquires = 0;         // acquires of parameters that are not persistent
  std::uint64_t prefetch_hits = 0;    // of those, already on the device or in flight when asked for
  std::uint64_t sync_nvme_reads = 0;  // NVMe reads issued by acquire() itself (not by the prefetcher)
  // New values of NVMe-resident parameters kept on the host when the optimizer wrote them (lent where
  // Adam wrote them, or copied into staging), so the next forward pass did not read them back
  // (ParamCoordinator::publish, param_publisher.h).
  std::uint64_t params_kept_on_host_bytes = 0;
  std::uint64_t trace_mismatches = 0;  // acquires that differed from the recorded order
  // Optimizer on the CPU or NVMe: elements of this rank's states stepped, and of those the ones
  // whose step began before the backward pass ended (zero.overlap_optimizer); CPU Adam time on the
  // optimizer thread, and of it the time before the backward pass ended.
  std::uint64_t optimizer_elements = 0;
  std::uint64_t optimizer_elements_overlapped = 0;
  double optimizer_worker_seconds = 0;
  double optimizer_overlapped_seconds = 0;
  // The prefetcher's look-ahead now (levels): host->device bytes and NVMe read bytes issued ahead,
  // and the budgets they may grow to (zero.max_live_bytes, zero.prefetch_bytes; 0 without NVMe).
  std::uint64_t prefetch_near_window_bytes = 0;
  std::uint64_t prefetch_near_budget_bytes = 0;
  std::uint64_t prefetch_far_window_bytes = 0;
  std::uint64_t prefetch_far_budget_bytes = 0;
  std::uint64_t nvme_bytes = 0;  // bytes of state on the NVMe tier now
  std::uint64_t nvme_peak_bytes = 0;
  std::uint64_t nvme_capacity_bytes = 0;  // swap files reserved
  // Communication between ranks (filled by the trainer from comm::TimedCommunicator and the
  // device's collective waits; zero at one rank, where nothing is communicated).
  double comm_busy_seconds = 0;  // collectives on the collective stream plus blocking host calls, end to end
  double comm_wait_seconds = 0;  // compute thread blocked on the collective stream plus the host calls
  std::uint64_t comm_calls = 0;
  std::uint64_t comm_send_bytes = 0;  // bytes the calls took from this rank
  // Communication overlapped with other work: busy time nobody waited for (never negative; the
  // waits also include what the collective stream itself waited for, such as the copy a gather follows).
  double comm_hidden_seconds() const {
    return comm_busy_seconds > comm_wait_seconds ? comm_busy_seconds - comm_wait_seconds : 0.0;
  }
};

}  // namespace zinf::zero
