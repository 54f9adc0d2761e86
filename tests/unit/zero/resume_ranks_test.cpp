// Resume at 2 ranks, over and over: for every ZeRO stage and every placement the stage allows
// (optimizer states on the device, in CPU memory or on NVMe; at stage 3 the parameters too), a
// checkpoint set written at step 2 is resumed 20 times and each resumed run must give the
// uninterrupted run's losses bit for bit — the first step after the load shows the parameters, the
// second the optimizer states (master weights and Adam moments) the load put back.
//
// The ranks are threads of this process (thread_ranks.h), each with its own CPU device whose
// transfer and collective streams run on their own threads, as at several MPI ranks, all bound to
// one core: work left to a stream's thread then runs late, behind the other threads. A load that
// lets a host-to-device copy read a buffer it is already refilling (issue 24: stage 1 with the
// optimizer on NVMe resumed from wrong parameters in 5 of 12 runs) shows up as a differing loss
// here, and ThreadSanitizer (the tsan preset) sees the threads. Many sub-groups (a small
// zero.sub_group_size, parameters split over several) so the NVMe load reuses its host buffer many
// times; fp32, where the load publishes the master weights without rounding them first.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "libengine/spec/scenario.h"
#include "libengine/train/train_session.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"
#include "tests/unit/zero/thread_ranks.h"

