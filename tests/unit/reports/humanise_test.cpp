// Numbers as a report writes them (humanise.h): units scaled to the value, never e-notation.
#include "reports/humanise.h"

#include <string>

#include "tests/catch.h"

namespace zinf::reports {
namespace {

TEST_CASE("humane: each quantity in the unit that reads", "[humanise]") {
  CHECK(humane(55402496.0, Quantity::kBytes) == "52.8 MiB");  // 55402496 / 2^20 = 52.84
  CHECK(humane(28037546508288.0, Quantity::kBytes) == "25.5 TiB");
  CHECK(humane(0.77444, Quantity::kMilliseconds) == "774 µs");
  CHECK(humane(369.28, Quantity::kMilliseconds) == "369 ms");
  CHECK(humane(2e6, Quantity::kMilliseconds) == "33.3 min");  // 2e6 ms = 2000 s = 33.3 min
  CHECK(humane(1963.15, Quantity::kSeconds) == "32.7 min");
  CHECK(humane(0.02508, Quantity::kFraction) == "2.51%");
  CHECK(humane(13.4, Quantity::kFraction) == "1340%");
  CHECK(humane(0.0136, Quantity::kGBps) == "0.0136 GB/s");
  CHECK(humane(0.000326, Quantity::kGBps) == "0.326 MB/s");
  CHECK(humane(6.774e10, Quantity::kFlops) == "67.7 GFLOP/s");
  CHECK(humane(438e3, Quantity::kCount) == "438K");
}

TEST_CASE("humane_number: plain numbers without e-notation", "[humanise]") {
  CHECK(humane_number(42) == "42");
  CHECK(humane_number(1.356) == "1.356");
  CHECK(humane_number(2.608e4) == "26080");
  CHECK(humane_number(14571.3) == "14571");
  CHECK(humane_number(6.774e10) == "67.7B");
  CHECK(humane_number(1e-8) == "1×10⁻⁸");
  for (const double v : {1e-9, 3.3e-5, 14571.3, 2.608e4, 123456.7, 1.7e7, 9.9e14}) {
    INFO(v);
    CHECK(humane_number(v).find("e+") == std::string::npos);
    CHECK(humane_number(v).find("e-") == std::string::npos);
  }
}

TEST_CASE("quantity_of_key reads a record field's name", "[humanise]") {
  CHECK(quantity_of_key("memory.device.peak_bytes") == Quantity::kBytes);
  CHECK(quantity_of_key("summary.data_ms_median") == Quantity::kMilliseconds);
  CHECK(quantity_of_key("steps[].step_ms") == Quantity::kMilliseconds);
  CHECK(quantity_of_key("prediction.step_seconds_no_overlap") == Quantity::kSeconds);
  CHECK(quantity_of_key("compute_peak.probes_flops_per_s") == Quantity::kFlops);
  CHECK(quantity_of_key("model.flops_per_step") == Quantity::kCount);
  CHECK(quantity_of_key("prediction.tokens_per_second") == Quantity::kCount);
  CHECK(quantity_of_key("optimizer_gbps") == Quantity::kGBps);
  CHECK(quantity_of_key("engine.prefetch.hit_rate") == Quantity::kFraction);
  CHECK(quantity_of_key("mfu") == Quantity::kFraction);
  CHECK(quantity_of_key("layers") == Quantity::kNone);
}

TEST_CASE("axis_scale: one unit for an axis, round in that unit", "[humanise]") {
  const AxisScale mib = axis_scale(Quantity::kBytes, 55402496.0);
  CHECK(mib.unit == "MiB");
  CHECK(mib.divisor == 1048576.0);
  CHECK(axis_scale(Quantity::kBytes, 2.8e13).unit == "TiB");
  CHECK(axis_scale(Quantity::kMilliseconds, 1130).unit == "s");
  CHECK(axis_scale(Quantity::kMilliseconds, 0.5).unit == "µs");
  CHECK(axis_scale(Quantity::kSeconds, 1963).unit == "min");
  CHECK(axis_scale(Quantity::kSeconds, 1963).divisor == 60.0);
  CHECK(axis_scale(Quantity::kCount, 4.9e7).unit == "M");
  CHECK(axis_scale(Quantity::kNone, 60).unit.empty());
}

}  // namespace
}  // namespace zinf::reports
