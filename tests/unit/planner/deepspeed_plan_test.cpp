// DeepSpeed configs in the planner: the stage picks the family and the config pins the placement;
// findings carry the value that would work, checked against figures worked out by hand; a plan
// written out as a DeepSpeed config and read back is the same plan.
#include "planner/deepspeed_plan.h"

#include <string>

#include "libengine/core/units.h"
#include "libengine/spec/json_input.h"
#include "planner/hardware_profile.h"
#include "planner/shape_rule.h"
#include "tests/catch.h"

namespace zinf::planner {
namespace {

using spec::StateKind;
using spec::Tier;

spec::ResolvedDeepSpeed resolved_from(const std::string& text, const PlanInput& input) {
  const nlohmann::json document = spec::parse_json_text(text, "t.json").value();
  const spec::DeepSpeedConfig config = spec::parse_deepspeed_config(document, "ds_config").value();
  spec::DsAutoSources sources;
  sources.hidden = input.shape.hidden;
  sources.world_size = input.hardware.total_gpus();
  sources.precision = DType::kBF16;
  Result<spec::ResolvedDeepSpeed> resolved = spec::resolve_deepspeed(config, sources, "ds_config");
  INFO(resolved.status().message());
  REQUIRE(resolved.is_ok());
  return std::move(resolved).value();
}

PlanInput base_input() {
  PlanInput input;
  input.shape = spec::gpt_like_shape(32, 4096, 32, 50257, 1024);  // about 6.7B parameters
  input.model_source = "test";
  input.hardware = load_hardware_profile("dgx2-v100").value();
  return input;
}

const DsFinding* finding(const std::vector<DsFinding>& findings, const std::string& key) {
  for (const DsFinding& f : findings)
    if (f.key == key) return &f;
  return nullptr;
}

TEST_CASE("a stage-3 NVMe config pins its placement and its wrong settings carry what would work") {
  PlanInput input = base_input();
  const spec::ResolvedDeepSpeed r = resolved_from(
      R"({"zero_optimization": {"stage": 3,
            "offload_param": {"device": "nvme", "nvme_path": "/n", "buffer_count": 5, "buffer_size": 1e8},
            "offload_optimizer": {"device": "cpu"},
            "stage3_prefetch_bucket_size": 2e9, "stage3_max_live_parameters": 1e9},
          "aio": {"block_size": 1000}})",
      input);
  apply_deepspeed(r, input);
  CHECK(input.strategy == Strategy::kDeepSpeedStage3);
  CHECK(input.pinned[static_cast<std::size_t>(StateKind::kParams)] == Tier::kNvme);
  CHECK(input.pinned[static_cast<std::size_t>(StateKind::kGrads)] == Tier::kCpu);
  CHECK(input.pinned[static_cast<std::size_t>(StateKind::kOptimizer)] == Tier::kCpu);
  CHECK(input.pinned[static_cast<std::size_t>(StateKind::kActivations)] == Tier::kDevice);
  const Plan plan = make_plan(input).value();
  CHECK(plan.placement[StateKind::kParams] == Tier::kNvme);
  CHECK(plan.placement[StateKind::kOptimizer] == Tier::kCpu);

  const std::vector<DsFinding> findings = check_deepspeed(r, plan);
  // The largest parameter is the embedding, 50257 x 4096 = 205,852,672 elements > 1e8.
  const DsFinding* buffer = finding(findings, "zero_optimization.offload_param.buffer_size");
  REQUIRE(buffer != nullptr);
  CHECK(buffer->would_work == "205852672");
  const DsFinding* prefetch = finding(findings, "zero_optimization.stage3_prefetch_bucket_size");
  REQUIRE(prefetch != nullptr);
  CHECK(prefetch->would_work == "1000000000");
  const DsFinding* block = finding(findings, "aio.block_size");
  REQUIRE(block != nullptr);
  CHECK(block->would_work == "4096");
}

TEST_CASE("pinned NVMe buffers larger than a rank's CPU memory are found, with the size that fits") {
  PlanInput input = base_input();
  // 5 buffers x 1e12 elements x 2 B = 10 TB per rank, far above a DGX-2's 1.5 TB per node.
  const spec::ResolvedDeepSpeed r = resolved_from(
      R"({"zero_optimization": {"stage": 3,
            "offload_param": {"device": "nvme", "nvme_path": "/n", "buffer_count": 5, "buffer_size": 1e12},
            "offload_optimizer": {"device": "nvme", "nvme_path": "/n"}}})",
      input);
  apply_deepspeed(r, input);
  CHECK(input.strategy == Strategy::kDeepSpeedStage3NvmeOptimizer);
  CHECK_FALSE(input.pinned[static_cast<std::size_t>(StateKind::kGrads)].has_value());
  const Plan plan = make_plan(input).value();
  REQUIRE(plan.feasible);
  const std::vector<DsFinding> findings = check_deepspeed(r, plan);
  const DsFinding* buffer = nullptr;
  for (const DsFinding& f : findings) {
    if (f.key == "zero_optimization.offload_param.buffer_size" && f.problem.find("pinned memory") != std::string::npos)
      buffer = &f;
  }
  REQUIRE(buffer != nullptr);
  // What would work: the CPU memory a rank has left, split over 5 buffers of 2-byte elements.
  const double free_per_rank = (plan.footprint.cpu.capacity_bytes - plan.footprint.cpu.used_bytes) / 16.0;
  CHECK(std::stod(buffer->would_work) == Approx(std::floor(free_per_rank / 10.0)).epsilon(1e-9));
}

TEST_CASE("a plan written as a DeepSpeed config and read back is the same plan") {
  for (const char* params : {"1T", "10B", "1B"}) {
    INFO(params);
    PlanInput input = base_input();
    input.shape = shape_for_params(zinf::parse_count(params, "params").value(), 50257, 1024).value();
    const Plan plan = make_plan(input).value();
    REQUIRE(plan.feasible);
    const Result<nlohmann::json> written = deepspeed_config_for(plan, "/local_nvme");
    INFO(written.status().message());
    REQUIRE(written.is_ok());
    PlanInput again = base_input();
    again.shape = input.shape;
    const spec::ResolvedDeepSpeed r = resolved_from(written->dump(), again);
    apply_deepspeed(r, again);
    const Plan read_back = make_plan(again).value();
    CHECK(read_back.feasible);
    CHECK(read_back.placement == plan.placement);
    CHECK(read_back.prediction.step_seconds == plan.prediction.step_seconds);
    CHECK(read_back.footprint.cpu.used_bytes == plan.footprint.cpu.used_bytes);
  }
}

}  // namespace
}  // namespace zinf::planner
