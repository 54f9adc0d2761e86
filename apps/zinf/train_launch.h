// `zinf train --ranks N`: the launcher's side of a data-parallel run on this machine. It checks the
// scenario against the world size before any rank exists (one error line, in milliseconds, instead
// of N ranks each failing after MPI started), runs the job (rank_spawner.h: a SIGINT/SIGTERM is
// forwarded and nothing of the job is left running), and when the job was stopped says where a
// rerun of the same command continues.
#pragma once

#include <span>
#include <string>

#include "apps/zinf/subcommand.h"
#include "libengine/core/status.h"
#include "libengine/spec/scenario.h"

namespace zinf::cli {

// Where a rerun of this run continues, as one sentence: "a rerun resumes from checkpoint <path>
// (step N)", or why it starts from step 0 (checkpointing off, resuming off, no checkpoint yet), or
// why that cannot be told (a damaged manifest). `resume`: false under --no-resume. Reads the
// checkpoint directory; never fails.
std::string rerun_note(const spec::Scenario& scenario, bool resume);

// Checks `scenario` (loaded, with the command's overrides applied) against `ranks`, then runs the
// job with `args` (the command without --ranks) and returns its exit status. When this process was
// stopped (SIGINT/SIGTERM) the status is 128 + the signal and one line on io.err says so, what
// became of the ranks and rerun_note(). Errors as check_world_size and run_rank_job.
Result<int> launch_train_ranks(const spec::Scenario& scenario, int ranks, std::span<const std::string> args,
                               bool resume, const Io& io);

}  // namespace zinf::cli
