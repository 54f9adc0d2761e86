// `zinf bench suite` and `zinf hw probe` end to end on this machine (small sizes; no timing is
// asserted), and the ratio-with-spread rule against hand-computed values.
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "probes/ratio_spread.h"
#include "tests/catch.h"
#include "tests/cli/cli_test_support.h"
#include "tests/temp_dir.h"

namespace {

using nlohmann::json;
using zinf::cli::test_support::check_usage_error;
using zinf::cli::test_support::read_text;
using zinf::cli::test_support::run_zinf;

TEST_CASE("ratio with spread: the medians' ratio, the extreme pairings, the 20% rule") {
  const std::vector<double> zinf{9, 10, 11}, base{4, 5, 6};
  const json r = zinf::probes::ratio_with_spread(zinf, base);
  CHECK(r["value"].get<double>() == Approx(2.0));        // 10 / 5
  CHECK(r["low"].get<double>() == Approx(1.5));          // 9 / 6
  CHECK(r["high"].get<double>() == Approx(11.0 / 4.0));  // 11 / 4
  CHECK(r["zinf_spread"].get<double>() == Approx(0.2));  // (11 - 9) / 10: not over 20%
  CHECK(r["baseline_spread"].get<double>() == Approx(0.4));
  CHECK(r["too_wide"].get<bool>());  // the baseline's 40% is
  const std::vector<double> tight{4.9, 5.0, 5.1};
  CHECK_FALSE(zinf::probes::ratio_with_spread(zinf, tight)["too_wide"].get<bool>());
  const std::vector<double> empty;
  CHECK(zinf::probes::ratio_with_spread(zinf, empty)["value"].is_null());
}

TEST_CASE("bench suite and hw probe: a record with every CPU figure and its baseline, a profile plan accepts") {
  zinf::testing::TempDir dir;
  const std::string suite = dir.path() + "/suite.json";
  const std::string profile = dir.path() + "/mine.json";
  const auto probe = run_zinf(
      {"hw", "probe", "--repeat", "2", "--device", "none", "--suite-out", suite, "--format", "json", "--out", profile});
  INFO(probe.err);
  REQUIRE(probe.code == 0);
  const json record = json::parse(read_text(suite));
  CHECK(record["schema"] == "zinf.bench-suite/1");
  std::vector<std::string> names;
  for (const json& f : record["figures"]) {
    names.push_back(f["name"]);
    CHECK(f["zinf"]["samples"].size() == 2);
    REQUIRE(f["baseline"].is_object());
    const json& s = f["ratio_spread"];
    CHECK(s["low"].get<double>() <= s["value"].get<double>());
    CHECK(s["value"].get<double>() <= s["high"].get<double>());
  }
  CHECK(names == std::vector<std::string>{"memory bandwidth", "fp32 matmul peak", "cpu adam"});
  const json hw = json::parse(read_text(profile));
  CHECK(hw["schema"] == "zinf.hardware/1");
  CHECK(hw["provenance"]["node.gpu.achievable_flops"].get<std::string>().rfind("measured: fp32 matmul peak", 0) == 0);
  CHECK(hw["provenance"]["node.links.network"].get<std::string>().find("copied from the base profile 'cpu-only'") !=
        std::string::npos);
  const auto plan = run_zinf({"plan", "--params", "100M", "--hw", profile, "--precision", "fp32"});
  INFO(plan.err);
  CHECK(plan.code == 0);
  const auto report = run_zinf({"report", suite, "--format", "md"});
  CHECK(report.code == 0);
  CHECK(report.out.find("zinf/baseline (range)") != std::string::npos);
}

TEST_CASE("bench suite --out DIR: the record and the summary go into the directory") {
  zinf::testing::TempDir dir;
  const std::string out = dir.path() + "/suite-out";
  const auto o = run_zinf({"bench", "suite", "--repeat", "2", "--device", "none", "--format", "md", "--out", out});
  INFO(o.err);
  REQUIRE(o.code == 0);
  const json record = json::parse(read_text(out + "/suite.json"));
  CHECK(record["schema"] == "zinf.bench-suite/1");
  CHECK(read_text(out + "/suite.md").find("memory bandwidth") != std::string::npos);
  // A path that is a file is refused before anything runs.
  const std::string file = dir.write("file.json", "{}");
  check_usage_error(run_zinf({"bench", "suite", "--out", file}), "--out: '" + file + "' is not a directory");
}

TEST_CASE("bench suite and hw probe: bad flags fail with one line naming the flag") {
  check_usage_error(run_zinf({"bench", "suite", "--repeat", "1"}), "--repeat:");
  check_usage_error(run_zinf({"bench", "suite", "--device", "tpu"}), "--device:");
  check_usage_error(run_zinf({"bench", "suite", "--size", "1MiB"}), "--size:");
  check_usage_error(run_zinf({"hw", "probe", "--base", "nope"}), "--base");
}

}  // namespace
