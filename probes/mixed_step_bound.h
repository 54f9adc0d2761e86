// The I/O-bound step target of `zinf bench train --zero0` (issue 26 §7): on a drive slower than the
// compute the step should be set by the drive alone, so the engine's step is held against
//
//   bound = max(ZeRO-0 step, the step's NVMe bytes / the drive's mixed read+write rate)
//
// where the mixed rate is measured by fio on the same drive, in the same run, at the step's own
// read share of its NVMe bytes. Reads and writes that overlap on one drive share it: the mixed rate
// (not the sequential read and write rates added up) is what the step's traffic can get.
// Arithmetic only; offload_bench measures the inputs.
#pragma once

namespace zinf::probes {

inline constexpr double kMixedStepBoundTarget = 1.10;  // engine step / bound, at most

// fio's rwmixread for the step: the percentage of its NVMe bytes that are reads, rounded to the
// nearest integer and clamped to 1..99 (fio's mixed job needs both directions). 50 when the step
// moves no bytes.
unsigned step_read_percent(double read_bytes, double write_bytes);

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
