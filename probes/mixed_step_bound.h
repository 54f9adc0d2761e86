// The I/O-bound step target of `zinf bench train --zero0` (issue 26 §7): on a drive slower than the
// compute the step should be set by the drive alone, so the engine's step is held against
//
//   bound = max(ZeRO-0 step, the step's NVMe bytes / the drive's mixed read+write rate)
//
// where the mixed rate is the drive's capacity for the step's pattern — reads of some extents while
// others are written, at the step's own read share of its NVMe bytes — measured on the same drive in
// the same run. Reads and writes that overlap on one drive share it: the mixed rate (not the
// sequential read and write rates added up) is what the step's traffic can get.
// Arithmetic only; offload_bench measures the inputs.
#pragma once

#include <optional>
#include <string>

namespace zinf::probes {

inline constexpr double kMixedStepBoundTarget = 1.10;  // engine step / bound, at most

// fio's rwmixread for the step: the percentage of its NVMe bytes that are reads, rounded to the
// nearest integer and clamped to 1..99 (fio's mixed job needs both directions). 50 when the step
// moves no bytes.
unsigned step_read_percent(double read_bytes, double write_bytes);

// The drive's mixed capacity from the measurements of the step's pattern: fio's two jobs
// (fio_runner.h, FioSplitMix) and zinf's own swap store (mixed_io_probe.h), each a median in B/s.
// Every client of a drive can only fall short of what the drive can do, so each honest measurement
// of the same pattern is a lower bound of the capacity and the higher one is the better estimate:
// the capacity is the larger, and `source` names it ("fio" or "swap store"). nullopt when neither
// was measured (or neither is positive).
struct MixedCapacity {
  double bytes_per_second = 0.0;
  std::string source;
};
std::optional<MixedCapacity> drive_mixed_capacity(std::optional<double> fio_bytes_per_second,
                                                  std::optional<double> store_bytes_per_second);

struct MixedStepBound {
  double nvme_ms = 0.0;   // (read_bytes + write_bytes) / mixed rate, milliseconds
  double bound_ms = 0.0;  // max(zero0_step_ms, nvme_ms)
  double ratio = 0.0;     // engine_step_ms / bound_ms
  bool met = false;       // ratio <= kMixedStepBoundTarget, and the bound is one (below)
  // The rate the engine's own step moved its NVMe bytes at (bytes / engine step). When it is above
  // the measured mixed rate, the measurement is not the drive's capacity (the step just did more),
  // and a bound computed from it would pass any step: `bounds` is false and `met` with it.
  double engine_bytes_per_second = 0.0;
  bool bounds = true;
};

// The bound for one step's figures; `mixed_bytes_per_second` > 0 (a measured rate).
MixedStepBound mixed_step_bound(double engine_step_ms, double zero0_step_ms, double read_bytes, double write_bytes,
                                double mixed_bytes_per_second);

}  // namespace zinf::probes