namespace zinf {
namespace {

using nlohmann::json;
using zinf::testing::TempDir;
using zinf::testing::ThreadWorld;

constexpr int kRanks = 2;
constexpr int kResumes = 20;
constexpr std::int64_t kCheckpointStep = 2;
constexpr std::int64_t kSteps = 4;  // two steps after the resume: parameters, then optimizer states

class LossRecorder final : public train::StepObserver {
 public:
  void on_step(const train::StepMetrics& metrics) override { losses.push_back(metrics.loss); }
  std::vector<double> losses;
};

json scenario(int stage, const std::string& params, const std::string& optimizer, const std::string& nvme_dir) {
  json zero{{"stage", stage},
            {"params", params},
            {"optimizer", optimizer},
            // Biases and norms stay resident at stage 3; the rest is gathered per use.
            {"persistence_threshold", 100},
            // Sub-groups of at most 1000 elements: many of them, and the larger parameters split.
            {"sub_group_size", 1000},
            {"host_memory", "256MiB"}};
  if (params == "nvme" || optimizer == "nvme") zero["nvme_paths"] = json::array({nvme_dir});
  // Stage 3 gathers parameters at 2 ranks, from the device tier too, where the engine derives no
  // live budget.
  if (stage == 3) zero["max_live_bytes"] = "1MiB";
  return json{
      {"name", "resume-ranks"},
      {"model", {{"layers", 2}, {"hidden", 64}, {"heads", 2}, {"vocab", 96}, {"max_positions", 16}}},
      {"data", {{"source", "markov"}, {"successors", 4}}},
      {"batch", 4},
      {"seq", 16},
      {"steps", kSteps},
      {"precision", "fp32"},
      {"optimizer", {{"lr", 1e-2}, {"grad_clip", 0.5}, {"schedule", {{"kind", "cosine"}, {"warmup_steps", 1}}}}},
      {"seed", 5},
      {"threads", 1},
      {"device", "cpu"},
      {"device_memory", "64MiB"},
      {"zero", std::move(zero)}};
}

spec::Scenario parse(const json& document) {
  Result<spec::Scenario> scenario = spec::parse_scenario(document, "resume-ranks.json", {});
  INFO(scenario.status().message());
  REQUIRE(scenario.is_ok());
  return scenario.value();
}

struct RankRun {
  std::vector<double> losses;
  std::int64_t first_step = -1;
};

// One run of `scenario` at kRanks ranks (threads); rank 0's losses. Fails the test with every
// rank's error when a rank fails, and when the ranks saw different losses.
RankRun train_ranks(const spec::Scenario& scenario, bool resume, std::int64_t stop_after = 0) {
  ThreadWorld world(kRanks);
  std::vector<RankRun> runs(kRanks);
  const std::vector<Status> outcomes = testing::run_ranks(
      world,
      [&](int rank) -> Status {
        train::TrainSessionOptions options;
        options.resume = resume;
        options.stop_after = stop_after;
        options.make_comm = [&world, rank](device::Device&) -> Result<std::unique_ptr<comm::Communicator>> {
          return std::unique_ptr<comm::Communicator>(std::make_unique<testing::ThreadCommunicator>(world, rank));
        };
        options.local_size = kRanks;
        options.copy_threads = true;
        ZINF_ASSIGN_OR_RETURN(std::unique_ptr<train::TrainSession> session,
                              train::TrainSession::create(scenario, std::move(options)));
        LossRecorder recorder;
        ZINF_ASSIGN_OR_RETURN(const train::TrainOutcome outcome, session->trainer().run(recorder));
        runs[static_cast<std::size_t>(rank)] = {recorder.losses, outcome.first_step};
        return Status::ok();
      },
      /*one_core=*/true);
  for (int rank = 0; rank < kRanks; ++rank) {
    INFO("rank " << rank << ": " << outcomes[static_cast<std::size_t>(rank)].message());
    REQUIRE(outcomes[static_cast<std::size_t>(rank)].is_ok());
  }
  for (int rank = 1; rank < kRanks; ++rank) {
    REQUIRE(std::memcmp(runs[0].losses.data(), runs[static_cast<std::size_t>(rank)].losses.data(),
                        runs[0].losses.size() * sizeof(double)) == 0);
  }
  return runs[0];
}

// The stage's placements, resumed kResumes times each from one checkpoint set.
void resume_every_placement(int stage, const std::vector<std::pair<std::string, std::string>>& placements) {
  for (const auto& [params, optimizer] : placements) {
    const TempDir nvme;
    const TempDir checkpoints;
    const json base = scenario(stage, params, optimizer, nvme.path());
    const std::vector<double> uninterrupted = train_ranks(parse(base), false).losses;
    REQUIRE(uninterrupted.size() == static_cast<std::size_t>(kSteps));

    json checkpointed = base;
    checkpointed["checkpoint"] = {{"dir", checkpoints.path()}, {"every", kCheckpointStep}, {"keep_last", 1}};
    REQUIRE(train_ranks(parse(checkpointed), false, kCheckpointStep).losses.size() ==
            static_cast<std::size_t>(kCheckpointStep));

    std::vector<std::string> differing;
    for (int resume = 0; resume < kResumes; ++resume) {
      // Each resumed run writes its own last checkpoint: it starts from a copy of the step-2 set.
      const TempDir copy;
      std::filesystem::copy(checkpoints.path(), copy.path(), std::filesystem::copy_options::recursive);
      json resumed = checkpointed;
      resumed["checkpoint"]["dir"] = copy.path();
      const RankRun run = train_ranks(parse(resumed), true);
      REQUIRE(run.first_step == kCheckpointStep);
      REQUIRE(run.losses.size() == static_cast<std::size_t>(kSteps - kCheckpointStep));
      for (std::size_t i = 0; i < run.losses.size(); ++i) {
        const double expected = uninterrupted[static_cast<std::size_t>(kCheckpointStep) + i];
        if (std::memcmp(&run.losses[i], &expected, sizeof(double)) != 0) {
          differing.push_back(fmt::format("resume {} step {}: loss {:.17g}, uninterrupted {:.17g}", resume,
                                          kCheckpointStep + static_cast<std::int64_t>(i), run.losses[i], expected));
        }
      }
    }
    INFO(fmt::format("stage {}, params on {}, optimizer on {}: {} differing losses in {} resumes:\n{}", stage, params,
                     optimizer, differing.size(), kResumes, fmt::join(differing, "\n")));
    CHECK(differing.empty());
  }
}

TEST_CASE("resume at 2 ranks: stage 1 with the optimizer on device or cpu or nvme, 20 resumes bit for bit") {
  resume_every_placement(1, {{"device", "device"}, {"device", "cpu"}, {"device", "nvme"}});
}

TEST_CASE("resume at 2 ranks: stage 2 with the optimizer on device or cpu or nvme, 20 resumes bit for bit") {
  resume_every_placement(2, {{"device", "device"}, {"device", "cpu"}, {"device", "nvme"}});
}

TEST_CASE("resume at 2 ranks: stage 3 with every placement of params and optimizer, 20 resumes bit for bit") {
  resume_every_placement(3, {{"device", "device"},
                             {"device", "cpu"},
                             {"cpu", "cpu"},
                             {"nvme", "cpu"},
                             {"device", "nvme"},
                             {"cpu", "nvme"},
                             {"nvme", "nvme"}});
}

}  // namespace
}  // namespace zinf
