// End-to-end tests of the zinf CLI, run in-process through run_cli() with captured streams.
// Figures are checked against hand-computed values (comments show the arithmetic), never against
// numbers copied from the program's output.
#include "apps/zinf/cli.h"

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/catch.h"
#include "tests/cli/cli_test_support.h"
#include "tests/temp_dir.h"

namespace zinf::cli {
namespace {

using test_support::fixture;
using test_support::Outcome;

Outcome zinf(std::initializer_list<std::string> args, bool terminal = false, bool color_allowed = true) {
  return test_support::run_zinf(args, terminal, color_allowed);
}

using testing::TempDir;

std::string read(const std::string& path) { return test_support::read_text(path); }

// Bad input: exit 2 and exactly one line on stderr, "error: ..." containing `needle`.
void expect_bad_input(std::initializer_list<std::string> args, const std::string& needle) {
  test_support::check_usage_error(zinf(args), needle);
}

TEST_CASE("version flag prints version, git SHA and build features") {
  const Outcome o = zinf({"--version"});
  CHECK(o.code == 0);
  CHECK(o.out.rfind("zinf 0.1.0 (git ", 0) == 0);
  CHECK(o.out.find("features: cuda ") != std::string::npos);
  CHECK(o.out.find("mpi ") != std::string::npos);
}

TEST_CASE("plan 1T on one DGX-2: feasible only with NVMe, figures in base units") {
  const Outcome o = zinf({"plan", "--params", "1T", "--hw", "dgx2-v100", "--format", "json"});
  REQUIRE(o.code == 0);
  const auto record = nlohmann::json::parse(o.out);
  CHECK(record["schema"] == "zinf.plan/1");
  CHECK(record["feasible"] == true);
  CHECK(record["placement"]["optimizer"] == "nvme");
  const double params = record["model"]["parameters"]["total"].get<double>();
  CHECK(params == Approx(1e12).epsilon(0.01));
  // Paper accounting: optimizer states are 16 bytes per parameter (fp32 params, grads, m, v).
  for (const auto& state : record["memory"]["states"]) {
    if (state["kind"] == "optimizer") CHECK(state["bytes_total"].get<double>() == Approx(16.0 * params));
    if (state["kind"] == "params") CHECK(state["bytes_per_gpu"].get<double>() == Approx(2.0 * params / 16));
  }
  // Compute per GPU: 8 * bsz(1) * seq(1024) * P FLOPs at the paper's 70 TFLOP/s.
  CHECK(record["prediction"]["compute_seconds"].get<double>() == Approx(8.0 * 1024 * params / 70e12));
  // NVMe per node: reads 3*2P (params) + 16P (optimizer) + 2P (grads into CPU Adam) at 25 GB/s,
  // writes 2P (grads) + 16P (optimizer) + 2P (updated params) at 20 GB/s.
  const double nvme_seconds = (6.0 + 16.0 + 2.0) * params / 25e9 + (2.0 + 16.0 + 2.0) * params / 20e9;
  CHECK(record["prediction"]["step_seconds"].get<double>() == Approx(nvme_seconds));
  CHECK(record["bottleneck"]["resource"] == "nvme");
  CHECK(record["generator"]["name"] == "zinf");
}

TEST_CASE("plan table output explains the answer") {
  const Outcome o = zinf({"plan", "--params", "1T", "--hw", "dgx2-v100"});
  REQUIRE(o.code == 0);
  for (const char* heading :
       {"Verdict", "Model", "Memory per kind of state", "Memory per tier", "Bandwidth", "Prediction"}) {
    CHECK(o.out.find(heading) != std::string::npos);
  }
  CHECK(o.out.find("NVMe-bound") != std::string::npos);
  CHECK(o.out.find("\x1b[") == std::string::npos);  // not a terminal: no color
}

TEST_CASE("an infeasible plan says why and what would make it fit") {
  const Outcome o = zinf({"plan", "--params", "1T", "--hw", "dgx2-v100", "--strategy", "zero3", "--format", "json"});
  REQUIRE(o.code == 4);  // the plan is printed, and "does not fit" has its own exit code
  const auto record = nlohmann::json::parse(o.out);
  CHECK(record["feasible"] == false);
  bool nodes_suggested = false;
  for (const auto& s : record["suggestions"]) {
    if (s["changes"].size() == 1 && s["changes"][0]["flag"] == "--nodes") {
      CHECK(s["changes"][0]["field"] == "nodes");  // the planner's name, beside the CLI's flag
      CHECK(s["command_line"] == "--nodes " + s["changes"][0]["value"].get<std::string>());
      nodes_suggested = true;
      // ZeRO-3 on GPU needs 20 B/param over the cluster: 20 TB / 32 GiB per GPU / 16 per node >= 36 nodes.
      CHECK(std::stoi(s["changes"][0]["value"].get<std::string>()) >= 36);
    }
  }
  CHECK(nodes_suggested);
  CHECK(record["bottleneck"]["explanation"].get<std::string>().find("does not fit") != std::string::npos);
}

TEST_CASE("10T on one DGX-2 needs two changes at once: tiling and more nodes") {
  const Outcome o = zinf({"plan", "--params", "10T", "--hw", "dgx2-v100", "--format", "json"});
  REQUIRE(o.code == 4);
  const auto record = nlohmann::json::parse(o.out);
  CHECK(record["feasible"] == false);
  REQUIRE(record["suggestions"].size() == 1);
  const auto& changes = record["suggestions"][0]["changes"];
  REQUIRE(changes.size() == 2);
  CHECK(changes[0]["flag"] == "--tiling");
  CHECK(changes[1]["flag"] == "--nodes");
  // 10T x 20 B = 200 TB of states; one node holds at most 28 TB NVMe + 1.5 TB CPU + 0.5 TB GPU = 30 TB,
  // so at least 7 nodes.
  CHECK(std::stoi(changes[1]["value"].get<std::string>()) >= 7);
  // The suggestion, applied, fits.
  const Outcome applied = zinf({"plan", "--params", "10T", "--hw", "dgx2-v100", "--tiling", changes[0]["value"],
                                "--nodes", changes[1]["value"], "--format", "json"});
  CHECK(nlohmann::json::parse(applied.out)["feasible"] == true);
}

TEST_CASE("max-params on one DGX-2 reproduces the paper's ordering and its 1T headline") {
  const Outcome o = zinf({"plan", "--max-params", "--hw", "dgx2-v100", "--nodes", "1", "--format", "json"});
  REQUIRE(o.code == 0);
  const auto record = nlohmann::json::parse(o.out);
  CHECK(record["schema"] == "zinf.max-params/1");
  std::map<std::string, double> max;
  for (const auto& row : record["strategies"]) max[row["strategy"]] = row["max_params"].get<double>();
  REQUIRE(max.size() == 6);
  // Data parallel: (32 GiB - working memory) / 20 B per param: below 1.72B.
  CHECK(max["dp"] < 34359738368.0 / 20);
  CHECK(max["dp"] > 1e9);
  // ZeRO-3 on GPU: 16 x 32 GiB / 20 B = 27.5B at most.
  CHECK(max["zero3"] < 16 * 34359738368.0 / 20);
  CHECK(max["zero3"] > max["dp"]);
  // CPU offload: 1.5 TB / 20 B = 75B at most.
  CHECK(max["zinf-cpu"] <= 1.5e12 / 20);
  CHECK(max["zinf-cpu"] > max["zero3"]);
  CHECK(max["zinf-nvme"] >= 1e12);
  CHECK(max["zinf-nvme"] <= 28e12 / 20);
}

TEST_CASE("sweep 1B..100T x 1..64 nodes gives one CSV row per configuration") {
  const Outcome o =
      zinf({"plan", "--sweep", "params=1B..100T", "--nodes", "1..64", "--hw", "dgx2-v100", "--format", "csv"});
  REQUIRE(o.code == 0);
  // 16 sizes (1-2-5 per decade from 1B to 100T) x 7 node counts (1, 2, 4, ..., 64) + header.
  CHECK(std::count(o.out.begin(), o.out.end(), '\n') == 16 * 7 + 1);
  CHECK(o.out.rfind("params,layers,hidden,heads,nodes,", 0) == 0);
  const Outcome json =
      zinf({"plan", "--sweep", "params=1B,1T", "--sweep", "micro-batch=1,4", "--hw", "dgx2-v100", "--format", "json"});
  REQUIRE(json.code == 0);
  const auto record = nlohmann::json::parse(json.out);
  CHECK(record["schema"] == "zinf.plan-sweep/1");
  CHECK(record["rows"].size() == 4);
}

TEST_CASE("hf-config uses the exact published parameter count") {
  const Outcome o = zinf({"plan", "--hf-config", fixture("hf/Llama-2-7b-hf.json"), "--hw", "dgx-a100-80g", "--seq",
                          "4096", "--format", "json"});
  REQUIRE(o.code == 0);
  const auto record = nlohmann::json::parse(o.out);
  CHECK(record["model"]["parameters"]["total"] == 6738415616ULL);
  CHECK(record["model"]["shape"]["mlp"] == "gated");
}

TEST_CASE("shape flags, precision and accounting") {
  // One GPU: no collectives, so a model this small is pure compute.
  const Outcome o = zinf({"plan", "--layers", "12", "--hidden", "768", "--heads", "12", "--hw", "h100-workstation",
                          "--gpus-per-node", "1", "--precision", "fp32", "--format", "json"});
  REQUIRE(o.code == 0);
  const auto record = nlohmann::json::parse(o.out);
  CHECK(record["model"]["parameters"]["total"] == 124439808ULL);  // GPT-2 small
  CHECK(record["memory"]["bytes_per_param"]["total"] == 16.0);    // fp32: 4 + 4 + 4 + 4
  CHECK(record["placement"]["optimizer"] == "gpu");
  CHECK(record["bottleneck"]["resource"] == "compute");
}

TEST_CASE("markdown output is a document") {
  const Outcome o = zinf({"plan", "--params", "7B", "--hw", "dgx-h100", "--format", "md"});
  REQUIRE(o.code == 0);
  CHECK(o.out.rfind("# zinf plan: ", 0) == 0);
  CHECK(o.out.find("## Memory per tier") != std::string::npos);
  CHECK(o.out.find("| ---") != std::string::npos);
}

TEST_CASE("color only on a terminal and never under NO_COLOR") {
  CHECK(zinf({"plan", "--params", "7B"}, /*terminal=*/true, /*color_allowed=*/true).out.find("\x1b[") !=
        std::string::npos);
  CHECK(zinf({"plan", "--params", "7B"}, true, /*color_allowed=*/false).out.find("\x1b[") == std::string::npos);
  CHECK(zinf({"plan", "--params", "7B"}, false, true).out.find("\x1b[") == std::string::npos);
  const Outcome defaulted = zinf({"plan", "--params", "7B"});
  CHECK(defaulted.out.find("dgx-h100 (default; choose with --hw)") != std::string::npos);
}

TEST_CASE("out flag writes atomically and replaces an existing file") {
  TempDir dir;
  const std::string path = dir.write("plan.json", "old contents");
  const Outcome o = zinf({"plan", "--params", "1T", "--hw", "dgx2-v100", "--format", "json", "--out", path});
  REQUIRE(o.code == 0);
  CHECK(o.out.empty());
  CHECK(nlohmann::json::parse(read(path))["schema"] == "zinf.plan/1");
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++entries;
  CHECK(entries == 1);  // no temporary file left behind
}

TEST_CASE("hw list and show, a shown profile is a valid --hw file") {
  const Outcome list = zinf({"hw", "list", "--format", "json"});
  REQUIRE(list.code == 0);
  std::vector<std::string> names;
  const auto listed = nlohmann::json::parse(list.out);
  for (const auto& p : listed["profiles"]) names.push_back(p["name"]);
  CHECK(names == std::vector<std::string>{"cpu-only", "dgx-a100-80g", "dgx-b200", "dgx-h100", "dgx-h200", "dgx2-v100",
                                          "gh200", "h100-workstation", "mi300x"});

  TempDir dir;
  const std::string path = dir.path() + "/mine.json";
  REQUIRE(zinf({"hw", "show", "dgx2-v100", "--format", "json", "--out", path}).code == 0);
  const Outcome plan = zinf({"plan", "--params", "1T", "--hw", path, "--nvme", "56TB", "--format", "json"});
  REQUIRE(plan.code == 0);
  CHECK(nlohmann::json::parse(plan.out)["input"]["hardware"]["node"]["nvme"]["capacity"] == 56000000000000ULL);
  CHECK(zinf({"hw", "show", "dgx-h100"}).out.find("H100") != std::string::npos);
}

TEST_CASE("bad input: one clear line and exit code 2") {
  expect_bad_input({"plan", "--params", "-3"}, "--params: '-3' is negative");
  expect_bad_input({"plan", "--params", "0"}, "--params: '0' is zero");
  expect_bad_input({"plan", "--params", "1Q"}, "unknown suffix 'Q'");
  expect_bad_input({"plan", "--params", ""}, "--params: '' is empty");
  expect_bad_input({"plan", "--params", "1e400"}, "out of range");
  expect_bad_input({"plan", "--params", "100"}, "below the smallest GPT-like shape");
  // The planner's messages reach the user in flags, through the CLI's one field -> flag table.
  expect_bad_input({"plan", "--params", "100"}, "--params: 100 is below");
  expect_bad_input({"plan", "--params", "100"}, "give the shape with --layers/--hidden/--heads instead");
  expect_bad_input({"plan", "--params", "1T", "--strategy", "zero3", "--place", "optimizer=nvme"},
                   "--place: optimizer=nvme is not allowed by --strategy zero3");
  expect_bad_input({"plan", "--params", "1T", "--nvme", "0", "--place", "params=nvme"},
                   "--place: params=nvme but the hardware has no NVMe (capacity 0); set --nvme");
  expect_bad_input({"plan", "--params", "1T", "--precision", "fp32", "--accounting", "zero"},
                   "--accounting: 'zero' does not match --precision fp32");
  expect_bad_input({"plan", "--params", "1T", "--hw", "dgx-9000"},
                   "--hw: 'dgx-9000' is not a built-in hardware profile");
  expect_bad_input({"plan", "--params", "1T", "--cpu-mem", "-1TB"}, "--cpu-mem: '-1TB' is negative");
  expect_bad_input({"plan", "--params", "1T", "--nvme-read-bw", "25GB"}, "without '/s'");
  expect_bad_input({"plan", "--params", "1T", "--nodes", "0"}, "--nodes: '0' is zero");
  expect_bad_input({"plan", "--params", "1T", "--micro-batch", "two"}, "--micro-batch: 'two' is not a whole number");
  expect_bad_input({"plan", "--params", "1T", "--precision", "fp8"}, "--precision: 'fp8'");
  expect_bad_input({"plan", "--params", "1T", "--precision", "fp32", "--accounting", "paper"},
                   "--accounting: 'paper' does not match");
  expect_bad_input({"plan", "--params", "1T", "--strategy", "magic"}, "--strategy: 'magic'");
  expect_bad_input({"plan", "--params", "1T", "--strategy", "zero3", "--place", "optimizer=nvme"},
                   "not allowed by --strategy zero3");
  expect_bad_input({"plan", "--params", "1T", "--target-efficiency", "1.5"}, "--target-efficiency: '1.5'");
  expect_bad_input({"plan", "--params", "1T", "--format", "xml"}, "--format: 'xml'");
  expect_bad_input({"plan", "--layers", "4", "--hidden", "1000", "--heads", "3"},
                   "--heads: 3 does not divide --hidden 1000");
  expect_bad_input({"plan", "--layers", "4", "--hidden", "1024"}, "--heads: missing");
  expect_bad_input({"plan", "--params", "1T", "--hf-config", fixture("hf/gpt2.json")}, "give only one of");
  expect_bad_input({"plan", "--hf-config", "/nonexistent/config.json"},
                   "--hf-config: /nonexistent/config.json: no such file");
  expect_bad_input({"plan", "--sweep", "params=100T..1B"}, "runs backwards");
  expect_bad_input({"plan", "--sweep", "params"}, "is not key=values");
  expect_bad_input({"plan", "--max-params", "--params", "1T"}, "--max-params");
  expect_bad_input({"plan", "--params", "1T", "--bogus"}, "--bogus");
  expect_bad_input({"plan"}, "model: missing");
  expect_bad_input({}, "A subcommand is required");
  expect_bad_input({"hw", "show", "nope"}, "profile: 'nope' is not a built-in hardware profile");
}

TEST_CASE("plan --schedule: the phases under both schedules, DeepSpeed's optimizer runs after the backward pass") {
  const auto run = [](const std::string& schedule) {
    const Outcome o = zinf(
        {"plan", "--params", "1T", "--hw", "dgx2-v100", "--nodes", "4", "--schedule", schedule, "--format", "json"});
    REQUIRE(o.code == 0);
    return nlohmann::json::parse(o.out);
  };
  const nlohmann::json ds = run("deepspeed");
  const nlohmann::json zi = run("zinf");
  CHECK(ds.at("input").at("schedule") == "deepspeed");
  CHECK(ds.at("schedule").at("chosen").at("schedule") == "deepspeed");
  CHECK(ds.at("prediction").at("step_seconds").get<double>() ==
        ds.at("schedule").at("chosen").at("step_seconds").get<double>());
  // The same placement under the other schedule is each plan's "other" step.
  CHECK(ds.at("prediction").at("step_seconds_other_schedule").get<double>() ==
        Approx(zi.at("prediction").at("step_seconds").get<double>()));
  // DeepSpeed's step is forward + backward + the optimizer phase; nothing of the optimizer is hidden.
  const nlohmann::json& phases = ds.at("schedule").at("chosen").at("phases");
  REQUIRE(phases.size() == 3);
  CHECK(phases[0].at("seconds").get<double>() + phases[1].at("seconds").get<double>() +
            phases[2].at("seconds").get<double>() ==
        Approx(ds.at("prediction").at("step_seconds").get<double>()));
  CHECK(ds.at("schedule").at("chosen").at("optimizer_hidden_seconds").get<double>() == 0.0);
  CHECK(zi.at("schedule").at("chosen").at("optimizer_hidden_seconds").get<double>() > 0.0);
  CHECK(zi.at("schedule").at("zinf_speedup_over_deepspeed").get<double>() > 1.0);
  const Outcome table = zinf({"plan", "--params", "1T", "--hw", "dgx2-v100", "--nodes", "4"});
  CHECK(table.out.find("Schedule (phases of one step)") != std::string::npos);
  CHECK(table.out.find("zinf's schedule is") != std::string::npos);
  // A node sweep says whether TFLOP/s per GPU rises and why.
  const Outcome sweep =
      zinf({"plan", "--params", "1T", "--hw", "dgx2-v100", "--schedule", "deepspeed", "--nodes", "4,8,16,32"});
  CHECK(sweep.out.find("TFLOP/s per GPU rises with the node count") != std::string::npos);
  CHECK(sweep.out.find("zinf vs DeepSpeed") != std::string::npos);
}

TEST_CASE("plan --scenario follows the scenario, without checkpointing a step is 6 FLOPs per parameter per token") {
  TempDir dir;
  nlohmann::json scenario = {{"model", {{"layers", 4}, {"hidden", 256}, {"heads", 4}, {"vocab", 512}}},
                             {"batch", 8},
                             {"seq", 64},
                             {"steps", 2},
                             {"precision", "fp32"}};
  const std::string path = dir.write("s.json", scenario.dump());
  const Outcome o = zinf({"plan", "--scenario", path, "--hw", "cpu-only", "--format", "json"});
  INFO(o.err);
  REQUIRE(o.code == 0);
  const nlohmann::json plan = nlohmann::json::parse(o.out);
  CHECK(plan.at("input").at("training").at("activation_checkpointing") == false);
  CHECK(plan.at("input").at("training").at("micro_batch") == 8);
  const double params = plan.at("model").at("parameters").at("total").get<double>();
  // cpu-only's achievable 120 GFLOP/s; 6 * 8 * 64 * P FLOPs.
  CHECK(plan.at("prediction").at("compute_seconds").get<double>() == Approx(6.0 * 8 * 64 * params / 120e9));
  // The same shape from flags, with --no-activation-checkpointing, is the same plan's compute.
  const Outcome flags =
      zinf({"plan",     "--layers",    "4",    "--hidden", "256",      "--heads",
            "4",        "--vocab",     "512",  "--seq",    "64",       "--micro-batch",
            "8",        "--precision", "fp32", "--hw",     "cpu-only", "--no-activation-checkpointing",
            "--format", "json"});
  REQUIRE(flags.code == 0);
  CHECK(nlohmann::json::parse(flags.out).at("prediction").at("compute_seconds").get<double>() ==
        Approx(6.0 * 8 * 64 * params / 120e9));
  // Checkpointing on: 8.
  scenario["activation_checkpointing"] = true;
  const Outcome ckpt =
      zinf({"plan", "--scenario", dir.write("c.json", scenario.dump()), "--hw", "cpu-only", "--format", "json"});
  REQUIRE(ckpt.code == 0);
  CHECK(nlohmann::json::parse(ckpt.out).at("prediction").at("compute_seconds").get<double>() ==
        Approx(8.0 * 8 * 64 * params / 120e9));
  expect_bad_input({"plan", "--scenario", path, "--params", "1B"}, "--scenario: the scenario sets the model");
  expect_bad_input({"plan", "--scenario", dir.path() + "/missing.json"}, "missing.json");
}

TEST_CASE("plan --schedule: an unknown schedule is one line and exit 2") {
  expect_bad_input({"plan", "--params", "1T", "--schedule", "megatron"},
                   "--schedule: 'megatron' is not one of zinf, deepspeed");
}

TEST_CASE("bad hardware profiles: missing field, malformed JSON with its line, typos") {
  TempDir dir;
  nlohmann::json profile = nlohmann::json::parse(zinf({"hw", "show", "dgx-h100", "--format", "json"}).out);
  profile["node"]["nvme"].erase("read_bandwidth");
  const std::string missing = dir.write("missing.json", profile.dump(2));
  expect_bad_input({"plan", "--params", "1T", "--hw", missing},
                   "hw.node.nvme.read_bandwidth: required field is missing");

  const std::string malformed =
      dir.write("malformed.json", "{\n  \"schema\": \"zinf.hardware/1\",\n  \"name\": ,\n}\n");
  expect_bad_input({"plan", "--params", "1T", "--hw", malformed}, malformed + ":3:");

  nlohmann::json typo = nlohmann::json::parse(zinf({"hw", "show", "dgx-h100", "--format", "json"}).out);
  typo["node"]["gpu"]["memroy"] = "80GiB";
  const std::string typo_path = dir.write("typo.json", typo.dump());
  expect_bad_input({"plan", "--params", "1T", "--hw", typo_path}, "did you mean 'memory'");

  nlohmann::json negative = nlohmann::json::parse(zinf({"hw", "show", "dgx-h100", "--format", "json"}).out);
  negative["node"]["cpu"]["memory"] = "-2TB";
  const std::string negative_path = dir.write("negative.json", negative.dump());
  expect_bad_input({"plan", "--params", "1T", "--hw", negative_path}, "hw.node.cpu.memory: '-2TB' is negative");
}

}  // namespace
}  // namespace zinf::cli
