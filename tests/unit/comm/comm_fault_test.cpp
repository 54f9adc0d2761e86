// Faulty ranks end a job with one clear line, never a hang: comm_fault_runner started under mpirun
// with 3 ranks, rank 2 hung (FaultInjectingCommunicator: it stops participating), killed with
// SIGKILL mid-job, slowed down, or failing. The peers must exit non-zero with an error naming rank
// 2; a delay shorter than the timeout must change nothing. The hang and the kill are also run with
// 4 KiB collectives, which the peers run on their calling thread (the stream is idle): the
// watchdog must cover those too. CTest's timeout is the no-hang check: no test asserts on time.
#include <cstdlib>
#include <string>
#include <vector>

#include "probes/process.h"
#include "tests/catch.h"

namespace zinf::comm {
namespace {

constexpr int kInlineCount = 1024;     // 4 KiB of fp32: run on the caller (CommOptions::inline_max_bytes)
constexpr int kQueuedCount = 1 << 18;  // 1 MiB: enqueued on the collective stream

probes::ProcessOutput run_job(const std::string& mode, int call, int count = kQueuedCount) {
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  const std::vector<std::string> argv = {ZINF_MPIEXEC,
                                         "--oversubscribe",
                                         "-np",
                                         "3",
                                         ZINF_FAULT_RUNNER,
                                         "--mode",
                                         mode,
                                         "--rank",
                                         "2",
                                         "--call",
                                         std::to_string(call),
                                         "--timeout-ms",
                                         "2000",
                                         "--count",
                                         std::to_string(count)};
  Result<probes::ProcessOutput> out = probes::run_process(argv);
  REQUIRE(out.is_ok());
  INFO("stdout: " << out->out);
  INFO("stderr: " << out->err);
  return out.value();
}

// The lines of `text` that start with "error: ".
std::vector<std::string> error_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    if (line.rfind("error: ", 0) == 0) lines.push_back(line);
    begin = end + 1;
  }
  return lines;
}

TEST_CASE("comm fault: a hung rank makes its peers fail after the timeout, naming it") {
  const bool small = GENERATE(false, true);
  CAPTURE(small);
  const probes::ProcessOutput out = run_job("hang", 5, small ? kInlineCount : kQueuedCount);
  INFO(out.err);
  CHECK(out.exit_status != 0);
  const std::vector<std::string> errors = error_lines(out.err);
  REQUIRE_FALSE(errors.empty());
  const std::string what = small ? "all_reduce #5 (4.00 KiB fp32) on rank" : "all_reduce #5 (1.00 MiB fp32) on rank";
  bool named = false;
  for (const std::string& line : errors) {
    if (line.find(what) != std::string::npos && line.find("timed out after 2.00 s") != std::string::npos &&
        line.find("rank 2 did not answer a roll call") != std::string::npos) {
      named = true;
    }
  }
  CHECK(named);
}

TEST_CASE("comm fault: kill -9 of one rank ends the others with a line naming it") {
  const bool small = GENERATE(false, true);
  CAPTURE(small);
  const probes::ProcessOutput out = run_job("kill", 4, small ? kInlineCount : kQueuedCount);
  INFO(out.err);
  CHECK(out.exit_status != 0);
  const std::vector<std::string> errors = error_lines(out.err);
  REQUIRE_FALSE(errors.empty());
  bool named = false;
  for (const std::string& line : errors) {
    if (line.find("rank 2 (pid ") != std::string::npos) named = true;
  }
  CHECK(named);
}

TEST_CASE("comm fault: a delay shorter than the timeout changes nothing") {
  const probes::ProcessOutput out = run_job("delay", 3);
  INFO(out.err);
  CHECK(out.exit_status == 0);
  CHECK(error_lines(out.err).empty());
  CHECK(out.out.find("rank 2: 20 all_reduces ok") != std::string::npos);
}

TEST_CASE("comm fault: an injected error fails that rank and ends the job") {
  const probes::ProcessOutput out = run_job("error", 6);
  INFO(out.err);
  CHECK(out.exit_status != 0);
  CHECK(out.err.find("error: all_reduce #6 on rank 2 of 3: injected error") != std::string::npos);
}

}  // namespace
}  // namespace zinf::comm
