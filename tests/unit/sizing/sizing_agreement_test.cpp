// The planner's per-tier bytes against what the engine allocates, for every shipped scenario that
// trains on this machine: both follow the sizing rules in libengine/spec/sizing/, and this test is
// what keeps them the same. Each scenario's session is built (model, states, NVMe store) without
// running a step; the planner's items allocated at set-up must equal the device and host tiers'
// bytes in use then, its NVMe bytes the store's extents, its budgets the engine's resolved ones.
// The items taken as the steps run (gathered parameters, gradient buffers in flight, NVMe read
// staging) are budgets, not allocations: their budgets are compared, not bytes.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "libengine/train/train_session.h"
#include "planner/engine_model.h"
#include "planner/shape_rule.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf {
namespace {

const std::string kScenarios = ZINF_FIXTURES_DIR "/../../scenarios";

// Shipped scenarios this test does not build, and why.
const std::map<std::string, std::string>& skipped() {
  static const std::map<std::string, std::string> reasons = {
      {"gpt-1.3b-cuda", "a CUDA scenario"},
      {"gpu-offload-cpu", "a CUDA scenario"},
      {"gpu-offload-nvme", "a CUDA scenario"},
      {"mistral-7b-plan", "plan-only: 7B parameters"},
      {"nvme-2b", "plan-only here: 2B parameters, minutes to initialise"},
      {"tinyllama-1.1b-nvme", "plan-only here: 1.1B parameters, minutes to initialise"},
      {"gpt2-small-bf16", "124M parameters at seq 1024: gigabytes of activations, too slow for a unit test"},
      {"tiny-budget", "refused by design (device_memory below one layer); checked below"},
  };
  return reasons;
}

Result<spec::Scenario> load(const std::string& name) {
  const std::string path = kScenarios + "/" + name + ".json";
  std::ifstream in(path);
  nlohmann::json document = nlohmann::json::parse(in);
  // A scenario's "deepspeed" file is named relative to where zinf runs (the checkout); ctest runs
  // this test in the build folder.
  if (document.contains("deepspeed") && document["deepspeed"].is_string() &&
      std::filesystem::path(document["deepspeed"].get<std::string>()).is_relative()) {
    document["deepspeed"] = ZINF_FIXTURES_DIR "/../../" + document["deepspeed"].get<std::string>();
  }
  return spec::parse_scenario(document, path, [](std::uint64_t params, std::int64_t vocab, std::int64_t seq) {
    return planner::shape_for_params(params, vocab, seq, [](std::string_view f) { return std::string(f); });
  });
}

// Builds `scenario`'s session and compares it with the planner's prediction.
void check_agreement(spec::Scenario scenario) {
  testing::TempDir dir;
  if (!scenario.zero.nvme_paths.empty()) scenario.zero.nvme_paths = {dir.path()};
  scenario.checkpoint.dir.clear();
  planner::EngineHardware hw;  // rates do not change bytes; the CPU backend computes in fp32
  hw.compute_flops = 1e11;
  hw.memory_bandwidth = 1e10;
  hw.host_device_bandwidth = 5e9;
  hw.nvme_read_bandwidth = hw.nvme_write_bandwidth = 1e9;
  hw.compute_on_host = true;
  const planner::EnginePrediction plan = planner::predict_engine(scenario, hw);

  auto built = train::TrainSession::create(scenario, {.resume = false});
  REQUIRE(built.is_ok());
  train::TrainSession& session = *built.value();
  const memory::TierUsage device = session.device().memory().usage();
  const memory::TierUsage host = session.device().host_memory().usage();
  const zero::EngineStats stats = session.states().stats();

  CHECK(plan.activation_bytes == static_cast<double>(session.model().activation_bytes()));
  CHECK(planner::setup_bytes(plan.device_items) == static_cast<double>(device.current_bytes));
  CHECK(planner::setup_bytes(plan.host_items) == static_cast<double>(host.current_bytes));
  CHECK(plan.nvme_peak_bytes == static_cast<double>(stats.nvme_bytes));
  // No item of the NVMe tier is transient: it is all allocated when the store opens.
  CHECK(planner::setup_bytes(plan.nvme_items) == plan.nvme_peak_bytes);
  // The store reserves what the plan puts there, rounded up to its 1 MiB blocks (one path here): no
  // room for states that live elsewhere (the optimizer's 12 B/element when they stay in host memory).
  if (scenario.zero.uses_nvme()) {
    CHECK(static_cast<double>(stats.nvme_capacity_bytes) >= plan.nvme_peak_bytes);
    CHECK(static_cast<double>(stats.nvme_capacity_bytes) < plan.nvme_peak_bytes + 1048576.0);
  }
  if (scenario.zero.partitioned() && scenario.zero.params != spec::Tier::kDevice) {
    CHECK(plan.max_live_bytes == session.zero().max_live_bytes);
  }
  if (scenario.zero.partitioned() && scenario.zero.params == spec::Tier::kNvme) {
    CHECK(plan.prefetch_bytes == session.zero().prefetch_bytes);
  }
}

TEST_CASE("every shipped scenario is either checked here or skipped by name with a reason") {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(kScenarios)) {
    if (entry.path().extension() == ".json") names.insert(entry.path().stem().string());
  }
  REQUIRE(names.size() > 10);
  for (const auto& [name, reason] : skipped()) {
    INFO(name);
    CHECK(names.count(name) == 1);  // a stale skip entry fails too
  }
  CHECK(load("tiny-budget").status().message().find("too small for even one layer") != std::string::npos);
}

