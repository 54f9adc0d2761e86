// Fuzz target: a `zinf train` scenario file, from bytes to a validated Scenario (spec::parse_json_text
// then spec::parse_scenario with the planner's shape rule, as the CLI does).
// Invariants: no crash or exception; an error is one line; an accepted scenario survives its own
// round trip (parse_scenario(to_json(s)) == s) and its size figures are computable.
#include <string_view>

#include "libengine/spec/json_input.h"
#include "libengine/spec/scenario.h"
#include "planner/shape_rule.h"
#include "tests/fuzz/fuzz_target.h"

using zinf::fuzz::check_one_line;
using zinf::fuzz::fuzz_fail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto document = zinf::spec::parse_json_text(text, "fuzz.json");
  check_one_line(document.status(), size);
  if (!document.is_ok()) return 0;
  const zinf::spec::ShapeResolver resolver = [](std::uint64_t params, std::int64_t vocab, std::int64_t seq) {
    return zinf::planner::shape_for_params(params, vocab, seq);
  };
  const auto scenario = zinf::spec::parse_scenario(*document, "fuzz.json", resolver);
  check_one_line(scenario.status(), size);
  if (!scenario.is_ok()) return 0;
  const auto again = zinf::spec::parse_scenario(zinf::spec::to_json(*scenario), "fuzz.json", resolver);
  if (!again.is_ok()) fuzz_fail("an accepted scenario's to_json is refused: " + again.status().message(), size);
  if (!(*again == *scenario)) fuzz_fail("an accepted scenario changes in its own round trip", size);
  (void)zinf::spec::one_layer_device_bytes(*scenario);
  (void)zinf::spec::fingerprint(*scenario);
  return 0;
}
