#include "apps/zinf/hf_train_scenario.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "libengine/core/units.h"
#include "libengine/spec/hf_config.h"

namespace zinf::cli {

std::uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
}

Result<HfTrainScenario> hf_train_scenario(const std::string& config_path, std::uint64_t memory_bytes) {
  ZINF_ASSIGN_OR_RETURN(const spec::ModelShape shape, spec::load_hf_config(config_path));
  const std::uint64_t params = spec::count_parameters(shape).total;
  const double states = 16.0 * static_cast<double>(params);
  const double memory = static_cast<double>(memory_bytes);
  const std::int64_t seq = std::min<std::int64_t>(128, shape.max_positions);
  nlohmann::json doc{
      {"name", fmt::format("hf-{}", std::filesystem::path(config_path).parent_path().filename().string())},
      {"model", {{"hf_config", std::filesystem::absolute(config_path).string()}}},
      {"batch", 1},
      {"seq", seq},
      {"steps", 10},
      {"optimizer", {{"lr", 3e-4}, {"schedule", {{"kind", "cosine"}, {"warmup_steps", 2}}}}},
      {"activation_checkpointing", params > 100'000'000}};
  if (doc["name"] == "hf-") doc["name"] = "hf-config";
  std::string placement;
  if (memory <= 0 || states <= 0.5 * memory) {
    placement = "model states resident (ZeRO-0)";
  } else if (states <= 0.6 * memory) {
    doc["zero"] = {{"stage", 3}, {"params", "cpu"}, {"optimizer", "cpu"}};
    placement = "ZeRO-3, parameters and optimizer in host memory";
  } else {
    const std::string nvme =
        (std::filesystem::temp_directory_path() / fmt::format("zinf-nvme-{}", static_cast<long>(getpid()))).string();
    doc["zero"] = {{"stage", 3}, {"params", "nvme"}, {"optimizer", "nvme"}, {"nvme_paths", {nvme}}};
    placement = fmt::format("ZeRO-3, parameters and optimizer on NVMe in {}", nvme);
  }
  HfTrainScenario out;
  out.summary = fmt::format(
      "--hf-config {}: {} ({} parameters), 10 steps of batch 1 x seq {} on Markov data, {} ({} of fp32 model states, "
      "{} of memory){}; write a scenario with \"model\": {{\"hf_config\": ...}} to change any of it",
      config_path, shape.name, format_count(static_cast<double>(params)), seq, placement, format_bytes(states),
      memory > 0 ? format_bytes(memory) : std::string("unknown"),
      params > 100'000'000 ? ", activation checkpointing" : "");
  out.scenario = std::move(doc);
  return out;
}

}  // namespace zinf::cli
