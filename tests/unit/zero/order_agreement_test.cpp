// Order agreement (train/order_agreement.h): ranks that acquire the parameters in different orders
// stop after the first step with one line, the same on every rank, naming the first acquire where
// they differ — instead of meeting in mismatched collectives until the communicator's timeout.
//
// The ranks are threads of this process (thread_ranks.h). The trainer test forces a different
// order on one rank with a decorator between the trainer and the states that swaps blocks.0 and
// blocks.1 (every parameter of one for its twin of the same shape): the model runs as always, the
// states see the blocks the other way round. The swapped parameters have the same sizes, so the
// first step's collectives still meet (with mixed values) and the check after it is what stops the
// run — the world's timeout is 30 s, and the test asserts the agreed error, not a timeout.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "libengine/spec/scenario.h"
#include "libengine/train/order_agreement.h"
#include "libengine/train/train_session.h"
#include "libengine/train/trainer.h"
#include "tests/catch.h"
#include "tests/unit/zero/forwarding_states.h"
#include "tests/unit/zero/thread_ranks.h"

namespace zinf {
namespace {

using model::ParamId;
using testing::ThreadWorld;
using train::AcquireOrder;

model::ParamTable small_table() {
  model::ParamTable table;
  for (const char* name : {"wte", "blocks.0.w", "blocks.1.w", "head"}) {
    table.add(model::ParamInfo{.name = name, .shape = Shape({4, 4})});
  }
  return table;
}

// Every rank's result of find_order_disagreement with `orders[rank]`.
std::vector<std::string> disagreements(const std::vector<AcquireOrder>& orders) {
  const model::ParamTable table = small_table();
  ThreadWorld world(static_cast<int>(orders.size()), std::chrono::seconds(30));
  std::vector<std::string> found(orders.size());
  const std::vector<Status> statuses = testing::run_ranks(world, [&](int rank) -> Status {
    testing::ThreadCommunicator comm(world, rank);
    ZINF_ASSIGN_OR_RETURN(found[static_cast<std::size_t>(rank)],
                          train::find_order_disagreement(&comm, table, orders[static_cast<std::size_t>(rank)]));
    return Status::ok();
  });
  for (const Status& status : statuses) {
    INFO(status.message());
    REQUIRE(status.is_ok());
  }
  return found;
}

TEST_CASE("order agreement: equal orders agree, and the first difference is named on every rank") {
  const AcquireOrder order{{0, 1, 2, 3}, {3, 2, 1, 0}};
  for (const std::string& found : disagreements({order, order, order})) CHECK(found.empty());
  CHECK(train::find_order_disagreement(nullptr, small_table(), order).value().empty());

  // Rank 2 swaps the blocks in its backward pass: acquire 2 of the backward pass differs.
  const AcquireOrder swapped{{0, 1, 2, 3}, {3, 1, 2, 0}};
  const std::vector<std::string> found = disagreements({order, order, swapped});
  const std::string expected =
      "acquire 2 of the backward pass is blocks.1.w on rank 0 but blocks.0.w on rank 2; every rank must run";
  for (const std::string& line : found) {
    INFO(line);
    CHECK(line == found.front());
    CHECK(line.find(expected) != std::string::npos);
    CHECK(line.find('\n') == std::string::npos);
  }

  // Rank 1 ends its forward pass early: the end of the pass is named.
  const AcquireOrder shorter{{0, 1, 2}, {3, 2, 1, 0}};
  for (const std::string& line : disagreements({order, shorter})) {
    INFO(line);
    CHECK(line.find("acquire 4 of the forward pass is head on rank 0 but the end of the forward pass on rank 1") !=
          std::string::npos);
  }
  // Rank 1 acquires once more at the end of its backward pass: the other ranks' end is named.
  const AcquireOrder longer{{0, 1, 2, 3}, {3, 2, 1, 0, 3}};
  for (const std::string& line : disagreements({order, longer, order})) {
    INFO(line);
    CHECK(line.find("acquire 5 of the backward pass is the end of the backward pass on rank 0 but head on rank 1") !=
          std::string::npos);
  }
  // Equal orders hash equally; a swap changes the hash.
  CHECK(train::acquire_order_hash(order) == train::acquire_order_hash(AcquireOrder{order}));
  CHECK(train::acquire_order_hash(order) != train::acquire_order_hash(swapped));
}

// Passes every call to `inner`, the parameters of blocks.0 and blocks.1 swapped when `swap`.
class SwappedBlocksStates final : public testing::ForwardingStates {
 public:
  SwappedBlocksStates(zero::ModelStates& inner, bool swap) : ForwardingStates(inner), map_(inner.table().size()) {
    const model::ParamTable& table = inner.table();
    for (ParamId id = 0; id < table.size(); ++id) map_[static_cast<std::size_t>(id)] = id;
    if (!swap) return;
    for (ParamId id = 0; id < table.size(); ++id) {
      const std::string& name = table[id].name;
      if (name.rfind("blocks.0.", 0) != 0) continue;
      for (ParamId twin = 0; twin < table.size(); ++twin) {
        if (table[twin].name == "blocks.1." + name.substr(9)) {
          map_[static_cast<std::size_t>(id)] = twin;
          map_[static_cast<std::size_t>(twin)] = id;
        }
      }
    }
  }
  ParamId map(ParamId id) const { return map_[static_cast<std::size_t>(id)]; }

