// Adversarial input to `zinf plan`, `zinf hw` and --out, end to end in process (issue 15): numbers
// no double holds, nesting deep enough to overflow a stack, special files as input and as output,
// figures that would make the model divide by nearly zero, duplicates, control characters. Each
// must end in one line on stderr and exit 2 (or, for output to special files, be written through),
// never a crash, a hang, a non-finite figure or a replaced device.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "tests/catch.h"
#include "tests/cli/cli_test_support.h"
#include "tests/temp_dir.h"

namespace {

using zinf::cli::test_support::check_usage_error;
using zinf::cli::test_support::read_text;
using zinf::cli::test_support::run_zinf;
using zinf::testing::TempDir;

// Neither "inf" nor "nan" as a word (a figure would print as "inf", "-nan%", "nan ms").
bool has_non_finite_figure(const std::string& text) {
  static const std::regex word(R"((^|[^A-Za-z])-?(inf|nan)([^A-Za-z]|$))", std::regex::icase);
  return std::regex_search(text, word);
}

std::string profile_text() { return run_zinf({"hw", "show", "dgx2-v100", "--format", "json"}).out; }

TEST_CASE("hardening: numbers a double cannot hold, in every input file, are one line and exit 2") {
  TempDir dir;
  nlohmann::json profile = nlohmann::json::parse(profile_text());
  std::string text = profile.dump();
  text.replace(text.find("\"nodes\":1"), 9, "\"nodes\":1e400");
  check_usage_error(run_zinf({"plan", "--params", "1T", "--hw", dir.write("p.json", text)}), "p.json:1:");
  const std::string hf = dir.write("config.json", R"({"model_type": "llama", "hidden_size": -1e999})");
  check_usage_error(run_zinf({"plan", "--hf-config", hf}), "hidden_size: number -1e999 is out of range");
  const std::string digits = dir.write("d.json", R"({"unused": )" + std::string(400, '9') + "}");
  check_usage_error(run_zinf({"plan", "--params", "1T", "--hw", digits}), "unused: number 9999");
}

TEST_CASE("hardening: JSON nested 100,000 levels deep is refused, not a stack overflow") {
  TempDir dir;
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  check_usage_error(run_zinf({"plan", "--params", "1T", "--hw", dir.write("deep.json", deep)}),
                    "deep.json:1:65: JSON nested deeper than 64 levels");
  const std::string hf = dir.write("config.json", R"({"model_type": "gpt2", "n_embd": )" + deep + "}");
  check_usage_error(run_zinf({"plan", "--hf-config", hf}), "nested deeper than 64 levels");
}

TEST_CASE("hardening: special files and directories as input are refused at once") {
  TempDir dir;
  check_usage_error(run_zinf({"plan", "--params", "1T", "--hw", "/dev/zero"}),
                    "--hw: /dev/zero: is a character device, not a regular file; expected a file");
  check_usage_error(run_zinf({"plan", "--hf-config", "/dev/urandom"}),
                    "--hf-config: /dev/urandom: is a character device");
  check_usage_error(run_zinf({"plan", "--params", "1T", "--hw", dir.path() + "/"}), "is a directory; expected a file");
  const std::string fifo = dir.path() + "/fifo.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  check_usage_error(run_zinf({"plan", "--params", "1T", "--hw", fifo}), "is a FIFO, not a regular file");
  check_usage_error(run_zinf({"train", "/dev/zero"}), "/dev/zero: is a character device");
  // Found by the cli_plan fuzz target: a path the system refuses (here too long) was exit 1.
  check_usage_error(run_zinf({"plan", "--params", "1T", "--hw", "/dev/" + std::string(5000, 'x') + ".json"}),
                    "cannot open: File name too long (ENAMETOOLONG)");
  // ... and a schema from a file was echoed whole.
  nlohmann::json profile = nlohmann::json::parse(profile_text());
  profile["schema"] = std::string(100000, 's');
  const auto o = run_zinf({"plan", "--params", "1T", "--hw", dir.write("schema.json", profile.dump())});
  check_usage_error(o, "hw.schema: 'sss");
  CHECK(o.err.size() < 300);
}

TEST_CASE("hardening: figures that would make a step infinite are refused, no plan prints inf or nan") {
  for (const char* flag : {"--gpu-flops", "--gpu-peak-flops"}) {
    check_usage_error(run_zinf({"plan", "--params", "1T", flag, "1e-300"}),
                      std::string(flag) + ": 1e-300 FLOP/s is outside 1 GFLOP/s to 10 EFLOP/s");
  }
  for (const char* flag : {"--pcie-bw", "--cpu-mem-bw", "--nvme-read-bw", "--nvme-write-bw", "--gpu-link-bw",
                           "--net-bw", "--gpu-mem-bw"}) {
    INFO(flag);
    check_usage_error(run_zinf({"plan", "--params", "1T", flag, "1e-300"}),
                      std::string(flag) + ": 1e-300 B/s is outside 1 MB/s to 1 PB/s");
    check_usage_error(run_zinf({"plan", "--max-params", flag, "1e-300"}),
                      std::string(flag) + ": 1e-300 B/s is outside");
  }
  check_usage_error(run_zinf({"plan", "--params", "1T", "--cpu-mem", "1e-300"}),
                    "--cpu-mem: '1e-300' is not a whole number");
  check_usage_error(run_zinf({"plan", "--params", "1T", "--cpu-mem", "1KiB"}),
                    "--cpu-mem: 1024 B is outside 1 MiB to 1 EiB");

  TempDir dir;
  nlohmann::json profile = nlohmann::json::parse(profile_text());
  profile["node"]["links"]["pcie_per_gpu"] = 1e-300;
  check_usage_error(run_zinf({"plan", "--params", "1T", "--hw", dir.write("slow.json", profile.dump())}),
                    "hw.node.links.pcie_per_gpu: 1e-300 B/s is outside");

  // The edges of every range give finite figures, for one plan, max-params and a sweep.
  for (const std::vector<std::string>& edge :
       {std::vector<std::string>{"--gpu-flops", "1GFLOPS", "--gpu-peak-flops", "1GFLOPS", "--pcie-bw", "1MB/s",
                                 "--nvme-read-bw", "1MB/s", "--nvme-write-bw", "1MB/s", "--cpu-mem-bw", "1MB/s",
                                 "--gpu-link-bw", "1MB/s", "--net-bw", "1MB/s", "--gpu-mem-bw", "1MB/s"},
        std::vector<std::string>{"--gpu-flops", "10000PFLOPS", "--gpu-peak-flops", "10000PFLOPS", "--pcie-bw", "1PB/s",
                                 "--nvme-read-bw", "1PB/s", "--cpu-mem-bw", "1PB/s", "--gpu-link-bw", "1PB/s"}}) {
    for (std::vector<std::string> args : {std::vector<std::string>{"plan", "--params", "1T"},
                                          std::vector<std::string>{"plan", "--params", "1B", "--nodes", "65536"},
                                          std::vector<std::string>{"plan", "--max-params"},
                                          std::vector<std::string>{"plan", "--sweep", "params=1B..100T"}}) {
      args.insert(args.end(), edge.begin(), edge.end());
      for (const char* format : {"table", "json", "csv"}) {
        std::vector<std::string> with_format = args;
        with_format.insert(with_format.end(), {"--format", format});
        const auto o = run_zinf(with_format);
        INFO(fmt::format("{}\nstderr: {}", fmt::join(with_format, " "), o.err));
        CHECK(o.code == 0);
        CHECK_FALSE(has_non_finite_figure(o.out));
      }
    }
  }
}

TEST_CASE("hardening: duplicates are refused, not silently resolved to the last") {
  check_usage_error(run_zinf({"plan", "--params", "1T", "--place", "params=gpu,params=nvme"}),
                    "--place: 'params=nvme' places params a second time (already gpu); give each kind once");
  TempDir dir;
  std::string text = profile_text();
  text.insert(text.find("\"name\""), "\"nodes\": 4, ");
  text.insert(text.find("\"name\""), "\"nodes\": 2, ");
  check_usage_error(run_zinf({"plan", "--params", "1T", "--hw", dir.write("dup.json", text)}),
                    "key \"nodes\" appears twice in one object (at the top level)");
}

TEST_CASE("hardening: control characters never reach the terminal") {
  TempDir dir;
  nlohmann::json profile = nlohmann::json::parse(profile_text());
  profile["name"] = "evil\x1b]0;pwned\x07\x1b[2J";
  const auto o = run_zinf({"plan", "--params", "1T", "--hw", dir.write("evil.json", profile.dump())});
  check_usage_error(o, "hw.name: ");
  CHECK(o.err.find('\x1b') == std::string::npos);
  const auto named = run_zinf({"plan", "--params", "1T", "--hw", "evil\x1b[31m"});
  check_usage_error(named, "--hw: 'evil\\x1b[31m' is not a built-in hardware profile");
  CHECK(named.err.find('\x1b') == std::string::npos);
}

TEST_CASE("hardening: --out writes through special files, follows links, refuses directories") {
  TempDir dir;
  SECTION("a character device stays one") {
    const auto o = run_zinf({"plan", "--params", "1T", "--out", "/dev/null"});
    CHECK(o.code == 0);
    struct stat info {};
    REQUIRE(::stat("/dev/null", &info) == 0);
    CHECK(S_ISCHR(info.st_mode));
  }
  SECTION("- is standard output") {
    const auto o = run_zinf({"plan", "--params", "1T", "--format", "json", "--out", "-"});
    REQUIRE(o.code == 0);
    CHECK(nlohmann::json::parse(o.out).at("schema") == "zinf.plan/1");
    CHECK_FALSE(std::filesystem::exists("-"));
  }
  SECTION("a FIFO is written through to its reader") {
    const std::string fifo = dir.path() + "/out.fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    std::string received;
    std::thread reader([&] { received = read_text(fifo); });
    const auto o = run_zinf({"plan", "--params", "1T", "--format", "json", "--out", fifo});
    reader.join();
    CHECK(o.code == 0);
    CHECK(nlohmann::json::parse(received).at("schema") == "zinf.plan/1");
    struct stat info {};
    REQUIRE(::lstat(fifo.c_str(), &info) == 0);
    CHECK(S_ISFIFO(info.st_mode));
  }
  SECTION("a symbolic link is followed: the target is replaced, the link stays") {
    const std::string target = dir.write("target.json", "old");
    const std::string link = dir.path() + "/link.json";
    std::filesystem::create_symlink("target.json", link);  // relative, as people make them
    const auto o = run_zinf({"plan", "--params", "1T", "--format", "json", "--out", link});
    REQUIRE(o.code == 0);
    CHECK(std::filesystem::is_symlink(link));
    CHECK(nlohmann::json::parse(read_text(target)).at("schema") == "zinf.plan/1");
    // A dangling link creates its target.
    std::filesystem::create_symlink("new.json", dir.path() + "/dangling.json");
    REQUIRE(run_zinf({"plan", "--params", "1T", "--out", dir.path() + "/dangling.json"}).code == 0);
    CHECK(std::filesystem::is_regular_file(dir.path() + "/new.json"));
    // A loop is an error.
    std::filesystem::create_symlink("loop.json", dir.path() + "/loop.json");
    check_usage_error(run_zinf({"plan", "--params", "1T", "--out", dir.path() + "/loop.json"}),
                      "is a chain of more than 40 symbolic links");
  }
  SECTION("a directory is refused, and the directory survives") {
    check_usage_error(run_zinf({"plan", "--params", "1T", "--out", dir.path()}),
                      "--out: '" + dir.path() + "' is a directory; expected a file path (or - for standard output)");
    CHECK(std::filesystem::is_directory(dir.path()));
  }
  SECTION("hw show writes a template the same way") {
    const std::string link = dir.path() + "/mine.json";
    std::filesystem::create_symlink(dir.write("real.json", ""), link);
    REQUIRE(run_zinf({"hw", "show", "dgx-h100", "--format", "json", "--out", link}).code == 0);
    CHECK(std::filesystem::is_symlink(link));
    CHECK(read_text(dir.path() + "/real.json").find("zinf.hardware/1") != std::string::npos);
  }
}

}  // namespace
