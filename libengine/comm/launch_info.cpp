// Parsing of the launchers' environment variables (launch_info.h). Slurm's SLURM_TASKS_PER_NODE is
// the one compound value: "2(x3),1" means three nodes with 2 tasks, then one node with 1.
#include "libengine/comm/launch_info.h"

#include <charconv>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

namespace zinf::comm {
namespace {

constexpr int kMaxWorld = 1 << 24;

// A non-negative decimal int below kMaxWorld, or InvalidArgument naming `name`.
Result<int> parse_env_int(std::string_view name, const std::string& text) {
  int value = -1;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < 0 || value >= kMaxWorld) {
    return Status::invalid_argument(
        fmt::format("environment {}: '{}' is not a non-negative integer below {}", name, text, kMaxWorld));
  }
  return value;
}

// Reads `name` when set; `fallback` otherwise.
Result<int> env_int(const EnvLookup& env, std::string_view name, int fallback) {
  const std::optional<std::string> text = env(name);
  if (!text) return fallback;
  return parse_env_int(name, *text);
}

// Tasks on node `node_id` from SLURM_TASKS_PER_NODE ("2(x3),1"); nullopt when malformed.
std::optional<int> slurm_tasks_on_node(const std::string& spec, int node_id) {
  int node = 0;
  std::size_t pos = 0;
  while (pos < spec.size()) {
    std::size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(pos, comma - pos);
    int tasks = 0;
    int repeat = 1;
    const std::size_t paren = item.find("(x");
    const std::string count_text = item.substr(0, paren);
    if (std::from_chars(count_text.data(), count_text.data() + count_text.size(), tasks).ec != std::errc() ||
        tasks <= 0) {
      return std::nullopt;
    }
    if (paren != std::string::npos) {
      if (item.back() != ')') return std::nullopt;
      const std::string repeat_text = item.substr(paren + 2, item.size() - paren - 3);
      if (std::from_chars(repeat_text.data(), repeat_text.data() + repeat_text.size(), repeat).ec != std::errc() ||
          repeat <= 0) {
        return std::nullopt;
      }
    }
    if (node_id < node + repeat) return tasks;
    node += repeat;
    pos = comma + 1;
  }
  return std::nullopt;
}

Status check_ranks(const LaunchInfo& info, std::string_view rank_name, std::string_view local_name) {
  if (info.world_size < 1) {
    return Status::invalid_argument(fmt::format("environment: the {} launcher gives a world size of {}; expected >= 1",
                                                info.launcher, info.world_size));
  }
  if (info.rank >= info.world_size) {
    return Status::invalid_argument(
        fmt::format("environment {}: {} is not below the world size {}", rank_name, info.rank, info.world_size));
  }
  if (info.local_size < 1 || info.local_rank >= info.local_size || info.local_size > info.world_size) {
    return Status::invalid_argument(fmt::format("environment {}: local rank {} of {} does not fit a world of {}",
                                                local_name, info.local_rank, info.local_size, info.world_size));
  }
  return Status::ok();
}

}  // namespace

Result<LaunchInfo> launch_info_from(const EnvLookup& env) {
  LaunchInfo info;
  if (env("OMPI_COMM_WORLD_SIZE")) {
    info.launcher = "mpirun";
    ZINF_ASSIGN_OR_RETURN(info.world_size, env_int(env, "OMPI_COMM_WORLD_SIZE", 1));
    ZINF_ASSIGN_OR_RETURN(info.rank, env_int(env, "OMPI_COMM_WORLD_RANK", 0));
    ZINF_ASSIGN_OR_RETURN(info.local_rank, env_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0));
    ZINF_ASSIGN_OR_RETURN(info.local_size, env_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", info.world_size));
    ZINF_RETURN_IF_ERROR(check_ranks(info, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"));
    return info;
  }
  if (env("SLURM_PROCID") && env("SLURM_NTASKS") && (env("SLURM_STEP_ID") || env("SLURM_STEPID"))) {
    info.launcher = "srun";
    ZINF_ASSIGN_OR_RETURN(info.world_size, env_int(env, "SLURM_NTASKS", 1));
    ZINF_ASSIGN_OR_RETURN(info.rank, env_int(env, "SLURM_PROCID", 0));
    ZINF_ASSIGN_OR_RETURN(info.local_rank, env_int(env, "SLURM_LOCALID", 0));
    ZINF_ASSIGN_OR_RETURN(const int node_id, env_int(env, "SLURM_NODEID", 0));
    info.local_size = info.world_size;
    if (const std::optional<std::string> spec = env("SLURM_STEP_TASKS_PER_NODE")) {
      const std::optional<int> tasks = slurm_tasks_on_node(*spec, node_id);
      if (!tasks) {
        return Status::invalid_argument(
            fmt::format("environment SLURM_STEP_TASKS_PER_NODE: '{}' is not a list like '2(x3),1' covering node {}",
                        *spec, node_id));
      }
      info.local_size = *tasks;
    }
    ZINF_RETURN_IF_ERROR(check_ranks(info, "SLURM_PROCID", "SLURM_LOCALID"));
    return info;
  }
  // PMIx (PRRTE, Open MPI 5) and PMI-1/2 (MPICH's Hydra): the rank always; the size and the local
  // numbers where the launcher exports them. Without a size variable the world is at least rank + 1
  // here, and MPI_Comm_size says the rest once MPI is up.
  const bool pmix = env("PMIX_RANK").has_value();
  if (pmix || env("PMI_RANK")) {
    info.launcher = pmix ? "pmix" : "pmi";
    const std::string_view rank_name = pmix ? "PMIX_RANK" : "PMI_RANK";
    ZINF_ASSIGN_OR_RETURN(info.rank, env_int(env, rank_name, 0));
    ZINF_ASSIGN_OR_RETURN(info.world_size, env_int(env, "PMI_SIZE", info.rank + 1));
    ZINF_ASSIGN_OR_RETURN(info.local_rank, env_int(env, "MPI_LOCALRANKID", 0));
    ZINF_ASSIGN_OR_RETURN(info.local_size, env_int(env, "MPI_LOCALNRANKS", 1));
    ZINF_RETURN_IF_ERROR(check_ranks(info, rank_name, "MPI_LOCALRANKID"));
    return info;
  }
  return info;
}

Result<LaunchInfo> launch_info_from_environment() {
  return launch_info_from([](std::string_view name) -> std::optional<std::string> {
    const std::string key(name);
    const char* value = std::getenv(key.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

int threads_per_rank(unsigned node_cores, int local_size, std::optional<int> requested) {
  if (requested && *requested > 0) return *requested;
  const int ranks = local_size < 1 ? 1 : local_size;
  const int cores = node_cores == 0 ? 1 : static_cast<int>(node_cores);
  return cores / ranks < 1 ? 1 : cores / ranks;
}

}  // namespace zinf::comm
