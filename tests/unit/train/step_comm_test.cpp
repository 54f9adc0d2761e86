// A training step's communication figures (StepMetrics.engine.comm_*): at one rank nothing is
// communicated, so every step reports zero calls, zero busy and zero waited time — for ZeRO-0 and
// for the partitioned stages. (Their growth under an injected delay is tested where the timing
// lives, tests/unit/comm/timed_communicator_test.cpp; the figures at several ranks by
// tests/cli/data_parallel_test.py.)
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/spec/scenario.h"
#include "libengine/train/train_session.h"
#include "tests/catch.h"

namespace zinf::train {
namespace {

class Keep final : public StepObserver {
 public:
  void on_step(const StepMetrics& metrics) override { steps.push_back(metrics); }
  std::vector<StepMetrics> steps;
};

TEST_CASE("one rank: every step reports no communication", "[train][comm]") {
  for (const int stage : {0, 3}) {
    CAPTURE(stage);
    nlohmann::json document = {{"model", {{"layers", 1}, {"hidden", 16}, {"heads", 2}, {"vocab", 64}}},
                               {"batch", 2},
                               {"seq", 8},
                               {"steps", 3},
                               {"threads", 1}};
    if (stage > 0) document["zero"] = {{"stage", stage}};
    const spec::Scenario scenario = spec::parse_scenario(document, "t.json", spec::ShapeResolver{}).value();
    auto session = TrainSession::create(scenario);
    REQUIRE(session.is_ok());
    Keep observer;
    REQUIRE((*session)->trainer().run(observer).is_ok());
    REQUIRE(observer.steps.size() == 3);
    for (const StepMetrics& step : observer.steps) {
      CHECK(step.engine.comm_calls == 0);
      CHECK(step.engine.comm_send_bytes == 0);
      CHECK(step.engine.comm_busy_seconds == 0);
      CHECK(step.engine.comm_wait_seconds == 0);
      CHECK(step.engine.comm_hidden_seconds() == 0);
    }
  }
}

}  // namespace
}  // namespace zinf::train
