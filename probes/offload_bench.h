// offload_bench: the measuring part of `zinf bench train --zero0`: the scenario's engine (its
// "zero" placement) next to ZeRO-0 on the same model in the same process, repetitions
// alternating, and — when a state lives on NVMe — the swap store's sequential read and write
// GB/s on the scenario's first NVMe path, measured in the same run. From these it computes the
// issue-11 targets as ratios: the offload tax (engine step / ZeRO-0 step), the NVMe bound (engine
// step / (ZeRO-0 forward+backward + the optimizer's NVMe bytes at the drive's sequential speed)),
// the optimizer phase's NVMe GB/s against the drive's, the compute thread's stall share, the
// prefetch hit rate and how flat host memory stays. With the optimizer on the CPU or NVMe and
// zero.overlap_optimizer on, a third side runs the engine with the overlap off, for issue 12's
// targets: the overlap's speed-up and the step against max(compute-only step, the step's NVMe
// bytes at the drive's GB/s). With fio on PATH, issue 26's target too: the step against max(ZeRO-0
// step, the step's NVMe bytes at the drive's mixed read+write rate measured by fio at the step's
// read share; mixed_step_bound.h). Prints nothing; bench_train renders it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/core/status.h"
#include "libengine/spec/scenario.h"
#include "probes/latency_stats.h"

namespace zinf::probes {

struct OffloadSide {
  std::vector<double> step_ms;  // every timed step of every repetition
  std::vector<double> fb_ms;    // forward+backward
  std::vector<double> optimizer_ms;
  std::vector<double> stall_fraction;  // stall / forward+backward, per timed step
  std::uint64_t acquires = 0;
  std::uint64_t prefetch_hits = 0;
  double optimizer_nvme_read_bytes = 0;  // per timed step, mean
  double optimizer_nvme_write_bytes = 0;
  double nvme_read_bytes = 0;  // per timed step, mean, every phase
  double nvme_write_bytes = 0;
  double optimizer_elements = 0;             // per timed step, mean
  double optimizer_elements_overlapped = 0;  // of those, stepped before the backward pass ended
  std::vector<double> host_tier_bytes;       // host tier in use after each timed step
  std::vector<double> rss_bytes;             // process resident set after each timed step
};

struct OffloadBenchResult {
  OffloadSide engine;
  OffloadSide zero0;
  // The engine with zero.overlap_optimizer false (DeepSpeed's order), when the scenario's optimizer
  // is on the CPU or NVMe and overlaps: the overlap's speed-up is measured against it.
  std::optional<OffloadSide> serial;
  std::optional<SampleSpread> nvme_read_gbps;  // swap store, sequential, same run
  std::optional<SampleSpread> nvme_write_gbps;
  // fio's mixed read+write rate (rw, rwmixread = the engine step's read share of its NVMe bytes) on
  // the same store's files, same block size and queue depth as the engine's store, same run; GB/s
  // of both directions together. Empty with fio_mixed_why_not set when it could not be measured.
  std::optional<SampleSpread> nvme_mixed_gbps;
  unsigned nvme_mixed_read_percent = 0;
  std::vector<std::string> fio_mixed_argv;
  std::string fio_mixed_why_not;
  nlohmann::json ratios;  // the targets, each with its figure and bound
};

// `scenario` has a partitioned "zero" section and its steps set to warmup + timed steps; warmup and
// repeat as bench train's flags.
// `progress` gets one line per phase (may be empty).
Result<OffloadBenchResult> run_offload_bench(const spec::Scenario& scenario, std::int64_t warmup, std::int64_t repeat,
                                             const std::function<void(const std::string&)>& progress);

nlohmann::json offload_side_json(const OffloadSide& side);

}  // namespace zinf::probes
