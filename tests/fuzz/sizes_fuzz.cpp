// Fuzz target: the size strings every flag and profile field goes through (core/units.h), the
// whole-number flags (parse_int_in_range, as --steps/--threads use it) and sweep values
// (planner/sweep.h). The first byte picks the parser, the rest is the text.
// Invariants: no crash; an error is one line naming the field; a parsed value is in range (counts
// and sizes are whole and non-zero unless zero is allowed; rates are finite and positive; integers
// lie within the range asked for); a count or size written in plain digits parses exactly.
#include <charconv>
#include <cmath>
#include <string>

#include "libengine/core/units.h"
#include "planner/sweep.h"
#include "tests/fuzz/fuzz_target.h"

using zinf::fuzz::check_one_line;
using zinf::fuzz::fuzz_fail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto must_name_field = [&](const zinf::Status& status, std::string_view field) {
    check_one_line(status, size);
    if (!status.is_ok() && status.message().rfind(field, 0) != 0)
      fuzz_fail("an error not naming its field: " + status.message(), size);
  };
  switch (data[0] % 9) {
    case 0: {
      const auto count = zinf::parse_count(text, "--params");
      must_name_field(count.status(), "--params");
      if (count.is_ok() && *count == 0) fuzz_fail("a count of zero was accepted", size);
      // Plain digits parse exactly, beyond 2^53 too.
      std::uint64_t exact = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), exact);
      if (ec == std::errc() && end == text.data() + text.size() && exact > 0 && (!count.is_ok() || *count != exact)) {
        fuzz_fail("plain digits did not parse exactly: " + text, size);
      }
      break;
    }
    case 1: {
      const auto bytes = zinf::parse_bytes(text, "--cpu-mem");
      must_name_field(bytes.status(), "--cpu-mem");
      if (bytes.is_ok() && *bytes == 0) fuzz_fail("zero bytes were accepted", size);
      break;
    }
    case 2:
      must_name_field(zinf::parse_bytes(text, "--nvme", zinf::ZeroIs::kAllowed).status(), "--nvme");
      break;
    case 3: {
      const auto rate = zinf::parse_bandwidth(text, "--pcie-bw");
      must_name_field(rate.status(), "--pcie-bw");
      if (rate.is_ok() && !(std::isfinite(*rate) && *rate > 0))
        fuzz_fail("a bandwidth that is not finite and positive", size);
      break;
    }
    case 4: {
      const auto flops = zinf::parse_flops(text, "--gpu-flops");
      must_name_field(flops.status(), "--gpu-flops");
      if (flops.is_ok() && !(std::isfinite(*flops) && *flops > 0))
        fuzz_fail("FLOP/s that are not finite and positive", size);
      break;
    }
    case 5: {
      const auto value = zinf::parse_int_in_range(text, "--steps", 1, std::int64_t{1} << 40);
      must_name_field(value.status(), "--steps");
      if (value.is_ok() && (*value < 1 || *value > (std::int64_t{1} << 40))) fuzz_fail("an integer out of range", size);
      break;
    }
    case 6: {
      const auto value = zinf::parse_int_in_range(text, "--threads", 0, 4096);
      must_name_field(value.status(), "--threads");
      if (value.is_ok() && (*value < 0 || *value > 4096)) fuzz_fail("an integer out of range", size);
      break;
    }
    case 7: {
      const auto dimension = zinf::planner::parse_sweep_dimension(text, "--sweep");
      must_name_field(dimension.status(), "--sweep");
      if (dimension.is_ok() && dimension->values.empty()) fuzz_fail("a sweep dimension without values", size);
      break;
    }
    default: {
      const auto values = zinf::planner::parse_sweep_values(zinf::planner::SweepKey::kNodes, text, "--nodes");
      must_name_field(values.status(), "--nodes");
      if (values.is_ok()) {
        for (const std::uint64_t v : *values) {
          if (v == 0) fuzz_fail("a node count of zero", size);
        }
      }
      break;
    }
  }
  return 0;
}
