// OptimizerWorker: a job runs on the worker's thread (kThread) or on the caller before submit()
// returns (kOnCaller, the CPU backend's placement); either way idle()/wait() order its writes
// before the caller's next reads, and busy_seconds() counts the time jobs ran.
#include "libengine/zero/optimizer_worker.h"

#include <chrono>
#include <thread>

#include "tests/catch.h"

namespace zinf::zero {
namespace {

TEST_CASE("optimizer worker: on its own thread or on the caller, jobs run once, in order, and are timed") {
  for (const auto placement : {OptimizerWorker::Placement::kThread, OptimizerWorker::Placement::kOnCaller}) {
    const bool on_caller = placement == OptimizerWorker::Placement::kOnCaller;
    INFO((on_caller ? "on the caller" : "own thread"));
    OptimizerWorker worker(placement);
    CHECK(worker.idle());
    std::vector<int> order;
    std::thread::id ran_on;
    for (int job = 0; job < 5; ++job) {
      worker.submit([&, job] {
        ran_on = std::this_thread::get_id();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        order.push_back(job);
      });
      if (on_caller) CHECK(worker.idle());  // finished before submit() returned
      worker.wait();
      CHECK(worker.idle());
      CHECK((ran_on == std::this_thread::get_id()) == on_caller);
    }
    CHECK(order == std::vector<int>{0, 1, 2, 3, 4});
    CHECK(worker.busy_seconds() >= 5 * 0.002);
  }
}

}  // namespace
}  // namespace zinf::zero
