// The launcher of `zinf train --ranks N` (train_launch.h).
#include "apps/zinf/train_launch.h"

#include <csignal>
#include <optional>
#include <ostream>

#include <fmt/format.h>

#include "apps/zinf/rank_spawner.h"
#include "libengine/train/checkpoint_set.h"
#include "libengine/train/train_session.h"

namespace zinf::cli {

std::string rerun_note(const spec::Scenario& scenario, bool resume) {
  const std::string& dir = scenario.checkpoint.dir;
  if (dir.empty()) return "checkpointing is off (scenario.checkpoint.dir is not set): a rerun starts from step 0";
  if (!resume || !scenario.checkpoint.resume) {
    return fmt::format("resuming is off ({}): a rerun starts from step 0",
                       resume ? "scenario.checkpoint.resume is false" : "--no-resume");
  }
  const Result<std::optional<train::CheckpointSet>> latest = train::latest_checkpoint_set(dir);
  if (!latest.is_ok()) return fmt::format("a rerun cannot resume from {}: {}", dir, latest.status().message());
  if (!latest.value()) return fmt::format("no checkpoint in {} yet: a rerun starts from step 0", dir);
  const train::CheckpointSet& set = *latest.value();
  const std::string path = set.manifest.empty() ? set.shards.front().string() : set.manifest.string();
  return fmt::format("a rerun resumes from checkpoint {} (step {})", path, set.step);
}

Result<int> launch_train_ranks(const spec::Scenario& scenario, int ranks, std::span<const std::string> args,
                               bool resume, const Io& io) {
  ZINF_RETURN_IF_ERROR(train::check_world_size(scenario, ranks));
  ZINF_ASSIGN_OR_RETURN(const RankJobEnd end, run_rank_job(ranks, args));
  if (end.stop_signal == 0) return end.exit_status;
  const char* name = end.stop_signal == SIGINT ? "SIGINT" : "SIGTERM";
  std::string ranks_fate = fmt::format("the {} rank{} stopped", ranks, ranks == 1 ? "" : "s");
  if (end.killed) {
    ranks_fate = fmt::format("the job did not end within {} s and was killed", kStopGraceSeconds);
  } else if (end.leftovers_killed > 0) {
    ranks_fate += fmt::format(" ({} process{} left by mpirun killed)", end.leftovers_killed,
                              end.leftovers_killed == 1 ? "" : "es");
  }
  io.err << fmt::format("zinf train: stopped by {}: {}; {}\n", name, ranks_fate, rerun_note(scenario, resume));
  return end.exit_status;
}

}  // namespace zinf::cli
