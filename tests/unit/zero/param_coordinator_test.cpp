// ParamCoordinator (zero/param_coordinator.h) driven directly, at one rank on the CPU backend with
// the parameters in CPU memory: acquire/release sequences stand in for the model's passes.
// - a changed acquire order is reported once as a trace mismatch, re-recorded, and prefetching goes
//   on with the new order: the next step finds every parameter already on its way (prefetch hits
//   equal acquires), which no step does without a known order;
// - max_live_bytes exactly the two largest gathered parameters works, one byte less is refused
//   naming the field and both parameters; a third parameter held with them is refused naming it;
// - the values handed out are the parameters' own (compared with the host copies).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "libengine/device/cpu_device.h"
#include "libengine/zero/param_coordinator.h"
#include "tests/catch.h"

namespace zinf::zero {
namespace {

using model::ParamId;
using model::Phase;

// Where the test's parameters live (the engine asks its parameter store, state_store.h).
struct Homes final : ParamHomes {
  std::vector<ParamHome> list;
  ParamHome home(ParamId id) const override { return list.at(static_cast<std::size_t>(id)); }
};

// Parameters in CPU memory, values i + 1000·id (so a mixed-up copy shows).
struct Params {
  model::ParamTable table;
  std::vector<std::vector<float>> values;
  Homes homes;  // the host vectors above (their buffers stay put when Params moves)

  explicit Params(const std::vector<std::pair<std::string, Shape>>& specs) {
    for (const auto& [name, shape] : specs) {
      const ParamId id = table.add(model::ParamInfo{.name = name, .shape = shape});
      std::vector<float> v(static_cast<std::size_t>(table[id].numel));
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) + 1000.0f * static_cast<float>(id);
      values.push_back(std::move(v));
    }
    for (auto& v : values) {
      homes.list.push_back(ParamHome{.tier = spec::Tier::kCpu, .data = v.data(), .bytes = v.size() * sizeof(float)});
    }
  }
  std::size_t bytes(ParamId id) const { return values[static_cast<std::size_t>(id)].size() * sizeof(float); }
};

struct Harness {
  Params params;
  std::unique_ptr<device::Device> device = device::make_cpu_device({});
  std::vector<std::string> warnings;
  std::unique_ptr<ParamCoordinator> coordinator;

  Harness(Params p, std::uint64_t max_live_bytes) : params(std::move(p)) {
    ParamCoordinatorOptions options;
    options.max_live_bytes = max_live_bytes;
    options.on_warning = [this](const std::string& line) { warnings.push_back(line); };
    Result<std::unique_ptr<ParamCoordinator>> made =
        ParamCoordinator::create(params.table, *device, params.homes, nullptr, options);
    INFO(made.status().message());
    REQUIRE(made.is_ok());
    coordinator = std::move(made).value();
  }
  ~Harness() { coordinator.reset(); }

