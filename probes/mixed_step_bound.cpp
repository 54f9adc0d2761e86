#include "probes/mixed_step_bound.h"

#include <algorithm>
#include <cmath>

#include "libengine/core/check.h"

namespace zinf::probes {

unsigned step_read_percent(double read_bytes, double write_bytes) {
  const double total = read_bytes + write_bytes;
  if (total <= 0) return 50;
  const double percent = std::round(100.0 * read_bytes / total);
  return static_cast<unsigned>(std::clamp(percent, 1.0, 99.0));
}

std::optional<MixedCapacity> drive_mixed_capacity(std::optional<double> fio_bytes_per_second,
                                                  std::optional<double> store_bytes_per_second) {
  const double fio = fio_bytes_per_second.value_or(0.0);
  const double store = store_bytes_per_second.value_or(0.0);
  if (fio <= 0 && store <= 0) return std::nullopt;
  // A tie goes to fio: the outside tool's figure is the one a reader can reproduce without zinf.
  if (fio >= store) return MixedCapacity{fio, "fio"};
  return MixedCapacity{store, "swap store"};
}

MixedStepBound mixed_step_bound(double engine_step_ms, double zero0_step_ms, double read_bytes, double write_bytes,
                                double mixed_bytes_per_second) {
  ZINF_CHECK(mixed_bytes_per_second > 0, "mixed step bound: the drive's mixed rate must be positive");
  MixedStepBound b;
  b.nvme_ms = (read_bytes + write_bytes) / mixed_bytes_per_second * 1e3;
  b.bound_ms = std::max(zero0_step_ms, b.nvme_ms);
  b.ratio = engine_step_ms / b.bound_ms;
  b.engine_bytes_per_second = engine_step_ms > 0 ? (read_bytes + write_bytes) / (engine_step_ms * 1e-3) : 0.0;
  b.bounds = b.engine_bytes_per_second <= mixed_bytes_per_second;
  b.met = b.bounds && b.ratio <= kMixedStepBoundTarget;
  return b;
}

}  // namespace zinf::probes
