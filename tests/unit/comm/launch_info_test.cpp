// LaunchInfo: each launcher's environment variables into rank, world and node numbers, malformed
// values as one InvalidArgument naming the variable, and the per-rank thread split.
#include "libengine/comm/launch_info.h"

#include <string>
#include <utility>
#include <vector>

#include "tests/catch.h"

namespace zinf::comm {
namespace {

using Vars = std::vector<std::pair<std::string_view, std::string_view>>;

// The last entry for a name wins, so a test can override one variable of a set by appending.
EnvLookup env_of(Vars vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    std::optional<std::string> found;
    for (const auto& [key, value] : vars) {
      if (key == name) found = std::string(value);
    }
    return found;
  };
}

TEST_CASE("launch info: started directly is one rank") {
  Result<LaunchInfo> info = launch_info_from(env_of({}));
  REQUIRE(info.is_ok());
  CHECK_FALSE(info->under_launcher());
  CHECK(info->rank == 0);
  CHECK(info->world_size == 1);
  CHECK(info->local_size == 1);
}

TEST_CASE("launch info: Open MPI's mpirun") {
  Result<LaunchInfo> info = launch_info_from(env_of({{"OMPI_COMM_WORLD_SIZE", "8"},
                                                     {"OMPI_COMM_WORLD_RANK", "5"},
                                                     {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}));
  REQUIRE(info.is_ok());
  CHECK(info->launcher == "mpirun");
  CHECK(info->rank == 5);
  CHECK(info->world_size == 8);
  CHECK(info->local_rank == 1);
  CHECK(info->local_size == 4);
}

TEST_CASE("launch info: Slurm's srun inside a step, and not in the batch shell") {
  const Vars step = {{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "7"},  {"SLURM_LOCALID", "0"},
                     {"SLURM_NODEID", "3"}, {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}};
  Result<LaunchInfo> info = launch_info_from(env_of(step));
  REQUIRE(info.is_ok());
  CHECK(info->launcher == "srun");
  CHECK(info->rank == 6);
  CHECK(info->world_size == 7);
  CHECK(info->local_rank == 0);
  CHECK(info->local_size == 1);  // node 3 is the fourth node: "1"
  Vars node1 = step;
  node1.insert(node1.end(), {{"SLURM_NODEID", "1"}, {"SLURM_PROCID", "3"}, {"SLURM_LOCALID", "1"}});
  REQUIRE(launch_info_from(env_of(node1)).is_ok());
  CHECK(launch_info_from(env_of(node1))->local_size == 2);

  // The batch script's shell has SLURM_PROCID but no step: one process, not rank 0 of 7.
  Result<LaunchInfo> batch = launch_info_from(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "7"}}));
  REQUIRE(batch.is_ok());
  CHECK_FALSE(batch->under_launcher());
}

TEST_CASE("launch info: PMI launchers") {
  Result<LaunchInfo> hydra = launch_info_from(
      env_of({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "2"}}));
  REQUIRE(hydra.is_ok());
  CHECK(hydra->launcher == "pmi");
  CHECK(hydra->rank == 2);
  CHECK(hydra->world_size == 4);
  CHECK(hydra->local_size == 2);
  Result<LaunchInfo> pmix = launch_info_from(env_of({{"PMIX_RANK", "3"}}));
  REQUIRE(pmix.is_ok());
  CHECK(pmix->launcher == "pmix");
  CHECK(pmix->world_size == 4);  // at least rank + 1 until MPI says
}

TEST_CASE("launch info: malformed values name the variable") {
  Result<LaunchInfo> bad = launch_info_from(env_of({{"OMPI_COMM_WORLD_SIZE", "four"}}));
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == ErrorCode::kInvalidArgument);
  CHECK(bad.status().message() ==
        "environment OMPI_COMM_WORLD_SIZE: 'four' is not a non-negative integer below 16777216");
  Result<LaunchInfo> past = launch_info_from(env_of({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "2"}}));
  REQUIRE_FALSE(past.is_ok());
  CHECK(past.status().message() == "environment OMPI_COMM_WORLD_RANK: 2 is not below the world size 2");
  Result<LaunchInfo> slurm = launch_info_from(env_of(
      {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_TASKS_PER_NODE", "2(x"}}));
  REQUIRE_FALSE(slurm.is_ok());
  CHECK(slurm.status().message().find("SLURM_STEP_TASKS_PER_NODE") != std::string::npos);
}

TEST_CASE("launch info: threads per rank split the node's cores") {
  CHECK(threads_per_rank(16, 4, std::nullopt) == 4);
  CHECK(threads_per_rank(2, 4, std::nullopt) == 1);  // never zero
  CHECK(threads_per_rank(16, 3, std::nullopt) == 5);
  CHECK(threads_per_rank(16, 4, 7) == 7);
  CHECK(threads_per_rank(16, 1, std::nullopt) == 16);
}

}  // namespace
}  // namespace zinf::comm