  // One acquire, its values checked against the parameter's own.
  void acquire(ParamId id) {
    Result<Tensor> view = coordinator->acquire(id);
    INFO(view.status().message());
    REQUIRE(view.is_ok());
    REQUIRE(device->synchronize().is_ok());
    const std::vector<float>& expected = params.values[static_cast<std::size_t>(id)];
    CHECK(std::memcmp(view.value().data(), expected.data(), expected.size() * sizeof(float)) == 0);
  }
  // acquire(), returning whether the parameter was already on its way (a prefetch hit).
  bool acquire_was_hit(ParamId id) {
    EngineStats before;
    coordinator->add_stats(before);
    acquire(id);
    EngineStats after;
    coordinator->add_stats(after);
    return after.prefetch_hits > before.prefetch_hits;
  }
  void pass(Phase phase, const std::vector<ParamId>& order) {
    coordinator->begin_phase(phase);
    for (const ParamId id : order) {
      acquire(id);
      coordinator->release(id);
    }
  }
  // One step: the forward and backward passes, then what the states do after the optimizer.
  EngineStats step(const std::vector<ParamId>& forward, const std::vector<ParamId>& backward) {
    EngineStats before;
    coordinator->add_stats(before);
    pass(Phase::kForward, forward);
    pass(Phase::kBackward, backward);
    coordinator->invalidate();
    REQUIRE(coordinator->prefetch_next_forward().is_ok());
    EngineStats after;
    coordinator->add_stats(after);
    EngineStats delta;
    delta.acquires = after.acquires - before.acquires;
    delta.prefetch_hits = after.prefetch_hits - before.prefetch_hits;
    delta.trace_mismatches = after.trace_mismatches - before.trace_mismatches;
    return delta;
  }
};

Params four_equal() {
  return Params({{"p0", Shape({16, 16})}, {"p1", Shape({16, 16})}, {"p2", Shape({16, 16})}, {"p3", Shape({16, 16})}});
}

TEST_CASE("param coordinator: a changed acquire order is reported, re-recorded, and prefetched from then on") {
  Harness h(four_equal(), 64 * 1024);  // every parameter fits the near window
  const std::vector<ParamId> forward = {0, 1, 2, 3};
  const std::vector<ParamId> backward = {3, 2, 1, 0};

  // Recording: nothing is known ahead, so nothing is prefetched.
  EngineStats first = h.step(forward, backward);
  CHECK(first.acquires == 8);
  CHECK(first.prefetch_hits == 0);
  CHECK(first.trace_mismatches == 0);
  CHECK(h.coordinator->recorded_order(Phase::kForward) == forward);
  CHECK(h.coordinator->recorded_order(Phase::kBackward) == backward);

  // Following the recorded order: every acquire finds its parameter on the way.
  EngineStats followed = h.step(forward, backward);
  CHECK(followed.acquires == 8);
  CHECK(followed.prefetch_hits == 8);
  CHECK(followed.trace_mismatches == 0);
  CHECK(h.warnings.empty());

  // The forward pass swaps p1 and p2: one mismatch, at position 1, one warning naming both.
  const std::vector<ParamId> changed = {0, 2, 1, 3};
  EngineStats mismatched = h.step(changed, backward);
  CHECK(mismatched.acquires == 8);
  CHECK(mismatched.trace_mismatches == 1);
  REQUIRE(h.warnings.size() == 1);
  INFO(h.warnings.front());
  CHECK(h.warnings.front().find("the forward pass acquired p2 at position 1 where the recorded order has p1") !=
        std::string::npos);
  CHECK(h.coordinator->recorded_order(Phase::kForward) == changed);

  // The new order is followed: no mismatch, and prefetching did not stop — every acquire a hit.
  for (int repeat = 0; repeat < 2; ++repeat) {
    EngineStats after = h.step(changed, backward);
    CHECK(after.acquires == 8);
    CHECK(after.trace_mismatches == 0);
    CHECK(after.prefetch_hits == 8);
  }
  CHECK(h.warnings.size() == 1);

  // A pass cut short (p3 not acquired) is a mismatch too; the shorter order is then followed.
  const std::vector<ParamId> shorter = {0, 2, 1};
  EngineStats cut = h.step(shorter, backward);
  CHECK(cut.trace_mismatches == 1);
  REQUIRE(h.warnings.size() == 2);
  CHECK(h.warnings.back().find("the forward pass ended after 3 of the 4 recorded acquires") != std::string::npos);
  CHECK(h.coordinator->recorded_order(Phase::kForward) == shorter);
  EngineStats resumed = h.step(shorter, backward);
  CHECK(resumed.trace_mismatches == 0);
  CHECK(resumed.acquires == 7);
  CHECK(resumed.prefetch_hits == 7);
}

// Two largest 2 KiB ("big") and 1 KiB ("mid"), then 512 B ("small").
Params three_sizes() { return Params({{"big", Shape({512})}, {"mid", Shape({256})}, {"small", Shape({128})}}); }

TEST_CASE("param coordinator: max_live_bytes at its edge — the two largest fit, one byte less is refused") {
  const std::uint64_t two_largest = 2048 + 1024;
  {
    Params params = three_sizes();
    auto device = device::make_cpu_device({});
    ParamCoordinatorOptions options;
    options.max_live_bytes = two_largest - 1;
    Result<std::unique_ptr<ParamCoordinator>> refused =
        ParamCoordinator::create(params.table, *device, params.homes, nullptr, options);
    REQUIRE_FALSE(refused.is_ok());
    CHECK(refused.status().code() == ErrorCode::kInvalidArgument);
    INFO(refused.status().message());
    CHECK(refused.status().message().find("scenario.zero.max_live_bytes: ") == 0);
    CHECK(refused.status().message().find("cannot hold the two largest gathered parameters at once (big and mid") !=
          std::string::npos);
  }

  Harness h(three_sizes(), two_largest);
  // The two largest held at once, every step, in the budget.
  for (int step = 0; step < 3; ++step) {
    h.coordinator->begin_phase(Phase::kForward);
    h.acquire(0);
    h.acquire(1);
    h.coordinator->release(0);
    h.coordinator->release(1);
    h.acquire(2);
    h.coordinator->release(2);
    h.coordinator->begin_phase(Phase::kBackward);
    h.coordinator->invalidate();
    REQUIRE(h.coordinator->prefetch_next_forward().is_ok());
  }
  CHECK(h.coordinator->live_peak_bytes() <= two_largest);
  CHECK(h.warnings.empty());

  // A third one held with them does not fit: refused naming it and the budget, nothing acquired.
  h.coordinator->begin_phase(Phase::kForward);
  h.acquire(0);
  h.acquire(1);
  Result<Tensor> third = h.coordinator->acquire(2);
  REQUIRE_FALSE(third.is_ok());
  CHECK(third.status().code() == ErrorCode::kOutOfMemory);
  INFO(third.status().message());
  CHECK(third.status().message().find("gathered small") != std::string::npos);
  CHECK(third.status().message().find("raise scenario.zero.max_live_bytes") != std::string::npos);
  h.coordinator->release(0);
  h.coordinator->release(1);
  h.acquire(2);  // with room again, the same acquire works
  h.coordinator->release(2);
  h.coordinator->invalidate();
  CHECK(h.coordinator->live_peak_bytes() <= two_largest);
}

TEST_CASE(
    "param coordinator: prefetch_bytes at its edge — the largest NVMe-resident parameter, one byte less refused") {
  // Only the budgets are checked at creation: no NVMe store is needed to see them.
  Params params = three_sizes();
  auto device = device::make_cpu_device({});
  Homes homes = params.homes;
  homes.list[1].tier = spec::Tier::kNvme;  // "mid", 1 KiB, the largest on NVMe
  homes.list[2].tier = spec::Tier::kNvme;
  ParamCoordinatorOptions options;
  options.max_live_bytes = 2048 + 1024;
  options.prefetch_bytes = 1024;
  Result<std::unique_ptr<ParamCoordinator>> made =
      ParamCoordinator::create(params.table, *device, homes, nullptr, options);
  INFO(made.status().message());
  CHECK(made.is_ok());
  if (made.is_ok()) made.value().reset();
  options.prefetch_bytes = 1023;
  Result<std::unique_ptr<ParamCoordinator>> refused =
      ParamCoordinator::create(params.table, *device, homes, nullptr, options);
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == ErrorCode::kInvalidArgument);
  INFO(refused.status().message());
  CHECK(refused.status().message().find("scenario.zero.prefetch_bytes: ") == 0);
  CHECK(refused.status().message().find("cannot stage the largest NVMe-resident parameter") != std::string::npos);
}