  Result<Tensor> acquire(ParamId id) override { return inner().acquire(map(id)); }
  void release(ParamId id) override { inner().release(map(id)); }
  Result<Tensor> grad_buffer(ParamId id) override { return inner().grad_buffer(map(id)); }
  Status commit(ParamId id) override { return inner().commit(map(id)); }
  // ModelStates' default, as this decorator had before the forwarding base: the swapped ranks'
  // collectives differ too, and this test is about the acquire-order check alone.
  zero::CollectiveOrder* collective_order() override { return nullptr; }

 private:
  std::vector<ParamId> map_;
};

spec::Scenario scenario(int stage) {
  nlohmann::json document{
      {"name", "order-agreement"},
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
  Result<spec::Scenario> parsed = spec::parse_scenario(document, "order-agreement.json", {});
  INFO(parsed.status().message());
  REQUIRE(parsed.is_ok());
  return parsed.value();
}

struct RankRun {
  Status status;
  bool agreed = false;
  std::int64_t steps_run = 0;
  std::vector<ParamId> forward;  // the states' recorded forward order
  std::vector<ParamId> swap_map;
  std::vector<std::string> names;  // the table's, by id
};

// Two ranks train `scenario`; rank 1's states see blocks.0 and blocks.1 swapped when `swap`.
std::vector<RankRun> train_two_ranks(const spec::Scenario& scenario, bool swap) {
  ThreadWorld world(2, std::chrono::seconds(30));
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
    SwappedBlocksStates states(session->states(), swap && rank == 1);
    for (ParamId id = 0; id < states.table().size(); ++id) {
      run.swap_map.push_back(states.map(id));
      run.names.push_back(states.table()[id].name);
    }
    train::TrainerOptions options;
    options.steps = scenario.steps;
    options.comm = &session->comm();
    train::Trainer trainer(session->model(), states, session->optimizer(), session->schedule(), session->scaler(),
                           session->data(), options);
    struct Quiet final : train::StepObserver {
      void on_step(const train::StepMetrics&) override {}
    } quiet;
    Result<train::TrainOutcome> outcome = trainer.run(quiet);
    run.forward = states.acquire_order(model::Phase::kForward);
    if (!outcome.is_ok()) {
      run.agreed = trainer.failure_agreed();
      return outcome.status();
    }
    run.steps_run = outcome.value().steps_run;
    return Status::ok();
  });
  for (std::size_t rank = 0; rank < runs.size(); ++rank) runs[rank].status = statuses[rank];
  return runs;
}

TEST_CASE("order agreement at 2 ranks: one rank acquiring in another order stops both with one agreed line") {
  for (const int stage : {3, 2}) {
    INFO("stage " << stage);
    const spec::Scenario run = scenario(stage);
    // The control: the decorator in place, the same order on both ranks — the run trains.
    for (const RankRun& same : train_two_ranks(run, false)) {
      INFO(same.status.message());
      REQUIRE(same.status.is_ok());
      CHECK(same.steps_run == 2);
    }

    const std::vector<RankRun> runs = train_two_ranks(run, true);
    // The reference: rank 0's recorded forward order; rank 1 acquired the swapped twin of each entry.
    const RankRun& lead = runs.front();
    std::string expected;
    for (std::size_t i = 0; i < lead.forward.size(); ++i) {
      const ParamId mine = lead.forward[i];
      const ParamId theirs = runs[1].swap_map[static_cast<std::size_t>(mine)];
      if (theirs == mine) continue;
      expected = fmt::format("acquire {} of the forward pass is {} on rank 0 but {} on rank 1", i + 1,
                             lead.names[static_cast<std::size_t>(mine)], lead.names[static_cast<std::size_t>(theirs)]);
      break;
    }
    REQUIRE_FALSE(expected.empty());
    for (std::size_t rank = 0; rank < runs.size(); ++rank) {
      const std::string& message = runs[rank].status.message();
      INFO("rank " << rank << ": " << message);
      REQUIRE_FALSE(runs[rank].status.is_ok());
      CHECK(runs[rank].agreed);
      CHECK(message == lead.status.message());
      CHECK(message.find(expected) != std::string::npos);
      CHECK(message.find("blocks.0.") != std::string::npos);
      CHECK(message.find("blocks.1.") != std::string::npos);
      CHECK(message.find("on rank 1") != std::string::npos);
      CHECK(message.find("waited more than") == std::string::npos);  // not the world's timeout
      CHECK(message.find('\n') == std::string::npos);
    }
  }
}

}  // namespace
}  // namespace zinf
