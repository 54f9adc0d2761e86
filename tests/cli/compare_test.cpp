// `zinf compare` as a gate that can be trusted, through the CLI (issue 24 §3): a metric of the base
// missing from the new record fails (exit 3) unless --exclude names it; records of different schema
// versions or kinds are refused (exit 2); different scenarios are refused unless
// --allow-different-scenarios; both records' run conditions are shown, with a warning when they
// differ enough to explain a change or are unknown. And every record zinf writes carries them.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/catch.h"
#include "tests/cli/cli_test_support.h"
#include "tests/temp_dir.h"

namespace {

using nlohmann::json;
using zinf::cli::test_support::check_usage_error;
using zinf::cli::test_support::fixture;
using zinf::cli::test_support::read_text;
using zinf::cli::test_support::run_zinf;
using zinf::testing::TempDir;

json train_fixture(const std::string& name) { return json::parse(read_text(fixture("reports/" + name))); }

// The fixture's 24 steps repeated to 200, numbered 1..200 (the 200-step base).
json base_of_200_steps() {
  json base = train_fixture("train.json");
  const json steps = base.at("steps");
  json longer = json::array();
  for (int i = 0; i < 200; ++i) {
    json step = steps.at(static_cast<std::size_t>(i) % steps.size());
    step["step"] = i + 1;
    step["warmup"] = i < 3;
    longer.push_back(std::move(step));
  }
  base["steps"] = std::move(longer);
  return base;
}

json conditions(double load_before, int cores, const char* governor) {
  return {{"load_avg_1m_before", load_before},
          {"load_avg_1m_after", load_before},
          {"steal_percent", 0.0},
          {"cores", cores},
          {"governor", governor},
          {"interval_seconds", 30.0}};
}

TEST_CASE("compare CLI: a new record with no steps and an empty summary fails the gate") {
  TempDir dir;
  const json base = base_of_200_steps();
  json empty = base;
  empty["steps"] = json::array();
  empty["summary"] = json::object();
  const std::string base_path = dir.write("base.json", base.dump());
  const std::string new_path = dir.write("new.json", empty.dump());

  const auto o = run_zinf({"compare", base_path, new_path});
  INFO("stdout: " << o.out << "\nstderr: " << o.err);
  CHECK(o.code == 3);
  CHECK(o.out.find("MISSING") != std::string::npos);
  CHECK(o.out.find("no regression") == std::string::npos);
  CHECK(o.out.find("is missing from the new record") != std::string::npos);

  const auto as_json = run_zinf({"compare", base_path, new_path, "--format", "json"});
  CHECK(as_json.code == 3);
  const json verdict = json::parse(as_json.out);
  CHECK(verdict.at("failed") == true);
  CHECK(verdict.at("missing").get<int>() > 0);
  bool step_ms_missing = false;
  for (const json& m : verdict.at("metrics")) {
    step_ms_missing =
        step_ms_missing || (m.at("name") == "steps[].step_ms" && m.at("missing") == true &&
                            m.at("verdict") == "missing from the new record" && m.at("base_count") == 197);
  }
  CHECK(step_ms_missing);

  // Excluded by name, the two emptied subtrees no longer fail it; the rest is unchanged.
  const auto excluded = run_zinf({"compare", base_path, new_path, "--exclude", "steps", "--exclude", "summary"});
  INFO("excluded stdout: " << excluded.out);
  CHECK(excluded.code == 0);
  CHECK(excluded.out.find("no regression") != std::string::npos);
  // One exclude is not enough.
  CHECK(run_zinf({"compare", base_path, new_path, "--exclude", "summary"}).code == 3);
  // A name that matches nothing is an error, not a silent no-op.
  check_usage_error(run_zinf({"compare", base_path, new_path, "--exclude", "steps[].step_sm"}),
                    "--exclude: 'steps[].step_sm' names no metric");
}

TEST_CASE("compare CLI: different schema versions or kinds are refused") {
  TempDir dir;
  json v1 = train_fixture("train.json");
  json v2 = train_fixture("train-rerun.json");
  v2["schema"] = "zinf.train/2";
  const std::string p1 = dir.write("v1.json", v1.dump());
  const std::string p2 = dir.write("v2.json", v2.dump());
  check_usage_error(run_zinf({"compare", p2, p1}), "records of different schema versions are not compared");
  check_usage_error(run_zinf({"compare", p1, p2, "--allow-different-scenarios"}), "zinf.train/2");
  check_usage_error(run_zinf({"compare", p1, fixture("reports/bench-io.json")}),
                    "cannot compare a train record with a bench-io record");
}

TEST_CASE("compare CLI: different scenarios only with --allow-different-scenarios") {
  TempDir dir;
  json other = train_fixture("train-rerun.json");
  other["scenario"]["batch"] = 16;
  const std::string base_path = fixture("reports/train.json");
  const std::string other_path = dir.write("other.json", other.dump());
  check_usage_error(run_zinf({"compare", base_path, other_path}), "--allow-different-scenarios compares them anyway");
  const auto allowed = run_zinf({"compare", base_path, other_path, "--allow-different-scenarios"});
  INFO("stderr: " << allowed.err);
  CHECK(allowed.code == 0);
  CHECK(allowed.out.find("(--allow-different-scenarios)") != std::string::npos);
  CHECK(run_zinf({"compare", base_path, other_path, "--force"}).code == 0);  // the flag's old name
}

TEST_CASE("compare CLI: both sides' run conditions are shown, and a difference that explains a change warned") {
  TempDir dir;
  json base = train_fixture("train.json");
  json rerun = train_fixture("train-rerun.json");
  base["conditions"] = conditions(0.1, 2, "performance");
  rerun["conditions"] = conditions(0.1, 2, "performance");
  const std::string base_path = dir.write("base.json", base.dump());
  const std::string same_path = dir.write("same.json", rerun.dump());
  const auto same = run_zinf({"compare", base_path, same_path});
  INFO("stdout: " << same.out << "\nstderr: " << same.err);
  CHECK(same.code == 0);
  CHECK(same.out.find("base conditions") != std::string::npos);
  CHECK(same.out.find("new conditions") != std::string::npos);
  CHECK(same.out.find("load 0.10 at the start") != std::string::npos);
  CHECK(same.err.empty());

  // The machine got busy between the runs: 1.5 runnable tasks per core more.
  rerun["conditions"] = conditions(3.1, 2, "performance");
  const std::string busy_path = dir.write("busy.json", rerun.dump());
  const auto busy = run_zinf({"compare", base_path, busy_path});
  INFO("busy stdout: " << busy.out << "\nstderr: " << busy.err);
  CHECK(busy.code == 0);  // a warning; the verdict is the metrics'
  CHECK(busy.out.find("DIFFER") != std::string::npos);
  CHECK(busy.out.find("load 3.10 at the start") != std::string::npos);
  CHECK(busy.err.find("warning: compare: the run conditions differ") != std::string::npos);

  // A baseline stored before records carried conditions still compares, and says so.
  const auto old = run_zinf({"compare", fixture("reports/train.json"), busy_path});
  CHECK(old.code == 0);
  CHECK(old.out.find("unknown (the record predates run conditions)") != std::string::npos);
  CHECK(old.err.find("base record has no run conditions") != std::string::npos);
}

void check_conditions(const json& record) {
  INFO("record: " << record.value("schema", std::string("?")));
  REQUIRE(record.contains("conditions"));
  const json& c = record.at("conditions");
  for (const char* key :
       {"load_avg_1m_before", "load_avg_1m_after", "steal_percent", "cores", "governor", "interval_seconds"}) {
    CHECK(c.contains(key));
  }
  CHECK(c.at("interval_seconds").is_number());  // the CLI takes the start snapshot
  CHECK(c.at("cores").is_number());
}

TEST_CASE("compare CLI: plan, train and bench io records carry their run conditions") {
  TempDir dir;
  const std::string plan = dir.path() + "/plan.json";
  REQUIRE(run_zinf({"plan", "--params", "1B", "--format", "json", "--out", plan}).code == 0);
  check_conditions(json::parse(read_text(plan)));

  json scenario = json::parse(read_text(fixture("reports/tiny-train.scenario.json")));
  scenario["steps"] = 4;
  scenario.erase("eval");
  scenario["output"] = {{"record", dir.path() + "/train.json"}};
  const std::string scenario_path = dir.write("tiny.json", scenario.dump());
  const auto trained = run_zinf({"train", scenario_path});
  INFO("train stderr: " << trained.err);
  REQUIRE(trained.code == 0);
  check_conditions(json::parse(read_text(dir.path() + "/train.json")));

  const std::string io = dir.path() + "/io.json";
  const auto benched = run_zinf({"bench", "io", "--path", dir.path(), "--size", "8MiB", "--tensor", "1MiB", "--repeat",
                                 "1", "--format", "json", "--out", io});
  INFO("bench io stderr: " << benched.err);
  REQUIRE(benched.code == 0);
  check_conditions(json::parse(read_text(io)));
}

}  // namespace