TEST_CASE("param coordinator: persistent parameters are outside the two-largest rule") {
  // "mid" and "small" persistent (at most persistence_threshold elements): the rule is "big" alone.
  Params params = three_sizes();
  auto device = device::make_cpu_device({});
  ParamCoordinatorOptions options;
  options.persistence_threshold = 256;
  options.max_live_bytes = 2048;
  Result<std::unique_ptr<ParamCoordinator>> made =
      ParamCoordinator::create(params.table, *device, params.homes, nullptr, options);
  INFO(made.status().message());
  REQUIRE(made.is_ok());
  CHECK_FALSE(made.value()->persistent(0));
  CHECK(made.value()->persistent(1));
  CHECK(made.value()->persistent(2));
  CHECK(made.value()->persistent_bytes() == 1024 + 512);
  made.value().reset();
  options.max_live_bytes = 2047;
  Result<std::unique_ptr<ParamCoordinator>> refused =
      ParamCoordinator::create(params.table, *device, params.homes, nullptr, options);
  REQUIRE_FALSE(refused.is_ok());
  INFO(refused.status().message());
  CHECK(refused.status().message().find("(big and -") != std::string::npos);
}

TEST_CASE("param coordinator: eviction drops the cached copy whose next use is farthest") {
  // max_live_bytes 3 KiB of 1 KiB parameters A B C D: the near window is 2 KiB (the two largest),
  // a released copy is kept when it is needed again within 3 KiB.
  Harness h(four_equal(), 3 * 1024);
  constexpr ParamId A = 0, B = 1, C = 2, D = 3;
  h.step({A, B, C, D}, {C, B, A});  // recorded

  // The forward pass follows the recorded order up to B, then acquires A again where C was expected.
  // By then B is kept (needed in the backward pass), C and D are on their way (prefetched).
  h.coordinator->begin_phase(Phase::kForward);
  CHECK(h.acquire_was_hit(A));
  h.coordinator->release(A);  // not needed within 3 KiB: dropped
  CHECK(h.acquire_was_hit(B));
  h.coordinator->release(B);
  // A needs room: of B, C and D (all cached, none in use) D is never used again in the known order
  // (the backward pass: C B A), so D goes, C and B stay.
  CHECK_FALSE(h.acquire_was_hit(A));
  h.coordinator->release(A);  // kept: the backward pass needs it within 3 KiB
  CHECK(h.acquire_was_hit(C));
  h.coordinator->release(C);
  CHECK_FALSE(h.acquire_was_hit(D));  // evicted above
  // D needed room: of A, B and C (cached, none in use), A's next use — last in the backward pass —
  // is the farthest, so A went: B and C are still there while D is held.
  CHECK(h.acquire_was_hit(B));
  CHECK(h.acquire_was_hit(C));
  for (const ParamId id : {D, B, C}) h.coordinator->release(id);
  h.pass(Phase::kBackward, {C, B, A});
  h.coordinator->invalidate();
  CHECK(h.coordinator->live_peak_bytes() <= 3 * 1024);
  REQUIRE(h.warnings.size() == 1);  // the changed forward order
}

}  // namespace
}  // namespace zinf::zero
