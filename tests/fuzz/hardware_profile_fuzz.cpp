// Fuzz target: a hardware profile file (`zinf plan --hw FILE`), parsed and validated as
// planner::load_hardware_profile does, then planned against: an accepted profile must give a plan
// whose every predicted figure is finite (issue 15: tiny bandwidths printed inf and -nan%).
// Invariants: no crash or exception; errors are one line; accepted profiles validate and plan.
#include <string_view>

#include "libengine/spec/json_input.h"
#include "planner/hardware_profile.h"
#include "planner/planner.h"
#include "planner/shape_rule.h"
#include "tests/fuzz/fuzz_target.h"

using zinf::fuzz::check_one_line;
using zinf::fuzz::fuzz_fail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto document = zinf::spec::parse_json_text(text, "hw.json");
  check_one_line(document.status(), size);
  if (!document.is_ok()) return 0;
  const auto profile = zinf::planner::parse_hardware_profile(*document, "hw.json");
  check_one_line(profile.status(), size);
  if (!profile.is_ok()) return 0;
  if (!zinf::planner::validate(*profile).is_ok()) fuzz_fail("an accepted profile does not validate", size);
  zinf::planner::PlanInput input;
  input.hardware = *profile;
  input.shape =
      zinf::planner::shape_for_params(7'000'000'000, zinf::planner::kDefaultVocab, input.training.seq).value();
  const auto plan = zinf::planner::make_plan(input);
  if (!plan.is_ok()) fuzz_fail("a valid profile gives no plan: " + plan.status().message(), size);
  if (plan->feasible && !zinf::planner::check_finite(plan->prediction).is_ok())
    fuzz_fail("a non-finite prediction", size);
  return 0;
}
