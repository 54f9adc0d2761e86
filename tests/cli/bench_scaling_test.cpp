// `zinf bench scaling`: bad flags are one error line and exit 2 (in-process); the real binary
// trains a tiny scenario at 1 and 2 ranks (each through the rank spawner's mpirun), strong and
// weak, and writes a zinf.bench-scaling/1 record whose rows hold the measured figures, the
// communication at 2 ranks, speed-up and efficiency computed from tokens/s, and the plan; `zinf
// report` renders the record.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "probes/process.h"
#include "tests/cli/cli_test_support.h"
#include "tests/temp_dir.h"

namespace zinf::cli {

// The measuring harness (probes/) this file calls.
using probes::ProcessOutput;
using probes::run_process;

namespace {

using nlohmann::json;
using test_support::check_usage_error;
using test_support::run_zinf;

// A tiny GPT, ZeRO-3 with CPU offload, batch 4: splits over 1, 2 and 4 ranks, not over 3.
std::string write_scenario(const testing::TempDir& dir) {
  const json scenario = {{"model", {{"layers", 1}, {"hidden", 16}, {"heads", 2}, {"vocab", 64}}},
                         {"batch", 4},
                         {"seq", 8},
                         {"steps", 4},
                         {"threads", 1},
                         {"zero", {{"stage", 3}, {"params", "cpu"}, {"optimizer", "cpu"}}}};
  const std::string path = dir.path() + "/tiny.json";
  std::ofstream(path) << scenario.dump(2);
  return path;
}

TEST_CASE("bench scaling: bad flags are one line and exit 2") {
  testing::TempDir dir;
  const std::string scenario = write_scenario(dir);
  const auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"bench", "scaling", scenario};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_zinf(args);
  };
  check_usage_error(with({"--ranks", "0"}), "--ranks: '0' in '0' is not a rank count from 1 to 1024");
  check_usage_error(with({"--ranks", "1,two"}), "--ranks: 'two' in '1,two'");
  check_usage_error(with({"--ranks", "1,,2"}), "--ranks: '' in '1,,2'");
  check_usage_error(with({"--ranks", "5000"}), "--ranks: '5000'");
  check_usage_error(with({"--ranks", "2,1"}), "--ranks: '2,1' lists 1 after 2");
  check_usage_error(with({"--ranks", "1,1"}), "--ranks: '1,1' lists 1 after 1");
  check_usage_error(with({"--ranks", ""}), "--ranks: ");
  check_usage_error(with({"--ranks", "1,3"}), "--ranks: 3 does not divide scenario.batch 4");
  check_usage_error(with({"--steps", "0"}), "--steps");
  check_usage_error(with({"--comm-timeout", "0"}), "--comm-timeout");
  check_usage_error(with({"--hw", "no-such-profile"}), "--hw: ");
  check_usage_error(with({"--format", "xml"}), "--format");
  check_usage_error(run_zinf({"bench", "scaling", dir.path() + "/missing.json"}), "missing.json");
}

json run_scaling(const testing::TempDir& dir, const std::vector<std::string>& extra) {
  const std::string out = dir.path() + "/scaling.json";
  std::vector<std::string> argv = {ZINF_BINARY, "bench", "scaling", write_scenario(dir),
                                   "--ranks",   "1,2",   "--steps", "4",
                                   "--format",  "json",  "--out",   out};
  argv.insert(argv.end(), extra.begin(), extra.end());
  Result<ProcessOutput> run = run_process(argv);
  REQUIRE(run.is_ok());
  INFO("stderr: " << run->err);
  REQUIRE(run->exit_status == 0);
  CHECK(run->out.empty());  // the record went to --out; the children printed nothing either
  return json::parse(test_support::read_text(out));
}

TEST_CASE("bench scaling: strong scaling at 1 and 2 ranks writes the record") {
  testing::TempDir dir;
  const json record = run_scaling(dir, {});
  CHECK(record["schema"] == "zinf.bench-scaling/1");
  CHECK(record["mode"] == "strong");
  REQUIRE(record["rows"].size() == 2);
  const json& one = record["rows"][0];
  const json& two = record["rows"][1];
  CHECK(one["ranks"] == 1);
  CHECK(two["ranks"] == 2);
  CHECK(one["global_batch"] == 4);
  CHECK(two["global_batch"] == 4);
  CHECK(two["batch_per_rank"] == 2);
  // Speed-up and efficiency are tokens/s ratios against 1 rank (same tokens per step here).
  CHECK(one["speedup"].get<double>() == 1.0);
  CHECK(one["efficiency"].get<double>() == 1.0);
  const double speedup = two["tokens_per_s"].get<double>() / one["tokens_per_s"].get<double>();
  CHECK(std::abs(two["speedup"].get<double>() - speedup) <= 1e-12 * speedup);
  CHECK(std::abs(two["efficiency"].get<double>() - speedup / 2) <= 1e-12 * speedup);
  // Step time: the median lies within the spread; one sample per measured step.
  for (const json& row : record["rows"]) {
    INFO(row.dump());
    CHECK(row["step_ms"]["min"].get<double>() <= row["step_ms"]["median"].get<double>());
    CHECK(row["step_ms"]["median"].get<double>() <= row["step_ms"]["max"].get<double>());
    CHECK(!row["step_ms"]["samples"].empty());
    CHECK((row["plan"].contains("step_ms") || row["plan"].contains("infeasible")));
  }
  // Nothing is communicated at 1 rank; at 2 the gathers and reductions are, and hidden <= busy.
  CHECK(one["comm"]["calls_per_step"].get<double>() == 0.0);
  CHECK(one["comm"]["hidden_fraction"].is_null());
  CHECK(two["comm"]["calls_per_step"].get<double>() > 0.0);
  CHECK(two["comm"]["busy_ms_median"].get<double>() > 0.0);
  const json& hidden = two["comm"]["hidden_fraction"];
  REQUIRE(hidden.is_number());
  CHECK(hidden.get<double>() >= 0.0);
  CHECK(hidden.get<double>() <= 1.0);
  CHECK(two["rank_step_ms_median"].size() == 2);

  // zinf report renders it, with its own section.
  const std::string path = dir.path() + "/scaling.json";
  const test_support::Outcome report = run_zinf({"report", path});
  INFO("stderr: " << report.err);
  CHECK(report.code == 0);
  CHECK(report.out.find("Scaling over ranks") != std::string::npos);
}

TEST_CASE("bench scaling: --weak keeps the batch per rank") {
  testing::TempDir dir;
  const json record = run_scaling(dir, {"--weak"});
  CHECK(record["mode"] == "weak");
  REQUIRE(record["rows"].size() == 2);
  CHECK(record["rows"][0]["batch_per_rank"] == 4);
  CHECK(record["rows"][1]["batch_per_rank"] == 4);
  CHECK(record["rows"][1]["global_batch"] == 8);
  CHECK(record["rows"][1]["tokens_per_step"].get<double>() == 2 * record["rows"][0]["tokens_per_step"].get<double>());
}

}  // namespace
}  // namespace zinf::cli
