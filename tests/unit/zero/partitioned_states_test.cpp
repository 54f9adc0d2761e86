// The partitioned, offloaded engine against ZeRO-0, end to end through TrainSession and Trainer on
// a tiny GPT: every placement the engine allows (parameters, gradients and optimizer states on
// device, cpu or nvme), fp32 and bf16, activation checkpointing and tiling on and off, must give
// the same losses bit for bit over 20 steps — at one rank the arithmetic is the same (the same
// kernels on the same values in the same order; Adam is elementwise, the gradient norm is summed
// per parameter in table order). Resume from a checkpoint taken with NVMe-resident states
// continues the curve bit for bit. Budgets too small for the plan are refused before step 1.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "libengine/io/fault_injecting_engine.h"
#include "libengine/spec/scenario.h"
#include "libengine/train/train_session.h"
#include "libengine/zero/partitioned_states.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf {
namespace {

using nlohmann::json;
using zinf::testing::TempDir;

class LossRecorder final : public train::StepObserver {
 public:
  void on_step(const train::StepMetrics& metrics) override {
    losses.push_back(metrics.loss);
    engine.push_back(metrics.engine);
    if (metrics.skipped) ++skipped;
  }
  int skipped = 0;
  std::vector<double> losses;
  std::vector<zero::EngineStats> engine;
};

json tiny_scenario(const std::string& precision, bool checkpointing, int tiling) {
  return json{
      {"name", "tiny"},
      {"model", {{"layers", 2}, {"hidden", 64}, {"heads", 2}, {"vocab", 96}, {"max_positions", 16}}},
      {"data", {{"source", "markov"}, {"successors", 4}}},
      {"batch", 2},
      {"seq", 16},
      {"steps", 20},
      {"precision", precision},
      {"optimizer", {{"lr", 1e-2}, {"grad_clip", 0.5}, {"schedule", {{"kind", "cosine"}, {"warmup_steps", 3}}}}},
      {"seed", 3},
      {"threads", 1},
      {"activation_checkpointing", checkpointing},
      {"tiling", tiling}};
}

spec::Scenario parse(const json& document) {
  Result<spec::Scenario> scenario = spec::parse_scenario(document, "tiny.json", {});
  INFO(scenario.status().message());
  REQUIRE(scenario.is_ok());
  return scenario.value();
}

// The losses of a run; its engine figures per step and its optimizer sub-group count when asked for.
std::vector<double> train_losses(const json& document, std::vector<zero::EngineStats>* engine = nullptr,
                                 std::size_t* sub_groups = nullptr) {
  Result<std::unique_ptr<train::TrainSession>> session = train::TrainSession::create(parse(document));
  INFO(session.status().message());
  REQUIRE(session.is_ok());
  if (sub_groups != nullptr) {
    const auto* states = dynamic_cast<const zero::PartitionedStates*>(&session.value()->states());
    REQUIRE(states != nullptr);
    *sub_groups = states->sub_group_count();
  }
  LossRecorder recorder;
  Result<train::TrainOutcome> outcome = session.value()->trainer().run(recorder);
  INFO(outcome.status().message());
  REQUIRE(outcome.is_ok());
  if (engine != nullptr) *engine = recorder.engine;
  return recorder.losses;
}

struct Placement {
  const char* params;
  const char* optimizer;
};
// Every combination the engine allows (gradients follow the optimizer).
constexpr Placement kPlacements[] = {{"device", "device"}, {"device", "cpu"}, {"cpu", "cpu"},  {"nvme", "cpu"},
                                     {"device", "nvme"},   {"cpu", "nvme"},   {"nvme", "nvme"}};

json with_zero(json document, const Placement& placement, const std::string& nvme_dir, int stage = 3) {
  json zero{{"stage", stage},
            {"params", placement.params},
            {"optimizer", placement.optimizer},
            // Small parameters (biases, norms) stay resident; the rest is gathered per use.
            {"persistence_threshold", 100}};
  if (std::string(placement.params) == "nvme" || std::string(placement.optimizer) == "nvme") {
    zero["nvme_paths"] = json::array({nvme_dir});
  }
  document["zero"] = std::move(zero);
  return document;
}

TEST_CASE("partitioned states: every placement trains bit for bit like ZeRO-0") {
  const TempDir nvme;
  for (const std::string precision : {"fp32", "bf16"}) {
    for (const bool checkpointing : {false, true}) {
      for (const int tiling : {1, 2}) {
        const json base = tiny_scenario(precision, checkpointing, tiling);
        const std::vector<double> reference = train_losses(base);
        REQUIRE(reference.size() == 20);
        CHECK(reference.back() < reference.front());
        for (const Placement& placement : kPlacements) {
          INFO(precision << ", checkpointing " << checkpointing << ", tiling " << tiling << ": params "
                         << placement.params << ", optimizer " << placement.optimizer);
          const std::vector<double> losses = train_losses(with_zero(base, placement, nvme.path()));
          REQUIRE(losses.size() == reference.size());
          for (std::size_t step = 0; step < losses.size(); ++step) {
            INFO("step " << step);
            CHECK(std::memcmp(&losses[step], &reference[step], sizeof(double)) == 0);
          }
        }
      }
    }
  }
}

// The Llama-family options (RMSNorm, SwiGLU, rotary positions, grouped-query attention, explicit
// head_dim, q/k/v biases, untied head) through the same engine: ZeRO-3 with states on NVMe, with
// checkpointing (offloaded) and tiling, bit for bit like ZeRO-0.
TEST_CASE("partitioned states: a Llama-shaped model on NVMe trains bit for bit like ZeRO-0") {
  const TempDir nvme;
  for (const bool checkpointing : {false, true}) {
    for (const int tiling : {1, 2}) {
      json base = tiny_scenario("fp32", checkpointing, tiling);
      base["model"] = json{{"arch", "qwen2"}, {"layers", 2},      {"hidden", 64}, {"heads", 4},         {"kv_heads", 2},
                           {"head_dim", 24},  {"ffn_hidden", 90}, {"vocab", 96},  {"max_positions", 16}};
      const std::vector<double> reference = train_losses(base);
      REQUIRE(reference.size() == 20);
      CHECK(reference.back() < reference.front());
      for (const Placement& placement : {Placement{"nvme", "nvme"}, Placement{"cpu", "nvme"}}) {
        INFO("checkpointing " << checkpointing << ", tiling " << tiling << ": params " << placement.params);
        const std::vector<double> losses = train_losses(with_zero(base, placement, nvme.path()));
        REQUIRE(losses.size() == reference.size());
        for (std::size_t step = 0; step < losses.size(); ++step) {
          INFO("step " << step);
          CHECK(std::memcmp(&losses[step], &reference[step], sizeof(double)) == 0);
        }
      }
    }
  }
}

// zero.sub_group_size 1000 cuts every weight matrix of the tiny model (up to 16384 elements) into
// pieces: their states move, step, publish and are checkpointed piece by piece.
TEST_CASE(
    "partitioned states: the optimizer overlapped with the backward pass gives the same bits, clipped or not, "
    "whole or split into pieces") {
  const TempDir nvme;
  for (const std::string precision : {"fp32", "bf16"}) {
    for (const bool clipping : {true, false}) {
      json base = tiny_scenario(precision, true, 1);
      if (!clipping) base["optimizer"]["grad_clip"] = 0.0;
      const std::vector<double> reference = train_losses(base);
      REQUIRE(reference.size() == 20);
      for (const Placement& placement : kPlacements) {
        if (std::string(placement.optimizer) == "device") continue;  // the overlap is the host optimizer's
        for (const auto& [overlap, sub_group_size] :
             {std::pair{false, 0}, std::pair{true, 0}, std::pair{false, 1000}, std::pair{true, 1000}}) {
          INFO(precision << ", clipping " << clipping << ", overlap " << overlap << ", sub_group_size "
                         << sub_group_size << ": params " << placement.params << ", optimizer " << placement.optimizer);
          json document = with_zero(base, placement, nvme.path());
          document["zero"]["overlap_optimizer"] = overlap;
          if (sub_group_size > 0) document["zero"]["sub_group_size"] = sub_group_size;
          std::vector<zero::EngineStats> engine;
          std::size_t sub_groups = 0;
          const std::vector<double> losses = train_losses(document, &engine, &sub_groups);
          // Split: more sub-groups than the model has parameters (28).
          if (sub_group_size > 0) CHECK(sub_groups > 30);
          REQUIRE(losses.size() == reference.size());
          for (std::size_t step = 0; step < losses.size(); ++step) {
            INFO("step " << step);
            CHECK(std::memcmp(&losses[step], &reference[step], sizeof(double)) == 0);
          }
          // Every element is stepped once per step. Whether a sub-group's gradients reach the host
          // before the backward pass ends is the machine's timing (not asserted); with clipping or
          // without the overlap nothing may be stepped before the norm is known. With the overlap
          // the NVMe reads of optimizer states start with the forward pass, whatever the timing.
          std::uint64_t elements = 0;
          std::uint64_t overlapped = 0;
          std::uint64_t states_read_early = 0;
          for (const zero::EngineStats& e : engine) {
            elements += e.optimizer_elements;
            overlapped += e.optimizer_elements_overlapped;
            states_read_early += e.nvme_read.forward_backward;
          }
          CHECK(elements == 20 * engine.front().optimizer_elements);
          CHECK(engine.front().optimizer_elements > 0);
          CHECK(overlapped <= elements);
          if (!overlap || clipping) CHECK(overlapped == 0);
          if (std::string(placement.optimizer) == "nvme" && std::string(placement.params) != "nvme") {
            CHECK((states_read_early > 0) == overlap);
          }
        }
      }
    }
  }
}

TEST_CASE("partitioned states: fp16 with dynamic loss scaling skips the same steps and matches ZeRO-0") {
  const TempDir nvme;
  json base = tiny_scenario("fp16", false, 1);
  // A scale this large overflows the fp16 gradients at first: skipped steps and back-off included.
  base["loss_scale"] = {{"initial", 1e9}, {"growth_interval", 5}};
  const std::vector<double> reference = train_losses(base);
  {
    // The reference run really skips steps (so the engines' skip paths are compared too).
    auto session = train::TrainSession::create(parse(base));
    REQUIRE(session.is_ok());
    LossRecorder recorder;
    REQUIRE(session.value()->trainer().run(recorder).is_ok());
    CHECK(recorder.skipped > 0);
  }
  for (const Placement& placement :
       {Placement{"cpu", "cpu"}, Placement{"nvme", "nvme"}, Placement{"device", "device"}}) {
    INFO(placement.params << ", " << placement.optimizer);
    const std::vector<double> losses = train_losses(with_zero(base, placement, nvme.path()));
    REQUIRE(losses.size() == reference.size());
    for (std::size_t step = 0; step < losses.size(); ++step) {
      INFO("step " << step);
      CHECK(std::memcmp(&losses[step], &reference[step], sizeof(double)) == 0);
    }
  }
}

TEST_CASE("partitioned states: stages 1 and 2 with an offloaded optimizer equal ZeRO-0") {
  const TempDir nvme;
  const json base = tiny_scenario("bf16", false, 1);
  const std::vector<double> reference = train_losses(base);
  for (const int stage : {1, 2}) {
    const std::vector<double> losses = train_losses(with_zero(base, {"device", "cpu"}, nvme.path(), stage));
    CHECK(losses == reference);
  }
}

TEST_CASE("partitioned states: a tight live budget evicts and still matches, prefetch hits after step 1") {
  const TempDir nvme;
  const json base = tiny_scenario("bf16", true, 1);
  const std::vector<double> reference = train_losses(base);
  json document = with_zero(base, {"nvme", "nvme"}, nvme.path());
  // Just the two largest parameters (the MLP's 256x64 bf16 weights): acquires have to make room.
  document["zero"]["max_live_bytes"] = 2 * 256 * 64 * 2;
  document["zero"]["prefetch_bytes"] = 4 * 256 * 64 * 2;
  std::vector<zero::EngineStats> engine;
  const std::vector<double> losses = train_losses(document, &engine);
  CHECK(losses == reference);
  // Step 1 records the order; from step 2 on every acquire finds its parameter prefetched.
  REQUIRE(engine.size() == 20);
  CHECK(engine[0].trace_mismatches == 0);
  for (std::size_t step = 1; step < engine.size(); ++step) {
    INFO("step " << step);
    CHECK(engine[step].acquires > 0);
    CHECK(engine[step].trace_mismatches == 0);
    CHECK(engine[step].sync_nvme_reads == 0);
    CHECK(engine[step].prefetch_hits == engine[step].acquires);
    CHECK(engine[step].nvme_read.optimizer > 0);
    CHECK(engine[step].nvme_write.optimizer > 0);
    CHECK(engine[step].nvme_read.forward_backward > 0);
  }
}

TEST_CASE("partitioned states: new NVMe parameter values stay in host staging for the next forward pass") {
  // Parameters on NVMe: what the optimizer writes is kept on the host for the parameters the next
  // forward pass needs first (up to zero.prefetch_bytes of them), and not read back — lent where
  // Adam wrote it (a pipeline set not reused later in the step, params_out_, the host master
  // weights) or copied into staging (a set reused by a later sub-group of the step, fp32 values in
  // a set). With an optimizer set per sub-group (host memory to spare) and with fewer sets than
  // sub-groups, so both ways are taken. The bits are ZeRO-0's either way; the bytes not read are
  // exactly the bytes kept.
  const TempDir nvme;
  struct Case {
    const char* precision;
    const char* optimizer;
    std::int64_t sub_group_size;  // 0: the default (one sub-group here); 4096: more sub-groups than the 3 sets
    bool clipping;
  };
  const Case cases[] = {{"bf16", "nvme", 0, true},     {"bf16", "nvme", 0, false},   {"bf16", "nvme", 4096, true},
                        {"bf16", "nvme", 4096, false}, {"fp32", "nvme", 4096, true}, {"bf16", "cpu", 0, true},
                        {"bf16", "cpu", 4096, false},  {"fp32", "cpu", 0, true}};
  for (const Case& c : cases) {
    INFO(c.precision << ", optimizer on " << c.optimizer << ", sub_group_size " << c.sub_group_size << ", grad_clip "
                     << (c.clipping ? "0.5 (the step waits for the norm)" : "off (sub-groups step during backward)"));
    json base = tiny_scenario(c.precision, true, 1);
    if (!c.clipping) base["optimizer"]["grad_clip"] = 0.0;
    const std::vector<double> reference = train_losses(base);
    // The largest offloaded parameter is a 256x64 MLP weight (32 KiB in bf16).
    const std::int64_t element = std::string(c.precision) == "fp32" ? 4 : 2;
    std::vector<std::vector<zero::EngineStats>> engines(2);
    const std::int64_t budgets[] = {2 * 256 * 64 * element, 64 << 20};
    for (int run = 0; run < 2; ++run) {
      json document = with_zero(base, {"nvme", c.optimizer}, nvme.path());
      document["zero"]["prefetch_bytes"] = budgets[run];
      if (c.sub_group_size > 0) document["zero"]["sub_group_size"] = c.sub_group_size;
      std::size_t sub_groups = 0;
      CHECK(train_losses(document, &engines[run], &sub_groups) == reference);
      if (c.sub_group_size > 0) CHECK(sub_groups > 3);
      REQUIRE(engines[run].size() == 20);
    }
    // Step 1 records the forward order, so from the first update on parameters are kept.
    for (std::size_t step = 2; step < 20; ++step) {
      INFO("step " << step);
      const zero::EngineStats& small = engines[0][step];
      const zero::EngineStats& large = engines[1][step];
      CHECK(large.params_kept_on_host_bytes > small.params_kept_on_host_bytes);
      CHECK(small.params_kept_on_host_bytes <= static_cast<std::uint64_t>(budgets[0]));
      const auto read = [](const zero::EngineStats& e) { return e.nvme_read.forward_backward + e.nvme_read.optimizer; };
      CHECK(read(small) - read(large) == large.params_kept_on_host_bytes - small.params_kept_on_host_bytes);
      CHECK(large.nvme_write.forward_backward + large.nvme_write.optimizer ==
            small.nvme_write.forward_backward + small.nvme_write.optimizer);
      CHECK(large.prefetch_hits == large.acquires);
    }
  }
}

TEST_CASE("partitioned states: resume from a checkpoint of NVMe-resident states continues bit for bit") {
  const TempDir nvme;
  const TempDir checkpoints;
  json base = with_zero(tiny_scenario("bf16", false, 1), {"nvme", "nvme"}, nvme.path());
  const std::vector<double> uninterrupted = train_losses(base);

  base["checkpoint"] = {{"dir", checkpoints.path()}, {"every", 7}, {"keep_last", 2}};
  {
    // Saved piece by piece: split parameters.
    json split = base;
    split["zero"]["sub_group_size"] = 1000;
    auto session = train::TrainSession::create(parse(split), {.resume = true, .stop_after = 7});
    REQUIRE(session.is_ok());
    LossRecorder first;
    REQUIRE(session.value()->trainer().run(first).is_ok());
    REQUIRE(first.losses.size() == 7);
  }
  // The rest of the run, resumed under another placement: checkpoints are placement-free. With a
  // small zero.sub_group_size the parameters' states are read piece by piece (and were written
  // whole): checkpoints do not depend on the sub-groups either.
  for (const auto& [placement, sub_group_size] :
       {std::pair{Placement{"nvme", "nvme"}, 0}, std::pair{Placement{"cpu", "cpu"}, 0},
        std::pair{Placement{"nvme", "nvme"}, 1000}}) {
    // Each resumed run writes its own last checkpoint: it starts from a copy of the step-7 one.
    const TempDir copy;
    std::filesystem::copy(checkpoints.path(), copy.path());
    json resumed = with_zero(tiny_scenario("bf16", false, 1), placement, nvme.path());
    if (sub_group_size > 0) resumed["zero"]["sub_group_size"] = sub_group_size;
    resumed["checkpoint"] = base["checkpoint"];
    resumed["checkpoint"]["dir"] = copy.path();
    auto session = train::TrainSession::create(parse(resumed), {.resume = true});
    REQUIRE(session.is_ok());
    LossRecorder rest;
    auto outcome = session.value()->trainer().run(rest);
    INFO(outcome.status().message());
    REQUIRE(outcome.is_ok());
    CHECK(outcome.value().first_step == 7);
    REQUIRE(rest.losses.size() == 13);
    for (std::size_t i = 0; i < rest.losses.size(); ++i) {
      INFO(placement.params << ", sub_group_size " << sub_group_size << " step " << 7 + i);
      CHECK(std::memcmp(&rest.losses[i], &uninterrupted[7 + i], sizeof(double)) == 0);
    }
  }
}

TEST_CASE("partitioned states: budgets too small for the plan are refused before step 1, naming the field") {
  const TempDir nvme;
  const json base = tiny_scenario("bf16", false, 1);
  struct Case {
    json zero;
    const char* field;
  };
  const std::vector<Case> cases = {
      {{{"params", "cpu"}, {"optimizer", "cpu"}, {"max_live_bytes", 1024}}, "scenario.zero.max_live_bytes"},
      {{{"params", "nvme"}, {"optimizer", "nvme"}, {"nvme_paths", {nvme.path()}}, {"prefetch_bytes", 1024}},
       "scenario.zero.prefetch_bytes"},
      {{{"params", "cpu"}, {"optimizer", "cpu"}, {"host_memory", 4096}}, "scenario.zero.host_memory"},
      {{{"params", "nvme"}, {"optimizer", "nvme"}, {"nvme_paths", {nvme.path()}}, {"host_memory", 100000}},
       "scenario.zero.host_memory"},
  };
  for (const Case& c : cases) {
    json document = base;
    document["zero"] = c.zero;
    document["zero"]["persistence_threshold"] = 100;
    auto session = train::TrainSession::create(parse(document));
    INFO(c.zero.dump());
    REQUIRE_FALSE(session.is_ok());
    CHECK(session.status().code() == ErrorCode::kInvalidArgument);
    CHECK(session.status().message().rfind(c.field, 0) == 0);
    CHECK(session.status().message().find('\n') == std::string::npos);
  }
}

}  // namespace
}  // namespace zinf