TEST_CASE("the planner's per-tier bytes are the engine's, for every shipped scenario that trains here") {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(kScenarios)) {
    if (entry.path().extension() == ".json") names.insert(entry.path().stem().string());
  }
  for (const std::string& name : names) {
    if (skipped().count(name) != 0) continue;
    INFO("scenario " << name);
    Result<spec::Scenario> scenario = load(name);
    REQUIRE(scenario.is_ok());
    check_agreement(scenario.value());
  }
}

TEST_CASE("a Llama-shaped model's bytes agree on every tier (RMSNorm, SwiGLU, RoPE, grouped-query attention)") {
  Result<spec::Scenario> loaded = load("llama-tiny");
  REQUIRE(loaded.is_ok());
  const spec::Scenario base = loaded.value();
  REQUIRE(base.shape.mlp == spec::MlpKind::kGated);
  REQUIRE(base.shape.position == spec::PositionKind::kRotary);
  for (const auto& [params, optimizer, precision, checkpointing] :
       {std::tuple{spec::Tier::kCpu, spec::Tier::kCpu, DType::kBF16, true},
        std::tuple{spec::Tier::kNvme, spec::Tier::kNvme, DType::kBF16, true},
        std::tuple{spec::Tier::kNvme, spec::Tier::kCpu, DType::kF32, false},
        std::tuple{spec::Tier::kCpu, spec::Tier::kNvme, DType::kF32, true}}) {
    spec::Scenario s = base;
    s.batch = 4;
    s.precision = precision;
    s.activation_checkpointing = checkpointing;
    s.shape.kv_heads = std::max<std::int64_t>(1, s.shape.heads / 2);  // grouped-query attention
    s.zero.stage = 3;
    s.zero.params = params;
    s.zero.grads = spec::Tier::kCpu;
    s.zero.optimizer = optimizer;
    s.zero.host_memory_bytes = 256ull << 20;
    s.zero.persistence_threshold = 1024;
    if (s.zero.uses_nvme()) s.zero.nvme_paths = {"set by check_agreement"};
    INFO("params " << static_cast<int>(params) << " optimizer " << static_cast<int>(optimizer) << " precision "
                   << dtype_name(precision) << " checkpointing " << checkpointing);
    check_agreement(s);
  }
}

}  // namespace
}  // namespace zinf
