// `zinf train --hf-config FILE`: a scenario for a Hugging Face config with defaults that fit this
// machine, and the one line that says what was chosen.
//
// Choices: 10 steps, batch 1, seq min(128, max_positions), the Markov data source, fp32, AdamW
// (lr 3e-4, cosine); model states (16 bytes per parameter in fp32 with Adam) resident (ZeRO-0)
// when they take at most half of physical memory, else ZeRO-3 with parameters and optimizer in
// host memory when they take at most 60%, else ZeRO-3 with both on NVMe under the system temporary
// directory (zinf-nvme-<pid>); activation checkpointing above 100M parameters.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "libengine/core/status.h"

namespace zinf::cli {

struct HfTrainScenario {
  nlohmann::json scenario;  // the scenario document (model.hf_config an absolute path)
  std::string summary;      // one line: what it trains and what it chose, and why
};

// Reads the config (errors name the path and the key) and builds the scenario for a machine with
// `memory_bytes` of physical memory.
Result<HfTrainScenario> hf_train_scenario(const std::string& config_path, std::uint64_t memory_bytes);

// Physical memory of this machine (sysconf), 0 when unknown.
std::uint64_t physical_memory_bytes();

}  // namespace zinf::cli
