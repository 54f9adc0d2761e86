// Resume agreement at 1, 2, 3 and 4 ranks (issue 24): the newest checkpoint set has one damaged,
// foreign, stale or missing shard (the last rank's). Without checkpoint.strict every rank resumes
// from the same older set, and the losses from there equal the uninterrupted run's bit for bit;
// every rank is told why (on_warning, naming the file). Under checkpoint.strict every rank stops
// with the same error naming the file, and says the failure was agreed (Trainer::failure_agreed():
// the CLI then prints it once). Never a rank at another step, never a partial load.
//
// The ranks are threads of this process (thread_ranks.h), so a world of 4 costs no processes; the
// mpirun test (tests/cli/checkpoint_set_test.py) runs the same damage at 2 and 3 real ranks.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "libengine/spec/scenario.h"
#include "libengine/train/checkpoint.h"
#include "libengine/train/checkpoint_set.h"
#include "libengine/train/train_session.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"
#include "tests/unit/train/flip_byte.h"
#include "tests/unit/zero/thread_ranks.h"

namespace zinf {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using zinf::testing::TempDir;
using zinf::testing::ThreadWorld;

constexpr std::int64_t kSteps = 6;
constexpr std::int64_t kNewest = 4;  // sets at 2 and 4; the damaged one is 4's
constexpr std::int64_t kOlder = 2;

json scenario(int seed, const std::string& checkpoint_dir, bool strict) {
  json document{{"name", "resume-agreement"},
                {"model", {{"layers", 2}, {"hidden", 32}, {"heads", 2}, {"vocab", 64}, {"max_positions", 16}}},
                {"data", {{"source", "markov"}, {"successors", 8}}},
                {"batch", 12},  // splits over 1, 2, 3 and 4 ranks
                {"seq", 16},
                {"steps", kSteps},
                {"precision", "fp32"},
                {"optimizer", {{"lr", 3e-3}, {"schedule", {{"kind", "constant"}}}}},
                {"seed", seed},
                {"threads", 1},
                {"device", "cpu"},
                {"device_memory", "64MiB"},
                {"zero",
                 {{"stage", 3},
                  {"params", "cpu"},
                  {"optimizer", "cpu"},
                  {"host_memory", "64MiB"},
                  {"persistence_threshold", 100}}}};
  if (!checkpoint_dir.empty()) {
    document["checkpoint"] = {{"dir", checkpoint_dir}, {"every", 2}, {"keep_last", 3}, {"strict", strict}};
  }
  return document;
}

spec::Scenario parse(const json& document) {
  Result<spec::Scenario> parsed = spec::parse_scenario(document, "resume-agreement.json", {});
  INFO(parsed.status().message());
  REQUIRE(parsed.is_ok());
  return parsed.value();
}

struct RankOutcome {
  Status status;
  std::vector<double> losses;
  std::int64_t first_step = -1;
  bool agreed = false;  // Trainer::failure_agreed() after a failure
  std::vector<std::string> warnings;
};

// One run at `world` ranks (threads); every rank's outcome.
std::vector<RankOutcome> train_at(const spec::Scenario& scenario, int world_size, bool resume,
                                  std::int64_t stop_after) {
  ThreadWorld world(world_size);
  std::vector<RankOutcome> runs(static_cast<std::size_t>(world_size));
  const std::vector<Status> statuses = testing::run_ranks(world, [&](int rank) -> Status {
    RankOutcome& run = runs[static_cast<std::size_t>(rank)];
    train::TrainSessionOptions options;
    options.resume = resume;
    options.stop_after = stop_after;
    options.on_warning = [&run](const std::string& line) { run.warnings.push_back(line); };
    options.local_size = world_size;
    if (world_size > 1) {
      options.make_comm = [&world, rank](device::Device&) -> Result<std::unique_ptr<comm::Communicator>> {
        return std::unique_ptr<comm::Communicator>(std::make_unique<testing::ThreadCommunicator>(world, rank));
      };
      options.copy_threads = true;
    }
    ZINF_ASSIGN_OR_RETURN(std::unique_ptr<train::TrainSession> session,
                          train::TrainSession::create(scenario, std::move(options)));
    struct Recorder final : train::StepObserver {
      explicit Recorder(std::vector<double>& into) : losses(into) {}
      void on_step(const train::StepMetrics& metrics) override { losses.push_back(metrics.loss); }
      std::vector<double>& losses;
    } recorder(run.losses);
    Result<train::TrainOutcome> outcome = session->trainer().run(recorder);
    if (!outcome.is_ok()) {
      run.agreed = session->trainer().failure_agreed();
      return outcome.status();
    }
    run.first_step = outcome.value().first_step;
    return Status::ok();
  });
  for (std::size_t rank = 0; rank < runs.size(); ++rank) runs[rank].status = statuses[rank];
  return runs;
}

std::vector<double> losses_of_whole_run(const std::vector<RankOutcome>& runs) {
  for (const RankOutcome& run : runs) {
    INFO(run.status.message());
    REQUIRE(run.status.is_ok());
  }
  return runs.front().losses;
}

// The file of the newest set the last rank reads (at one rank, the plain checkpoint file).
fs::path newest_file(const fs::path& dir, int world_size, std::int64_t step = kNewest) {
  return world_size > 1 ? dir / train::shard_file_name(step, world_size - 1, world_size)
                        : train::checkpoint_path(dir, step);
}

void damage(const std::string& kind, const fs::path& dir, const fs::path& foreign_dir, int world_size) {
  const fs::path target = newest_file(dir, world_size);
  if (kind == "truncated") {
    fs::resize_file(target, fs::file_size(target) - 100);
  } else if (kind == "flipped") {
    testing::flip_last_array_byte(target);
  } else if (kind == "foreign") {
    fs::copy_file(newest_file(foreign_dir, world_size), target, fs::copy_options::overwrite_existing);
  } else if (kind == "stale") {
    fs::copy_file(newest_file(dir, world_size, kOlder), target, fs::copy_options::overwrite_existing);
  } else {
    REQUIRE(kind == "missing");
    fs::remove(target);
  }
}

bool names(const std::string& text, const fs::path& file) {
  return text.find(file.filename().string()) != std::string::npos;
}

void check_every_damage(int world_size) {
  const TempDir work;
  const fs::path root(work.path());
  const std::vector<double> uninterrupted =
      losses_of_whole_run(train_at(parse(scenario(7, "", false)), world_size, false, 0));
  REQUIRE(uninterrupted.size() == static_cast<std::size_t>(kSteps));
  const fs::path pristine = root / "pristine";
  const fs::path foreign = root / "foreign";
  losses_of_whole_run(train_at(parse(scenario(7, pristine.string(), false)), world_size, false, kNewest));
  losses_of_whole_run(train_at(parse(scenario(8, foreign.string(), false)), world_size, false, kNewest));

  for (const std::string kind : {"truncated", "flipped", "foreign", "stale", "missing"}) {
    for (const bool strict : {false, true}) {
      INFO(fmt::format("{} file of the newest set at {} rank(s), checkpoint.strict {}", kind, world_size, strict));
      const fs::path dir = root / fmt::format("{}-{}", kind, strict);
      fs::copy(pristine, dir, fs::copy_options::recursive);
      const fs::path bad = newest_file(dir, world_size);
      damage(kind, dir, foreign, world_size);
      const std::vector<RankOutcome> runs = train_at(parse(scenario(7, dir.string(), strict)), world_size, true, 0);
      // At one rank the file is the set: another run's whole checkpoint is never a reason to go
      // further back (an error, strict or not), and a deleted one is no set at all (nothing says
      // it existed: the older set loads, with nothing to warn of).
      const bool absent = kind == "missing" && world_size == 1;
      const bool refused = (strict && !absent) || (kind == "foreign" && world_size == 1);
      if (refused) {
        for (std::size_t rank = 0; rank < runs.size(); ++rank) {
          INFO("rank " << rank << ": " << runs[rank].status.message());
          REQUIRE_FALSE(runs[rank].status.is_ok());
          CHECK(runs[rank].agreed);
          CHECK(runs[rank].status.message() == runs.front().status.message());
          CHECK(runs[rank].losses.empty());
        }
        CHECK((names(runs.front().status.message(), bad) ||
               runs.front().status.message().find("different run") != std::string::npos));
        continue;
      }
      for (std::size_t rank = 0; rank < runs.size(); ++rank) {
        INFO("rank " << rank << ": " << runs[rank].status.message());
        REQUIRE(runs[rank].status.is_ok());
        CHECK(runs[rank].first_step == kOlder);
        REQUIRE(runs[rank].losses.size() == static_cast<std::size_t>(kSteps - kOlder));
        for (std::size_t i = 0; i < runs[rank].losses.size(); ++i) {
          const double expected = uninterrupted[static_cast<std::size_t>(kOlder) + i];
          INFO("step " << kOlder + static_cast<std::int64_t>(i) << ": " << runs[rank].losses[i] << " vs uninterrupted "
                       << expected);
          CHECK(std::memcmp(&runs[rank].losses[i], &expected, sizeof(double)) == 0);
        }
        // Every rank is told why the newest set was passed over, naming the file.
        if (absent) {
          CHECK(runs[rank].warnings.empty());
          continue;
        }
        REQUIRE(runs[rank].warnings.size() == 1);
        CHECK(names(runs[rank].warnings.front(), bad));
      }
    }
  }
}

TEST_CASE("resume agreement at 1 rank: a damaged, foreign, stale or missing newest checkpoint") {
  check_every_damage(1);
}

TEST_CASE("resume agreement at 2 ranks: one rank's shard damaged, foreign, stale or missing") { check_every_damage(2); }

TEST_CASE("resume agreement at 3 ranks: one rank's shard damaged, foreign, stale or missing") { check_every_damage(3); }

TEST_CASE("resume agreement at 4 ranks: one rank's shard damaged, foreign, stale or missing") { check_every_damage(4); }

}  // namespace
}  // namespace zinf