namespace zinf {
namespace {

// A fault-injecting engine over io_uring (or the posix engine where io_uring is unavailable), and
// a pointer to add rules to it while the session owns it.
std::unique_ptr<io::FaultInjectingEngine> fault_engine() {
  Result<std::unique_ptr<io::IoEngine>> inner = io::make_io_engine(io::EngineKind::kUring, 64);
  if (!inner.is_ok()) inner = io::make_io_engine(io::EngineKind::kPosix, 64);
  REQUIRE(inner.is_ok());
  return std::make_unique<io::FaultInjectingEngine>(std::move(inner).value());
}

bool directory_empty(const std::string& path) { return std::filesystem::is_empty(path); }

TEST_CASE("partitioned states: an NVMe read or write error fails the step with one line, the checkpoint still loads") {
  const TempDir nvme;
  const TempDir checkpoints;
  json document = with_zero(tiny_scenario("bf16", false, 1), {"nvme", "nvme"}, nvme.path());
  document["checkpoint"] = {{"dir", checkpoints.path()}, {"every", 3}, {"keep_last", 2}};
  const std::vector<double> uninterrupted = [&] {
    json plain = document;
    plain.erase("checkpoint");
    return train_losses(plain);
  }();
  {
    auto session = train::TrainSession::create(parse(document), {.resume = true, .stop_after = 3});
    REQUIRE(session.is_ok());
    LossRecorder first;
    REQUIRE(session.value()->trainer().run(first).is_ok());
  }

  // Trains `from` with the n-th NVMe read (counted from now) failing with EIO: the run fails at
  // step 1 with one line naming `what`, the path and the errno.
  const auto read_error = [&](const json& from, std::uint64_t nth, const std::vector<std::string>& whats) {
    auto engine = fault_engine();
    io::FaultInjectingEngine* faults = engine.get();
    auto session = train::TrainSession::create(parse(from), {.resume = true, .io_engine = std::move(engine)});
    REQUIRE(session.is_ok());
    faults->add_rule(io::FaultRule::fail(faults->counters().reads_seen + nth, EIO).counting_only(io::IoOpKind::kRead));
    LossRecorder recorder;
    const Result<train::TrainOutcome> outcome = session.value()->trainer().run(recorder);
    REQUIRE_FALSE(outcome.is_ok());
    const std::string& message = outcome.status().message();
    INFO(message);
    CHECK(outcome.status().code() == ErrorCode::kIoError);
    CHECK(std::any_of(whats.begin(), whats.end(),
                      [&](const std::string& what) { return message.find(what) != std::string::npos; }));
    CHECK(message.find(nvme.path()) != std::string::npos);
    CHECK(message.find("EIO") != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
    CHECK(recorder.losses.empty());
  };
  SECTION("a read error in the forward pass") {
    // Without the overlap the forward pass's reads are the parameters' (with it, the optimizer
    // states' reads come first: the next section).
    json serial = document;
    serial["zero"]["overlap_optimizer"] = false;
    read_error(serial, 3, {"NVMe read of bf16 params of "});
  }
  SECTION("a read error of optimizer states read ahead during the forward pass (overlap_optimizer)") {
    // The optimizer's read-ahead is issued before the forward pass but served after the parameter
    // reads the forward needs, when there are any pending (docs/nvme.md, "Order of service"):
    // which of the two reaches the drive first is the I/O thread's timing, so the first read to
    // fail is either, and either must fail the step with one line.
    read_error(document, 1, {"NVMe read of optimizer states of sub-group ", "NVMe read of bf16 params of "});
  }
  SECTION("a write error in the optimizer step") {
    auto engine = fault_engine();
    io::FaultInjectingEngine* faults = engine.get();
    json fresh = document;
    fresh["checkpoint"]["resume"] = false;
    auto session = train::TrainSession::create(parse(fresh), {.resume = true, .io_engine = std::move(engine)});
    REQUIRE(session.is_ok());
    faults->add_rule(
        io::FaultRule::fail(faults->counters().writes_seen + 2, ENOSPC).counting_only(io::IoOpKind::kWrite));
    LossRecorder recorder;
    const Result<train::TrainOutcome> outcome = session.value()->trainer().run(recorder);
    REQUIRE_FALSE(outcome.is_ok());
    const std::string& message = outcome.status().message();
    INFO(message);
    CHECK(message.find("NVMe write of ") != std::string::npos);
    CHECK(message.find(nvme.path()) != std::string::npos);
    CHECK(message.find("ENOSPC") != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  }
  // Nothing of the failed runs stays behind: the swap files are anonymous and gone with the session.
  CHECK(directory_empty(nvme.path()));
  // The checkpoint of step 3 still loads and the run continues the uninterrupted curve.
  auto session = train::TrainSession::create(parse(document), {.resume = true});
  REQUIRE(session.is_ok());
  LossRecorder rest;
  auto outcome = session.value()->trainer().run(rest);
  INFO(outcome.status().message());
  REQUIRE(outcome.is_ok());
  REQUIRE(rest.losses.size() == 17);
  for (std::size_t i = 0; i < rest.losses.size(); ++i) {
    CHECK(std::memcmp(&rest.losses[i], &uninterrupted[3 + i], sizeof(double)) == 0);
  }
}

}  // namespace
}  // namespace zinf
