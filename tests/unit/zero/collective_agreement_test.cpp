// Collective agreement (train/order_agreement.h, find_collective_disagreement): ranks whose states
// issued different collectives — another kind, another size, or the same one at another
// program-order position (zero/collective_order.h) — stop after the first step with one line, the
// same on every rank, naming the first collective where they part, or the two signatures when the
// collectives were not recorded.
//
// The ranks are threads of this process (thread_ranks.h). The trainer test moves one rank's
// collectives by one scheduler event with a decorator between the trainer and the states: at the
// start of the first backward pass it counts one event more on rank 1 (CollectiveOrder::note_event),
// so every later collective signs at another position while the collectives themselves still meet.
// The world's timeout is 10 s: a hang would end as the world's timeout, which the test tells apart
// from the agreed line.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/spec/scenario.h"
#include "libengine/train/order_agreement.h"
#include "libengine/train/train_session.h"
#include "libengine/train/trainer.h"
#include "libengine/zero/collective_order.h"
#include "tests/catch.h"
#include "tests/unit/zero/forwarding_states.h"
#include "tests/unit/zero/thread_ranks.h"

namespace zinf {
namespace {

using model::ParamId;
using testing::ThreadWorld;
using train::CollectiveTrace;
using Record = zero::CollectiveOrder::Record;

constexpr std::uint64_t kAllGather = 1, kReduceScatter = 2;

// Every rank's result of find_collective_disagreement with `traces[rank]`.
std::vector<std::string> disagreements(const std::vector<CollectiveTrace>& traces) {
  ThreadWorld world(static_cast<int>(traces.size()), std::chrono::seconds(10));
  std::vector<std::string> found(traces.size());
  const std::vector<Status> statuses = testing::run_ranks(world, [&](int rank) -> Status {
    testing::ThreadCommunicator comm(world, rank);
    ZINF_ASSIGN_OR_RETURN(found[static_cast<std::size_t>(rank)],
                          train::find_collective_disagreement(&comm, traces[static_cast<std::size_t>(rank)]));
    return Status::ok();
  });
  for (const Status& status : statuses) {
    INFO(status.message());
    REQUIRE(status.is_ok());
  }
  return found;
}

TEST_CASE("collective agreement: equal signatures agree, and the first differing collective is named on every rank") {
  const std::vector<Record> records{{kAllGather, 4096, 3}, {kReduceScatter, 1024, 9}, {kAllGather, 4096, 12}};
  const CollectiveTrace trace{0x1234abcd5678ef90ull, records};
  for (const std::string& found : disagreements({trace, trace, trace})) CHECK(found.empty());
  CHECK(train::find_collective_disagreement(nullptr, trace).value().empty());

  // Rank 2's second collective comes one event later.
  std::vector<Record> later = records;
  later[1].events = 10;
  const std::vector<std::string> found = disagreements({trace, trace, {0x1111ull, later}});
  for (const std::string& line : found) {
    INFO(line);
    CHECK(line == found.front());
    CHECK(line.find("(checked after the first step): collective 2 of the run is reduce_scatter of 1024 elements "
                    "after 9 scheduler events on rank 0 but reduce_scatter of 1024 elements after 10 scheduler "
                    "events on rank 2; every rank must issue") != std::string::npos);
    CHECK(line.find('\n') == std::string::npos);
  }
  // Rank 1 issues one collective less: the end of its record is named.
  const std::vector<Record> shorter(records.begin(), records.end() - 1);
  for (const std::string& line : disagreements({trace, {0x2222ull, shorter}})) {
    INFO(line);
    CHECK(line.find("collective 3 of the run is all_gather of 4096 elements after 12 scheduler events on rank 0 "
                    "but no collective (its record ends there) on rank 1") != std::string::npos);
  }
  // Not recorded (or equal records): the signatures are named.
  for (const std::string& line : disagreements({{0xaull, {}}, {0xaull, {}}, {0xbull, {}}})) {
    INFO(line);
    CHECK(line.find("collective signature 000000000000000a on rank 0 but 000000000000000b on rank 2") !=
          std::string::npos);
  }
}

// Passes every call to `inner`; with `shift`, counts one scheduler event more at the start of the
// first backward pass.
class ShiftedEventsStates final : public testing::ForwardingStates {
 public:
  ShiftedEventsStates(zero::ModelStates& inner, bool shift) : ForwardingStates(inner), shift_(shift) {}

  void begin_phase(model::Phase phase) override {
    if (shift_ && phase == model::Phase::kBackward) {
      shift_ = false;
      inner().collective_order()->note_event();
    }
    inner().begin_phase(phase);
  }

