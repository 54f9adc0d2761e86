// `zinf train` at the edges of its memory and swap settings (issue 24), through the real binary:
// - an allocation the system refuses names the machine's limit, not a budget the user never set;
// - the swap directories a run creates (parents included) are removed when it ends, failed or
//   not, and only those: a directory that existed before stays;
// - one directory written two ways ("/x/swap" and "/x/swap/") is refused, not striped as two drives.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/zinf/process.h"
#include "tests/catch.h"
#include "tests/cli/cli_test_support.h"
#include "tests/temp_dir.h"

namespace {

using nlohmann::json;
using zinf::cli::ProcessOutput;
using zinf::cli::run_process;
using zinf::testing::TempDir;

json tiny_scenario() {
  return json{{"model", {{"layers", 2}, {"hidden", 32}, {"heads", 4}, {"vocab", 64}}},
              {"data", {{"source", "markov"}, {"successors", 4}, {"skew", 1.0}}},
              {"batch", 4},
              {"seq", 16},
              {"steps", 2},
              {"seed", 3},
              {"threads", 1},
              {"optimizer", {{"lr", 3e-3}}}};
}

}  // namespace

// Defect 4: batch 2^20 said "scenario.device_memory: unbounded is too small ... cannot allocate
// 24.0 GiB"; no budget failed, the machine's memory did. An address-space limit (ulimit -v) makes
// the refusal certain without touching that much memory.
TEST_CASE("train limits: memory the system refuses names the machine's limit, not an unset budget") {
  TempDir dir;
  json scenario = tiny_scenario();
  scenario["batch"] = 1 << 20;
  const std::string path = dir.write("big.json", scenario.dump());
  const std::vector<std::string> argv{"/bin/sh", "-c", "ulimit -v 1048576 && exec \"$0\" train \"$1\"", ZINF_BINARY,
                                      path};
  zinf::Result<ProcessOutput> run = run_process(argv);
  REQUIRE(run.is_ok());
  INFO("stderr: " << run->err);
  CHECK(run->exit_status == 2);
  CHECK(run->err.find("error: host memory: the system refused ") != std::string::npos);
  CHECK(run->err.find("this process's address-space limit of 1.00 GiB (ulimit -v)") != std::string::npos);
  CHECK(run->err.find("device_memory") == std::string::npos);
  CHECK(run->err.find("host_memory") == std::string::npos);
}
