// Adversarial flags, scenarios and output paths for `zinf train` and `zinf bench train`, end to end
// in process (issue 15): integers that used to be clamped or read as hex, a number no double holds,
// output paths that only failed after the work, a resume past the end, the final loss after a
// resume, and a record that cannot be written at the end.
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/zinf/plan_flags.h"
#include "apps/zinf/train_plan.h"
#include "kernels/threads.h"
#include "libengine/spec/scenario.h"
#include "tests/catch.h"
#include "tests/cli/cli_test_support.h"
#include "tests/temp_dir.h"

namespace {

using nlohmann::json;
using zinf::cli::test_support::check_usage_error;
using zinf::cli::test_support::read_text;
using zinf::cli::test_support::run_zinf;
using zinf::testing::TempDir;

json tiny_scenario() {
  return json{{"model", {{"layers", 2}, {"hidden", 32}, {"heads", 4}, {"vocab", 64}}},
              {"data", {{"source", "markov"}, {"successors", 4}, {"skew", 1.0}}},
              {"batch", 4},
              {"seq", 16},
              {"steps", 12},
              {"seed", 3},
              {"threads", 1},
              {"optimizer", {{"lr", 3e-3}}}};
}

// Defect 7 and 11: --steps 18446744073709551616 ran 2^63 - 1 steps, --steps 0x10 ran 16, and
// --threads 100000 became 64 while "threads": 4097 in a scenario was an error.
TEST_CASE("train hardening: integer flags share the scenario's ranges and take plain decimal only") {
  TempDir dir;
  const std::string path = dir.write("tiny.json", tiny_scenario().dump());
  check_usage_error(run_zinf({"train", path, "--steps", "18446744073709551616"}),
                    "--steps: '18446744073709551616' is too large; expected a whole number from 1 to 1099511627776");
  check_usage_error(run_zinf({"train", path, "--steps", "1099511627777"}), "--steps: '1099511627777' is too large");
  check_usage_error(run_zinf({"train", path, "--steps", "0x10"}),
                    "--steps: '0x10' is not a whole number; expected a whole number from 1 to 1099511627776");
  check_usage_error(run_zinf({"train", path, "--steps", "1e3"}), "--steps: '1e3' is not a whole number");
  check_usage_error(run_zinf({"train", path, "--threads", "100000"}),
                    "--threads: '100000' is too large; expected a whole number from 0 to 4096");
  check_usage_error(run_zinf({"train", path, "--stop-after", "0b11"}), "--stop-after: '0b11' is not a whole number");
  json threads = tiny_scenario();
  threads["threads"] = 4097;
  check_usage_error(run_zinf({"train", dir.write("t.json", threads.dump())}),
                    "scenario.threads: 4097 is too large (at most 4096)");
  json steps = tiny_scenario();
  steps["steps"] = 1099511627777;
  check_usage_error(run_zinf({"train", dir.write("s.json", steps.dump())}),
                    "scenario.steps: 1099511627777 is too large");
  check_usage_error(run_zinf({"bench", "train", path, "--steps", "0x10"}), "--steps: '0x10' is not a whole number");
  check_usage_error(run_zinf({"bench", "train", path, "--threads", "4097"}), "--threads: '4097' is too large");
  check_usage_error(run_zinf({"bench", "train", path, "--repeat", "99999999999999999999"}), "--repeat: ");
}

// Defect 1: "batch": 1e400 aborted the process (uncaught exception, exit 134).
TEST_CASE("train hardening: a number no double holds in a scenario is one line, exit 2") {
  TempDir dir;
  std::string text = tiny_scenario().dump();
  text.replace(text.find("\"batch\":4"), 9, "\"batch\":1e400");
  check_usage_error(run_zinf({"train", dir.write("big.json", text)}), "batch: number 1e400 is out of range");
  const std::string deep = R"({"name": )" + std::string(70000, '[') + std::string(70000, ']') + "}";
  check_usage_error(run_zinf({"train", dir.write("deep.json", deep)}), "nested deeper than 64 levels");
}

// Defect 8 (and 11's read-only checkpoint.dir): an unwritable output.record trained every step,
// then failed, lost the summary and blamed --out. Every output path is checked before step 1.
// (Tests run as root in CI, which ignores file modes, so "unwritable" is a path under a file.)
TEST_CASE("train hardening: output paths are checked before step 1, naming the right field") {
  TempDir dir;
  const std::string blocker = dir.write("file", "not a directory");
  json scenario = tiny_scenario();
  scenario["output"] = {{"record", blocker + "/record.json"}};
  auto o = run_zinf({"train", dir.write("r.json", scenario.dump())});
  check_usage_error(o, "scenario.output.record: cannot use '" + blocker + "/record.json': Not a directory (ENOTDIR)");
  CHECK(o.err.find("step 1/") == std::string::npos);  // nothing trained

  o = run_zinf({"train", dir.write("ok.json", tiny_scenario().dump()), "--record", blocker + "/r.json"});
  check_usage_error(o, "--record: cannot use '" + blocker + "/r.json': Not a directory");
  o = run_zinf({"train", dir.write("ok2.json", tiny_scenario().dump()), "--out", blocker + "/out.txt"});
  check_usage_error(o, "--out: cannot use '" + blocker + "/out.txt': Not a directory");
  o = run_zinf({"train", dir.write("ok4.json", tiny_scenario().dump()), "--out", dir.path() + "/missing/out.txt"});
  check_usage_error(o, "--out: '" + dir.path() + "/missing/out.txt' cannot be created: its directory '" + dir.path() +
                           "/missing' does not exist");
  o = run_zinf({"train", dir.write("ok3.json", tiny_scenario().dump()), "--out", dir.path()});
  check_usage_error(o, "--out: '" + dir.path() + "' is a directory");

  json checkpointed = tiny_scenario();
  checkpointed["checkpoint"] = {{"dir", blocker + "/ckpt"}};
  o = run_zinf({"train", dir.write("c.json", checkpointed.dump())});
  check_usage_error(o, "scenario.checkpoint.dir: cannot create '" + blocker + "/ckpt'");
  CHECK(o.err.find("step 1/") == std::string::npos);
}

// Defect 8: a write failure at the end (the disk filled up during the run) keeps the summary.
TEST_CASE("train hardening: a record that cannot be written at the end still prints the summary") {
  TempDir dir;
  json scenario = tiny_scenario();
  scenario["output"] = {{"record", "/dev/full"}};  // a device: written through, and every write fails
  const auto o = run_zinf({"train", dir.write("full.json", scenario.dump()), "--quiet"});
  INFO("stderr: " << o.err);
  CHECK(o.code == 1);
  CHECK(o.out.find("final loss") != std::string::npos);
  CHECK(o.err == "error: scenario.output.record: writing '/dev/full' failed: No space left on device (ENOSPC)\n");
}

// Defect 11: "resuming at step 70 of 50" exited 0 having done nothing.
TEST_CASE("train hardening: a checkpoint at or past the end of the run is an error, not a silent success") {
  TempDir dir;
  json scenario = tiny_scenario();
  scenario["checkpoint"] = {{"dir", dir.path() + "/ckpt"}, {"every", 4}};
  const std::string path = dir.write("c.json", scenario.dump());
  REQUIRE(run_zinf({"train", path, "--quiet", "--stop-after", "8"}).code == 0);
  const auto shorter = run_zinf({"train", path, "--quiet", "--steps", "5"});
  check_usage_error(shorter, "resumes at step 8, but this run ends at step 5: nothing to train");
  const auto stop_before = run_zinf({"train", path, "--quiet", "--stop-after", "8"});
  check_usage_error(stop_before, "resumes at step 8, but this run ends at step 8 (stop_after): nothing to train");
  CHECK(run_zinf({"train", path, "--quiet", "--steps", "5", "--no-resume"}).code == 0);
}

// Defect 9: after a resume, "mean of the last 10 steps" averaged only the steps this process ran.
TEST_CASE("train hardening: the final loss after a resume is the run's, not this process's") {
  TempDir dir;
  json scenario = tiny_scenario();
  const auto straight = run_zinf({"train", dir.write("s.json", scenario.dump()), "--quiet", "--format", "json"});
  REQUIRE(straight.code == 0);
  const json expected = json::parse(straight.out).at("summary");
  REQUIRE(expected.at("final_loss_steps") == 10);

  scenario["checkpoint"] = {{"dir", dir.path() + "/ckpt"}, {"every", 5}};
  const std::string resumable = dir.write("r.json", scenario.dump());
  REQUIRE(run_zinf({"train", resumable, "--quiet", "--stop-after", "10"}).code == 0);
  const auto resumed = run_zinf({"train", resumable, "--quiet", "--format", "json"});
  REQUIRE(resumed.code == 0);
  const json summary = json::parse(resumed.out).at("summary");
  CHECK(summary.at("steps_run") == 2);
  CHECK(summary.at("final_loss_steps") == 10);
  CHECK(summary.at("final_loss").get<double>() == expected.at("final_loss").get<double>());  // bit for bit
  const auto table = run_zinf({"train", resumable, "--quiet", "--steps", "13"});
  CHECK(table.out.find("(mean of the last 10 steps)") != std::string::npos);
}

// Defect 12: never more compute threads than cores unless asked; asked for, it is said.
TEST_CASE("train hardening: threads default to the available cores, more is allowed, with a warning") {
  zinf::kernels::cpu::set_compute_threads(0);
  CHECK(zinf::kernels::cpu::compute_threads() == zinf::kernels::cpu::available_cores());
  TempDir dir;
  const int more = zinf::kernels::cpu::available_cores() + 1;
  const auto o = run_zinf(
      {"train", dir.write("t.json", tiny_scenario().dump()), "--steps", "1", "--threads", std::to_string(more)});
  CHECK(o.code == 0);
  CHECK(o.err.find(fmt::format("warning: {} compute threads on {} available core", more, more - 1)) !=
        std::string::npos);
}

// Issue 24: a run that failed midway (here the loss overflows: lr 1e30) exited with its error and
// no record; the steps it completed were lost. Its record now says "failed", the error and those
// steps; a finished run's says "completed".
TEST_CASE("train hardening: a run that fails midway still writes its record, status failed, with its steps") {
  TempDir dir;
  json scenario = tiny_scenario();
  scenario["output"] = {{"record", dir.path() + "/ok.json"}};
  REQUIRE(run_zinf({"train", dir.write("ok.json", scenario.dump()), "--quiet", "--steps", "2"}).code == 0);
  const json ok = json::parse(read_text(dir.path() + "/ok.json"));
  CHECK(ok.at("status") == "completed");
  CHECK(ok.at("error").is_null());

  scenario["optimizer"]["lr"] = 1e30;
  scenario["checkpoint"] = {{"dir", dir.path() + "/ckpt"}, {"every", 1}};
  scenario["output"] = {{"record", dir.path() + "/failed.json"}};
  const auto o = run_zinf({"train", dir.write("diverges.json", scenario.dump())});
  INFO("stderr: " << o.err);
  CHECK(o.code == 1);
  CHECK(o.err.find("error: loss became non-finite") != std::string::npos);
  CHECK(o.err.find("run record: " + dir.path() + "/failed.json") != std::string::npos);
  const json record = json::parse(read_text(dir.path() + "/failed.json"));
  CHECK(record.at("status") == "failed");
  CHECK(record.at("error").get<std::string>().rfind("loss became non-finite", 0) == 0);
  const json& steps = record.at("steps");
  REQUIRE(steps.size() >= 1);
  CHECK(steps.size() < 12);
  CHECK(record.at("summary").at("steps_run") == steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) CHECK(steps.at(i).at("step") == i);
  // The error names the step that failed: the one after the last completed.
  CHECK(record.at("error").get<std::string>().find(fmt::format("at step {}", steps.size())) != std::string::npos);
  CHECK(record.at("checkpoint").at("last_written").get<std::string>().find(dir.path() + "/ckpt/") == 0);
  CHECK_FALSE(record.contains("plan"));  // no plan of a whole run next to a partial one
}

// Issue 24: the NVMe probe's rule where it is decided — a probe that cannot run (its directory
// unusable: a path under a regular file) is unmeasured with the reason, never an error, and the
// plan leaves out the times it would have mis-predicted.
TEST_CASE("train hardening: an NVMe bandwidth probe that cannot run is unmeasured, not an error") {
  TempDir dir;
  json scenario = tiny_scenario();
  scenario["zero"] = {{"params", "nvme"},
                      {"optimizer", "nvme"},
                      {"nvme_paths", {dir.path()}},
                      {"host_memory", "64MiB"},
                      {"persistence_threshold", 64}};
  zinf::Result<zinf::spec::Scenario> loaded =
      zinf::spec::load_scenario(dir.write("nvme.json", scenario.dump()), zinf::cli::scenario_shape_resolver());
  REQUIRE(loaded.is_ok());
  const std::string file = dir.write("a-file", "x");
  loaded->zero.nvme_paths = {file + "/swap"};
  zinf::Result<zinf::cli::RunHardware> hardware = zinf::cli::run_hardware(*loaded, "", 1e9, true);
  REQUIRE(hardware.is_ok());
  REQUIRE(hardware->unmeasured.size() == 1);
  CHECK(hardware->unmeasured[0].rfind("NVMe bandwidth unmeasured: the 64 MiB probe on scenario.zero.nvme_paths could "
                                      "not run: ",
                                      0) == 0);
  CHECK(hardware->figures.nvme_read_bandwidth == 0);
  CHECK(hardware->source.at("nvme") == hardware->unmeasured[0]);
  const json record = {{"summary", {{"step_ms", {{"median", 10.0}}}, {"optimizer_ms_median", 4.0}}},
                       {"memory", {{"device", {{"peak_bytes", 1e6}}}}},
                       {"engine", {{"links", json::object()}}}};
  const json plan =
      zinf::cli::plan_vs_measured(zinf::planner::predict_engine(*loaded, hardware->figures), *hardware, record);
  REQUIRE(plan.at("unmeasured").size() == 1);
  CHECK(plan.at("unmeasured").at(0) == hardware->unmeasured[0]);
  for (const json& row : plan.at("rows")) {
    INFO(row.dump());
    CHECK(row.at("predicted").is_null() == (row.at("unit") == "ms"));
  }
}

// Issue 24: with --hw PROFILE no probe ran, yet the plan's shared-machine note spoke of the probes.
TEST_CASE("train hardening: the shared-machine note speaks of probes only where probes ran") {
  const json busy = {{"load_average_1min", 9.0}, {"cores", 2}};
  zinf::cli::RunHardware measured;
  CHECK(zinf::cli::shared_machine_note(busy, measured, nullptr).find("probes") != std::string::npos);
  zinf::cli::RunHardware profile;
  profile.from_profile = true;
  const std::string note = zinf::cli::shared_machine_note(busy, profile, nullptr);
  CHECK(note.find("load average 9.0 on 2 cores") != std::string::npos);
  CHECK(note.find("probe") == std::string::npos);
  CHECK(zinf::cli::shared_machine_note({{"load_average_1min", 1.0}, {"cores", 2}}, profile, nullptr).empty());
}

// Issue 29: "the plan reads fast" was printed beside a +12% step error (the plan predicted a slower
// step than measured). The load slows only the measured steps, so it explains a negative error only.
TEST_CASE("train hardening: the shared-machine note follows the step error's sign") {
  const json busy = {{"load_average_1min", 9.0}, {"cores", 2}};
  const auto plan_with = [](double step_error) {
    return json{{"rows", json::array({{{"figure", "step"}, {"error_percent", step_error}},
                                      {{"figure", "forward"}, {"error_percent", -50.0}}})}};
  };
  zinf::cli::RunHardware measured;
  const std::string slow = zinf::cli::shared_machine_note(busy, measured, plan_with(12.0));
  CHECK(slow.find("reads fast") == std::string::npos);
  CHECK(slow.find("+12.0% slower than measured") != std::string::npos);
  const std::string fast = zinf::cli::shared_machine_note(busy, measured, plan_with(-12.0));
  CHECK(fast.find("reads fast (step -12.0%)") != std::string::npos);
}

}  // namespace