 private:
  bool shift_;
};

spec::Scenario scenario(int stage) {
  nlohmann::json document{
      {"name", "collective-agreement"},
      {"model", {{"layers", 2}, {"hidden", 32}, {"heads", 2}, {"vocab", 64}, {"max_positions", 16}}},
      {"data", {{"source", "markov"}, {"successors", 8}}},
      {"batch", 4},
      {"seq", 16},
      {"steps", 2},
      {"precision", "fp32"},
      {"optimizer", {{"lr", 3e-3}, {"schedule", {{"kind", "constant"}}}}},
      {"seed", 5},
      {"threads", 1},
      {"device", "cpu"},
      {"device_memory", "64MiB"},
      {"zero", {{"stage", stage}, {"optimizer", "cpu"}, {"host_memory", "64MiB"}, {"persistence_threshold", 100}}}};
  if (stage == 3) document["zero"]["params"] = "cpu";  // gathered from host memory
  Result<spec::Scenario> parsed = spec::parse_scenario(document, "collective-agreement.json", {});
  INFO(parsed.status().message());
  REQUIRE(parsed.is_ok());
  return parsed.value();
}

struct RankRun {
  Status status;
  bool agreed = false;
  std::int64_t steps_run = 0;
  std::size_t records_left = 0;
};

// Two ranks train `scenario`; rank 1's states count one event more when `shift`.
std::vector<RankRun> train_two_ranks(const spec::Scenario& scenario, bool shift) {
  ThreadWorld world(2, std::chrono::seconds(10));
  std::vector<RankRun> runs(2);
  const std::vector<Status> statuses = testing::run_ranks(world, [&](int rank) -> Status {
    RankRun& run = runs[static_cast<std::size_t>(rank)];
    train::TrainSessionOptions session_options;
    session_options.make_comm = [&world, rank](device::Device&) -> Result<std::unique_ptr<comm::Communicator>> {
      return std::unique_ptr<comm::Communicator>(std::make_unique<testing::ThreadCommunicator>(world, rank));
    };
    session_options.local_size = 2;
    session_options.copy_threads = true;
    ZINF_ASSIGN_OR_RETURN(std::unique_ptr<train::TrainSession> session,
                          train::TrainSession::create(scenario, std::move(session_options)));
    if (session->states().collective_order() == nullptr) return Status::internal("the states sign no collectives");
    ShiftedEventsStates states(session->states(), shift && rank == 1);
    train::TrainerOptions options;
    options.steps = scenario.steps;
    options.comm = &session->comm();
    train::Trainer trainer(session->model(), states, session->optimizer(), session->schedule(), session->scaler(),
                           session->data(), options);
    struct Quiet final : train::StepObserver {
      void on_step(const train::StepMetrics&) override {}
    } quiet;
    Result<train::TrainOutcome> outcome = trainer.run(quiet);
    if (!outcome.is_ok()) {
      run.agreed = trainer.failure_agreed();
      return outcome.status();
    }
    run.steps_run = outcome.value().steps_run;
    // Recording ends with the check: nothing is kept for the rest of the run.
    run.records_left = session->states().collective_order()->records().size();
    return Status::ok();
  });
  for (std::size_t rank = 0; rank < runs.size(); ++rank) runs[rank].status = statuses[rank];
  return runs;
}

TEST_CASE("collective agreement at 2 ranks: one rank's collectives a scheduler event later stop both with one line") {
  for (const int stage : {3, 2}) {
    INFO("stage " << stage);
    const spec::Scenario run = scenario(stage);
    // The control: the decorator in place, nothing shifted — the run trains.
    for (const RankRun& same : train_two_ranks(run, false)) {
      INFO(same.status.message());
      REQUIRE(same.status.is_ok());
      CHECK(same.steps_run == 2);
      CHECK(same.records_left == 0);
    }
    const std::vector<RankRun> runs = train_two_ranks(run, true);
    for (std::size_t rank = 0; rank < runs.size(); ++rank) {
      const std::string& message = runs[rank].status.message();
      INFO("rank " << rank << ": " << message);
      REQUIRE_FALSE(runs[rank].status.is_ok());
      CHECK(runs[rank].agreed);
      CHECK(message == runs.front().status.message());
      CHECK(message.find("the ranks issue different collectives (checked after the first step): collective ") !=
            std::string::npos);
      CHECK(message.find(" scheduler events on rank 0 but ") != std::string::npos);
      CHECK(message.find(" scheduler events on rank 1; every rank must issue") != std::string::npos);
      CHECK(message.find("waited more than") == std::string::npos);  // not the world's timeout
      CHECK(message.find('\n') == std::string::npos);
    }
  }
}

}  // namespace
}  // namespace zinf
