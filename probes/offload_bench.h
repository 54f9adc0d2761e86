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
// bytes at the drive's GB/s). And issue 26's target: the step against max(ZeRO-0 step, the step's
// NVMe bytes at the drive's mixed read+write capacity, measured at the step's read share by fio
// (when on PATH) and by the swap store itself; mixed_step_bound.h). Prints nothing; bench_train
// renders it.
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
  // Where the forward+backward time goes, per timed step (milliseconds): the two passes; the
  // training thread blocked in acquire() for a parameter (its read, copy or gather); CPU Adam (on
  // the CPU backend it runs on the training thread, so what is overlapped counts in the backward
  // pass); and, from the scheduler's statistics (thread_cpu.h), CPU time and run-queue wait of
  // the compute threads, the swap store's I/O thread and the other engine threads. The CPU
  // figures stay empty where the kernel keeps no per-thread statistics.
  std::vector<double> forward_ms;
  std::vector<double> backward_ms;
  std::vector<double> param_wait_ms;
  std::vector<double> adam_ms;
  std::vector<double> adam_overlapped_ms;
  std::vector<double> compute_cpu_ms;
  std::vector<double> compute_runqueue_ms;
  std::vector<double> io_cpu_ms;
  std::vector<double> io_runqueue_ms;
  std::vector<double> other_cpu_ms;
};

struct OffloadBenchResult {
  OffloadSide engine;
  OffloadSide zero0;
  // The engine with zero.overlap_optimizer false (DeepSpeed's order), when the scenario's optimizer
  // is on the CPU or NVMe and overlaps: the overlap's speed-up is measured against it.
  std::optional<OffloadSide> serial;
  std::optional<SampleSpread> nvme_read_gbps;  // swap store, sequential, same run
  std::optional<SampleSpread> nvme_write_gbps;
  // The drive's mixed read+write rate for the step's pattern — reads of some extents while others
  // are written, at the engine step's read share of its NVMe bytes, with the engine store's block
  // size and queue depth, on the measuring store's own files, same run; GB/s of both directions
  // together — measured twice, alternately: by fio (two jobs, FioSplitMix) and by zinf's swap store
  // itself (mixed_io_probe.h). Each is empty with its why_not set when it could not be measured.
  std::optional<SampleSpread> nvme_mixed_fio_gbps;
  std::vector<std::string> fio_mixed_argv;
  std::string fio_mixed_why_not;
  std::optional<SampleSpread> nvme_mixed_store_gbps;
  std::string store_mixed_why_not;
  unsigned nvme_mixed_read_percent = 0;
  // The capacity the bound uses: the spread of the higher median (drive_mixed_capacity), and which.
  std::optional<SampleSpread> nvme_mixed_gbps;
  std::string nvme_mixed_source;
  nlohmann::json ratios;  // the targets, each with its figure and bound
};

// `scenario` has a partitioned "zero" section and its steps set to warmup + timed steps; warmup and
// repeat as bench train's flags.
// `progress` gets one line per phase (may be empty).
Result<OffloadBenchResult> run_offload_bench(const spec::Scenario& scenario, std::int64_t warmup, std::int64_t repeat,
                                             const std::function<void(const std::string&)>& progress);

nlohmann::json offload_side_json(const OffloadSide& side);

}  // namespace zinf::probes
