// A training session under a hostile environment (issue 15): a token file truncated while the run
// reads it (defect 5: SIGBUS through the old mmap), and compute threads whose buffers do not fit the
// address-space limit (defect 12: OpenBLAS spun at 100% CPU forever on the mmap it could not get).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "kernels/threads.h"
#include "libengine/spec/scenario.h"
#include "libengine/train/train_session.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::train {
namespace {

using zinf::testing::TempDir;

// Truncates the token file to 0 bytes once the first step is done.
class TruncatingObserver final : public StepObserver {
 public:
  explicit TruncatingObserver(std::string path) : path_(std::move(path)) {}
  void on_step(const StepMetrics& metrics) override {
    ++steps;
    if (metrics.step == 0) std::filesystem::resize_file(path_, 0);
  }
  int steps = 0;

 private:
  std::string path_;
};

TEST_CASE("a token file truncated during training ends the run with an error naming it", "[train][hardening]") {
  TempDir dir;
  const std::string tokens = dir.path() + "/tokens.bin";
  {
    std::ofstream out(tokens, std::ios::binary);
    for (int i = 0; i < 4096; ++i) {
      const unsigned char pair[2] = {static_cast<unsigned char>((i * 7) % 64), 0};
      out.write(reinterpret_cast<const char*>(pair), 2);
    }
  }
  const nlohmann::json document = {{"model", {{"layers", 1}, {"hidden", 16}, {"heads", 2}, {"vocab", 64}}},
                                   {"data", {{"source", "file"}, {"path", tokens}}},
                                   {"batch", 2},
                                   {"seq", 8},
                                   {"steps", 5},
                                   {"threads", 1}};
  const spec::Scenario scenario = spec::parse_scenario(document, "t.json", spec::ShapeResolver{}).value();
  auto session = TrainSession::create(scenario);
  REQUIRE(session.is_ok());
  TruncatingObserver observer(tokens);
  const Result<TrainOutcome> outcome = (*session)->trainer().run(observer);
  REQUIRE_FALSE(outcome.is_ok());
  CHECK(observer.steps == 1);
  CHECK(outcome.status().code() == ErrorCode::kIoError);
  CHECK(outcome.status().message().find("data.path: '" + tokens + "' changed during the run") == 0);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// The sanitizers reserve terabytes of address space up front, so an address-space limit cannot be
// set under them; the check runs in the plain builds.
TEST_CASE("compute threads whose buffers exceed the address-space limit are refused, not spun on",
          "[train][hardening]") {
  // In a child process: the limit must not constrain the rest of the test binary.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    rlimit limit{};
    limit.rlim_cur = limit.rlim_max = std::uint64_t{4000000} * 1024;  // ulimit -v 4000000, as in the report
    if (::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(10);
    if (kernels::cpu::address_space_for_threads(64)) ::_exit(11);  // 64 x 136 MiB = 8.5 GiB > 3.8 GiB
    if (!kernels::cpu::address_space_for_threads(2)) ::_exit(12);
    const nlohmann::json document = {{"model", {{"layers", 1}, {"hidden", 16}, {"heads", 2}, {"vocab", 64}}},
                                     {"batch", 2},
                                     {"seq", 8},
                                     {"steps", 1},
                                     {"threads", 64}};
    const Result<spec::Scenario> scenario = spec::parse_scenario(document, "t.json", spec::ShapeResolver{});
    if (!scenario.is_ok()) ::_exit(13);
    const auto session = TrainSession::create(*scenario);
    if (session.is_ok()) ::_exit(14);
    if (session.status().message().find("scenario.threads: 64 compute threads need 8.50 GiB of address space") != 0) {
      ::_exit(15);
    }
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
#endif

}  // namespace
}  // namespace zinf::train
