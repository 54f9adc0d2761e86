// Fuzz target: a DeepSpeed ds_config.json (`zinf plan --ds-config FILE`, a scenario's "deepspeed"),
// parsed and resolved as the CLI does, against a fixed model (hidden 1024) on 8 GPUs. Invariants:
// no crash or exception; errors are one line; an accepted config's batch sizes satisfy DeepSpeed's
// train = micro x accumulation x world; the engine section built from it parses back to itself
// (parse_zero_config(to_json(z)) == z: every mapping is one the engine accepts); and its plan, when
// the placement is allowed, has finite figures and findings that each name a key and a value.
#include <cmath>
#include <string_view>

#include "libengine/spec/deepspeed_config.h"
#include "libengine/spec/json_input.h"
#include "libengine/spec/zero_config.h"
#include "planner/deepspeed_plan.h"
#include "planner/hardware_profile.h"
#include "tests/fuzz/fuzz_target.h"

using zinf::fuzz::check_one_line;
using zinf::fuzz::fuzz_fail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace spec = zinf::spec;
  namespace planner = zinf::planner;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto document = spec::parse_json_text(text, "ds_config.json");
  check_one_line(document.status(), size);
  if (!document.is_ok()) return 0;
  const auto config = spec::parse_deepspeed_config(*document, "ds_config");
  check_one_line(config.status(), size);
  if (!config.is_ok()) return 0;

  planner::PlanInput input;
  input.shape = spec::gpt_like_shape(24, 1024, 16, 50257, 1024);
  input.model_source = "fuzz";
  input.hardware = planner::load_hardware_profile("dgx-h100").value();
  spec::DsAutoSources sources;
  sources.hidden = input.shape.hidden;
  sources.world_size = input.hardware.total_gpus();
  const auto resolved = spec::resolve_deepspeed(*config, sources, "ds_config");
  check_one_line(resolved.status(), size);
  if (!resolved.is_ok()) return 0;
  if (resolved->train_batch != resolved->micro_batch * resolved->grad_accumulation * sources.world_size) {
    fuzz_fail("an accepted config's batch sizes do not multiply out", size);
  }

  const auto zero =
      spec::zero_config_from_deepspeed(*resolved, 2, spec::count_parameters(input.shape).total, "ds_config");
  check_one_line(zero.status(), size);
  if (zero.is_ok()) {
    const nlohmann::json echoed = spec::to_json(*zero);
    const auto wrapped = spec::JsonObject::wrap(echoed, "scenario.zero");
    const auto reparsed = spec::parse_zero_config(wrapped.value());
    if (!reparsed.is_ok() || !(*reparsed == *zero)) fuzz_fail("the engine section does not parse back to itself", size);
  }

  planner::apply_deepspeed(*resolved, input);
  input.training.accounting =
      input.training.precision == zinf::DType::kF32 ? spec::StateAccounting::kFp32 : spec::StateAccounting::kPaper;
  const auto plan = planner::make_plan(input);
  check_one_line(plan.status(), size);
  if (!plan.is_ok()) return 0;
  if (plan->feasible && !std::isfinite(plan->prediction.step_seconds)) fuzz_fail("a non-finite step time", size);
  for (const planner::DsFinding& finding : planner::check_deepspeed(*resolved, *plan)) {
    if (finding.key.empty() || finding.would_work.empty() || finding.problem.find('\n') != std::string::npos) {
      fuzz_fail("a finding without a key or a value that would work", size);
    }
  }
  return 0;
}
