// Activation checkpoints in host memory (scenario "zero": {"activations": "cpu"}), end to end
// through TrainSession and Trainer: 20 steps give bit for bit the losses of the run that keeps
// them on the device — fp32 and bf16, ZeRO-0 and stage 3 with cpu offload — and each step copies
// exactly the checkpoints the ring cannot hold, once each way. A device budget that the in-device
// checkpoints overflow is refused before step 1 naming scenario.device_memory, and the same
// budget trains with them in host memory; the host tier counts them; bad values are one line.
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/spec/scenario.h"
#include "libengine/train/train_session.h"
#include "tests/catch.h"

namespace zinf {
namespace {

using nlohmann::json;

constexpr std::int64_t kLayers = 5, kHidden = 64, kBatch = 2, kSeq = 16;

class Recorder final : public train::StepObserver {
 public:
  void on_step(const train::StepMetrics& metrics) override {
    losses.push_back(metrics.loss);
    checkpoints.push_back(metrics.checkpoints);
  }
  std::vector<double> losses;
  std::vector<model::CheckpointTraffic> checkpoints;
};

json scenario(const std::string& precision, const json& zero) {
  json out{{"name", "offload"},
           {"model", {{"layers", kLayers}, {"hidden", kHidden}, {"heads", 2}, {"vocab", 96}, {"max_positions", 16}}},
           {"data", {{"source", "markov"}, {"successors", 4}}},
           {"batch", kBatch},
           {"seq", kSeq},
           {"steps", 20},
           {"precision", precision},
           {"optimizer", {{"lr", 3e-3}, {"grad_clip", 0.5}, {"schedule", {{"kind", "cosine"}, {"warmup_steps", 3}}}}},
           {"seed", 5},
           {"threads", 1},
           {"activation_checkpointing", true}};
  if (!zero.is_null()) out["zero"] = zero;
  return out;
}

Result<spec::Scenario> parse(const json& document) { return spec::parse_scenario(document, "offload.json", {}); }

Recorder train(const json& document) {
  Result<spec::Scenario> parsed = parse(document);
  INFO(parsed.status().message());
  REQUIRE(parsed.is_ok());
  auto session = train::TrainSession::create(parsed.value());
  INFO(session.status().message());
  REQUIRE(session.is_ok());
  Recorder recorder;
  auto outcome = session.value()->trainer().run(recorder);
  INFO(outcome.status().message());
  REQUIRE(outcome.is_ok());
  return recorder;
}

json with_activations(json zero, const char* where) {
  zero["activations"] = where;
  return zero;
}

TEST_CASE("checkpoint offload: losses bit for bit like in-device checkpoints, stage 0 and stage 3 cpu") {
  const json stage0{{"stage", 0}};
  const json stage3{{"stage", 3}, {"params", "cpu"}, {"optimizer", "cpu"}, {"persistence_threshold", 100}};
  for (const std::string precision : {"fp32", "bf16"}) {
    for (const json& zero : {stage0, stage3}) {
      INFO(precision << ", zero " << zero.dump());
      const Recorder device = train(scenario(precision, with_activations(zero, "device")));
      const Recorder host = train(scenario(precision, with_activations(zero, "cpu")));
      REQUIRE(device.losses.size() == 20);
      REQUIRE(host.losses.size() == 20);
      CHECK(device.losses.back() < device.losses.front());
      // Hand count: 6 checkpoints (5 block inputs + the final LayerNorm's input) in a ring of 3
      // slots; checkpoints 0, 1 and 2 are overwritten, so they go out and come back once per step.
      // bf16 computes in fp32 on the CPU backend, so the checkpoints are 4-byte values either way.
      const std::uint64_t expected = 3 * kBatch * kSeq * kHidden * 4;
      for (std::size_t step = 0; step < 20; ++step) {
        INFO("step " << step);
        CHECK(std::memcmp(&device.losses[step], &host.losses[step], sizeof(double)) == 0);
        CHECK(device.checkpoints[step].to_host_bytes == 0);
        CHECK(device.checkpoints[step].to_device_bytes == 0);
        CHECK(host.checkpoints[step].to_host_bytes == expected);
        CHECK(host.checkpoints[step].to_device_bytes == expected);
      }
    }
  }
}

TEST_CASE("checkpoint offload: a budget the in-device checkpoints overflow is refused before step 1, cpu fits") {
  const json zero{{"stage", 0}};
  // Measure the device bytes of the offloaded run, then give exactly that as the budget.
  std::uint64_t offloaded_bytes = 0, host_bytes = 0;
  {
    auto parsed = parse(scenario("fp32", with_activations(zero, "cpu")));
    REQUIRE(parsed.is_ok());
    auto session = train::TrainSession::create(parsed.value());
    REQUIRE(session.is_ok());
    offloaded_bytes = session.value()->device().memory().usage().peak_bytes;
    host_bytes = session.value()->model().checkpoints().host_bytes();
    CHECK(session.value()->model().checkpoints().host_checkpoints() == 3);
    CHECK(session.value()->device().host_memory().usage().current_bytes >= host_bytes);
  }
  // Three 64-byte aligned [B,T,C] fp32 checkpoints.
  CHECK(host_bytes == 3 * kBatch * kSeq * kHidden * 4);
  json in_device = scenario("fp32", with_activations(zero, "device"));
  in_device["device_memory"] = offloaded_bytes;
  in_device["steps"] = 5;
  auto parsed = parse(in_device);
  REQUIRE(parsed.is_ok());
  auto refused = train::TrainSession::create(parsed.value());
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(refused.status().message(), Catch::StartsWith("scenario.device_memory: "));
  CHECK_THAT(refused.status().message(), Catch::Contains("zero.activations \"cpu\""));

  json offloaded = in_device;
  offloaded["zero"] = with_activations(zero, "cpu");
  const Recorder fits = train(offloaded);
  CHECK(fits.losses.size() == 5);

  // The host tier's budget counts the checkpoints.
  offloaded["zero"]["host_memory"] = host_bytes - 1;
  auto host_parsed = parse(offloaded);
  REQUIRE(host_parsed.is_ok());
  auto host_refused = train::TrainSession::create(host_parsed.value());
  REQUIRE_FALSE(host_refused.is_ok());
  CHECK_THAT(host_refused.status().message(), Catch::StartsWith("scenario.zero.host_memory: "));
}

TEST_CASE("checkpoint offload: zero.activations errors are one line naming the field") {
  json bad = scenario("fp32", json{{"stage", 0}, {"activations", "nvme"}});
  auto nvme = parse(bad);
  REQUIRE_FALSE(nvme.is_ok());
  CHECK(nvme.status().message() ==
        "scenario.zero.activations: expected \"device\" or \"cpu\" (where activation checkpoints live), found "
        "\"nvme\" (string)");
  json off = scenario("fp32", json{{"stage", 0}, {"activations", "cpu"}});
  off["activation_checkpointing"] = false;
  auto no_checkpointing = parse(off);
  REQUIRE_FALSE(no_checkpointing.is_ok());
  CHECK_THAT(no_checkpointing.status().message(),
             Catch::StartsWith("scenario.zero.activations: \"cpu\" needs activation_checkpointing true"));
  // Round trip keeps the field.
  auto good = parse(scenario("fp32", json{{"stage", 0}, {"activations", "cpu"}}));
  REQUIRE(good.is_ok());
  CHECK(good.value().zero.activations == spec::Tier::kCpu);
  auto again = parse(spec::to_json(good.value()));
  REQUIRE(again.is_ok());
  CHECK(again.value() == good.value());
}

}  // namespace
}  // namespace zinf
