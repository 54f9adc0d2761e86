// `zinf train` at the edges of its memory and swap settings (issue 24), through the real binary:
// - the swap directories a run creates (parents included) are removed when it ends, failed or
//   not, and only those: a directory that existed before stays;
// - one directory written two ways ("/x/swap" and "/x/swap/") is refused, not striped as two drives.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "probes/process.h"
#include "tests/catch.h"
#include "tests/cli/cli_test_support.h"
#include "tests/temp_dir.h"

namespace {

using nlohmann::json;
using zinf::probes::ProcessOutput;
using zinf::probes::run_process;
using zinf::testing::TempDir;
namespace fs = std::filesystem;

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

json on_nvme(json scenario, const std::vector<std::string>& paths) {
  scenario["zero"] = {{"params", "nvme"},
                      {"optimizer", "nvme"},
                      {"nvme_paths", paths},
                      {"host_memory", "64MiB"},
                      {"persistence_threshold", 64}};
  return scenario;
}

ProcessOutput zinf_binary(const std::vector<std::string>& args) {
  std::vector<std::string> argv{ZINF_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  zinf::Result<ProcessOutput> run = run_process(argv);
  REQUIRE(run.is_ok());
  return std::move(run).value();
}

// One line on stderr, "error: ..." containing `needle`, and exit 2.
void check_bad_input(const ProcessOutput& o, const std::string& needle) {
  INFO("stderr: " << o.err);
  CHECK(o.exit_status == 2);
  CHECK(o.err.find("error: ") != std::string::npos);
  CHECK(o.err.find(needle) != std::string::npos);
}

}  // namespace

// Defect 7: /nonexistent/deeply/nvme stayed on the root file system after the run failed.
TEST_CASE("train limits: the swap directories a run created are removed, deepest first, only those") {
  TempDir dir;
  const std::string kept = dir.path() + "/kept";
  fs::create_directory(kept);

  // A run that fails after the swap store opened (prefetch_bytes below the largest parameter).
  json failing = on_nvme(tiny_scenario(), {kept + "/made/deeply/nvme"});
  failing["zero"]["prefetch_bytes"] = "1KiB";
  ProcessOutput o = zinf_binary({"train", dir.write("failing.json", failing.dump())});
  check_bad_input(o, "scenario.zero.prefetch_bytes: 1.00 KiB cannot stage the largest NVMe-resident parameter");
  CHECK(fs::exists(kept));
  CHECK_FALSE(fs::exists(kept + "/made"));

  // A run that trains: nothing of the swap directories it created is left either.
  o = zinf_binary({"train", dir.write("ok.json", on_nvme(tiny_scenario(), {kept + "/made/nvme"}).dump())});
  INFO("stderr: " << o.err);
  CHECK(o.exit_status == 0);
  CHECK(fs::exists(kept));
  CHECK_FALSE(fs::exists(kept + "/made"));

  // A directory someone filled meanwhile is not removed, nor are its parents.
  const std::string filled = kept + "/filled/nvme";
  fs::create_directories(filled);
  dir.write("kept/filled/nvme/note.txt", "mine");
  o = zinf_binary({"train", dir.write("filled.json", on_nvme(tiny_scenario(), {filled}).dump())});
  CHECK(o.exit_status == 0);
  CHECK(fs::exists(filled + "/note.txt"));
}

// Defect 8: ["/x/swap", "/x/swap/"] passed the duplicate check and was striped as two drives.
TEST_CASE("train limits: one swap directory spelt two ways is refused, and nothing is left") {
  TempDir dir;
  const std::string swap = dir.path() + "/x/swap";
  for (const std::vector<std::string>& paths :
       {std::vector<std::string>{swap, swap + "/"}, std::vector<std::string>{swap, dir.path() + "/x/../x/swap"},
        std::vector<std::string>{swap, dir.path() + "/x/./swap//"}}) {
    INFO(json(paths).dump());
    const ProcessOutput o = zinf_binary({"train", dir.write("twice.json", on_nvme(tiny_scenario(), paths).dump())});
    check_bad_input(o, "scenario.zero.nvme_paths: swap: path '" + paths[1] +
                           "' is given twice: it is the same directory as '" + swap + "'");
    CHECK_FALSE(fs::exists(dir.path() + "/x"));
  }
  // A symbolic link to the same directory is the same drive too (device and inode).
  fs::create_directories(swap);
  fs::create_directory_symlink(swap, dir.path() + "/link");
  const ProcessOutput o =
      zinf_binary({"train", dir.write("link.json", on_nvme(tiny_scenario(), {swap, dir.path() + "/link"}).dump())});
  check_bad_input(o, "is given twice: it is the same directory as '" + swap + "'");
}
