// `zinf train` through the real binary, as a shell or a job scheduler starts it (issue 24): the
// launcher of `--ranks N` checks the scenario against the world size before any rank exists, a
// SIGTERM to it stops the whole job and says where a rerun resumes, ranks writing into a file get
// no colour, and a finished NVMe run keeps its record when the bandwidth probe has no room.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/zinf/process_tree.h"
#include "probes/process.h"
#include "tests/catch.h"
#include "tests/cli/cli_test_support.h"
#include "tests/temp_dir.h"

extern char** environ;  // NOLINT: POSIX, for posix_spawn

namespace zinf::cli {

// The measuring harness (probes/) this file calls.
using probes::ProcessOutput;
using probes::run_process;

namespace {

using nlohmann::json;
using testing::TempDir;

json tiny_scenario(std::int64_t batch, std::int64_t steps) {
  return json{{"model", {{"layers", 2}, {"hidden", 32}, {"heads", 4}, {"vocab", 64}}},
              {"data", {{"source", "markov"}, {"successors", 4}, {"skew", 1.0}}},
              {"batch", batch},
              {"seq", 16},
              {"steps", steps},
              {"seed", 3},
              {"threads", 1},
              {"optimizer", {{"lr", 3e-3}}}};
}

std::size_t lines_of(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

// mpirun refuses root (CI containers) unless told; the rank spawner sets these itself, a plain
// mpirun needs them from its caller. Escape codes are allowed by the environment, so only the
// terminal test decides.
void prepare_environment() {
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  ::unsetenv("NO_COLOR");
  ::setenv("TERM", "xterm-256color", 1);
}

// Defect: `--ranks 3` started 3 ranks that each failed after MPI started (the same error 3 times,
// 25 s); `--ranks 1000` started hundreds of processes first. Now one line, before any rank: with no
// mpirun on PATH the scenario's error is still the one reported, so nothing was spawned.
TEST_CASE("train launcher: a batch that does not split over the ranks is one line before any rank starts") {
  prepare_environment();
  TempDir dir;
  const std::string path = dir.write("batch4.json", tiny_scenario(4, 2).dump());
  for (const char* ranks : {"3", "1000"}) {
    INFO("--ranks " << ranks);
    Result<ProcessOutput> run = run_process(std::vector<std::string>{ZINF_BINARY, "train", path, "--ranks", ranks});
    REQUIRE(run.is_ok());
    INFO("stderr: " << run->err);
    CHECK(run->exit_status == 2);
    CHECK(lines_of(run->err) == 1);
    CHECK(run->err.rfind("error: scenario.batch: 4 does not split evenly over " + std::string(ranks) + " ranks", 0) ==
          0);
    CHECK(run->out.empty());
    // The same without mpirun: the check comes before the launcher looks for it.
    Result<ProcessOutput> no_mpirun = run_process(
        std::vector<std::string>{"/usr/bin/env", "PATH=/nonexistent", ZINF_BINARY, "train", path, "--ranks", ranks});
    REQUIRE(no_mpirun.is_ok());
    INFO("stderr without mpirun: " << no_mpirun->err);
    CHECK(no_mpirun->exit_status == 2);
    CHECK(no_mpirun->err.find("scenario.batch: 4 does not split") != std::string::npos);
  }
}

// Defect: under mpirun a rank's stdout is mpirun's pseudo-terminal, so `zinf train --ranks 2 >
// file` (and a plain `mpirun -np 3 zinf train > file`) wrote escape codes into the file.
TEST_CASE("train launcher: ranks whose output goes to a file or a pipe print no escape codes") {
  prepare_environment();
  TempDir dir;
  const std::string path = dir.write("batch6.json", tiny_scenario(6, 2).dump());
  const std::vector<std::vector<std::string>> commands = {
      {ZINF_BINARY, "train", path, "--quiet", "--ranks", "2"},
      {ZINF_MPIEXEC, "--oversubscribe", "-np", "3", ZINF_BINARY, "train", path, "--quiet"}};
  for (const std::vector<std::string>& command : commands) {
    INFO(command[0] << " " << command[3]);
    Result<ProcessOutput> run = run_process(command);
    REQUIRE(run.is_ok());
    INFO("stderr: " << run->err);
    REQUIRE(run->exit_status == 0);
    CHECK(run->out.find("Plan vs measured") != std::string::npos);  // rank 0's summary, once
    CHECK(run->out.find('\033') == std::string::npos);
  }
}

// Reads what is available on `fd` (non-blocking) into `into`, waiting at most `wait`.
void drain(int fd, std::string& into, std::chrono::milliseconds wait) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return;
  std::array<char, 4096> chunk{};
  for (;;) {
    const ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n <= 0) return;
    into.append(chunk.data(), static_cast<std::size_t>(n));
  }
}

// zinf started with its stdout and stderr on one pipe this test reads, killed if the test ends
// first.
struct Spawned {
  explicit Spawned(std::vector<std::string> args);
  Spawned(const Spawned&) = delete;
  Spawned& operator=(const Spawned&) = delete;
  pid_t pid = 0;
  int fd = -1;
  std::string output;  // everything read so far
  ~Spawned() {
    if (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (fd >= 0) ::close(fd);
  }
  // Reads until `text` has appeared or `limit` passed (polling the pipe, no sleeping on a guess);
  // fails the test if zinf ends first. The output so far.
  std::string output_until(const std::string& text, std::chrono::seconds limit) {
    const auto give_up = std::chrono::steady_clock::now() + limit;
    while (output.find(text) == std::string::npos && std::chrono::steady_clock::now() < give_up) {
      drain(fd, output, std::chrono::milliseconds(200));
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = 0;
        FAIL("zinf ended before it was stopped: " << output);
      }
    }
    return output;
  }
  // Waits up to `limit` for zinf to end, reading its output into `into`: the wait status, or
  // nullopt after killing it when it did not end in time.
  std::optional<int> wait_exit(std::string& into, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    pid_t reaped = 0;
    while ((reaped = ::waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline) {
      drain(fd, output, std::chrono::milliseconds(100));
    }
    if (reaped == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
    pid = reaped == 0 ? 0 : pid;
    drain(fd, output, std::chrono::milliseconds(500));
    into = output;
    if (reaped == 0) return std::nullopt;
    return status;
  }
};

Spawned::Spawned(std::vector<std::string> args) {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t actions;
  REQUIRE(::posix_spawn_file_actions_init(&actions) == 0);
  ::posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  ::posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  fd = fds[0];
  REQUIRE(rc == 0);
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
}

// Defect: SIGTERM to `zinf train --ranks 2` ended zinf (143) while mpirun and the ranks trained on
// and wrote the record 15 s later. Now the stop reaches the job, zinf waits for it, nothing of it is
// left, and the last line says which checkpoint a rerun resumes from.
TEST_CASE("train launcher: SIGTERM to zinf train --ranks 2 stops every rank and names the checkpoint to resume") {
  prepare_environment();
  TempDir dir;
  json scenario = tiny_scenario(4, 100000);  // far longer than the test waits
  scenario["checkpoint"] = {{"dir", dir.path() + "/ckpt"}, {"every", 2}, {"keep_last", 2}};
  scenario["output"] = {{"record", dir.path() + "/record.json"}, {"log_every", 1}};
  const std::string path = dir.write("long.json", scenario.dump());

  Spawned zinf({ZINF_BINARY, "train", path, "--ranks", "2"});
  // Poll the output (no sleeping on a guess) until a step's progress and a checkpoint appear.
  std::string output = zinf.output_until("checkpoint at step", std::chrono::seconds(240));
  INFO("output: " << output);
  REQUIRE(output.find("step ") != std::string::npos);
  REQUIRE(output.find("checkpoint at step") != std::string::npos);
  const std::vector<ProcessId> job = descendants_of(zinf.pid);  // mpirun and both ranks
  CHECK(job.size() >= 3);

  REQUIRE(::kill(zinf.pid, SIGTERM) == 0);
  // Bounded: the launcher's own grace is 15 s; allow for a loaded machine.
  const std::optional<int> ended = zinf.wait_exit(output, std::chrono::seconds(90));
  INFO("output after SIGTERM: " << output);
  REQUIRE(ended.has_value());
  const int status = *ended;
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 143);
  for (const ProcessId& process : job) {
    INFO("pid " << process.pid);
    CHECK_FALSE(still_running(process));
  }
  CHECK(descendants_of(zinf.pid).empty());
  // The last line names the checkpoint on disk that a rerun resumes from.
  const std::size_t said = output.find(
      "zinf train: stopped by SIGTERM: the 2 ranks stopped; a rerun resumes from "
      "checkpoint " +
      dir.path() + "/ckpt/step-");
  REQUIRE(said != std::string::npos);
  const std::size_t path_start = output.find(dir.path() + "/ckpt/", said);
  const std::string named = output.substr(path_start, output.find(" (step ", path_start) - path_start);
  CHECK(std::filesystem::exists(named));
  // Stopped, not finished: no rank wrote a record behind the launcher's back.
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/record.json"));
}

// A process training alone had no stop of its own: SIGINT/SIGTERM killed it with no record and no
// word of where a rerun resumes. Now the first signal stops it after the step in progress.
TEST_CASE("train: SIGINT to a single-process run stops it after its step, keeps its record, names the checkpoint") {
  TempDir dir;
  json scenario = tiny_scenario(4, 100000);  // far longer than the test waits
  scenario["checkpoint"] = {{"dir", dir.path() + "/ckpt"}, {"every", 2}, {"keep_last", 2}};
  scenario["output"] = {{"record", dir.path() + "/record.json"}, {"log_every", 1}};
  const std::string path = dir.write("long.json", scenario.dump());
  Spawned zinf({ZINF_BINARY, "train", path});
  std::string output = zinf.output_until("checkpoint at step", std::chrono::seconds(240));
  REQUIRE(output.find("checkpoint at step") != std::string::npos);
  REQUIRE(::kill(zinf.pid, SIGINT) == 0);
  const std::optional<int> ended = zinf.wait_exit(output, std::chrono::seconds(60));
  INFO("output after SIGINT: " << output);
  REQUIRE(ended.has_value());
  REQUIRE(WIFEXITED(*ended));
  CHECK(WEXITSTATUS(*ended) == 130);
  const std::size_t said = output.find("stopped by SIGINT after step ");
  REQUIRE(said != std::string::npos);
  const std::size_t rerun = output.find("; a rerun resumes from checkpoint " + dir.path() + "/ckpt/step-", said);
  CHECK(rerun != std::string::npos);
  const json record = json::parse(test_support::read_text(dir.path() + "/record.json"));
  CHECK(record.at("status") == "stopped");
  const std::int64_t steps = static_cast<std::int64_t>(record.at("steps").size());
  CHECK(steps >= 2);
  CHECK(record.at("error") == "stopped by SIGINT after step " + std::to_string(steps) + " of 100000");
  // The sets on disk are whole: `zinf checkpoint verify` says so.
  Result<ProcessOutput> verified =
      run_process(std::vector<std::string>{ZINF_BINARY, "checkpoint", "verify", dir.path() + "/ckpt"});
  REQUIRE(verified.is_ok());
  INFO("verify: " << verified->out << verified->err);
  CHECK(verified->exit_status == 0);
}

TEST_CASE("train: a second stop signal ends a single-process run at once, by that signal") {
  TempDir dir;
  json scenario = tiny_scenario(4, 100000);
  scenario["output"] = {{"log_every", 1}};
  const std::string path = dir.write("long.json", scenario.dump());
  Spawned zinf({ZINF_BINARY, "train", path});
  std::string output = zinf.output_until("step ", std::chrono::seconds(240));
  // Two different signals: two of the same one sent back to back may be delivered as one.
  REQUIRE(::kill(zinf.pid, SIGINT) == 0);
  REQUIRE(::kill(zinf.pid, SIGTERM) == 0);
  const std::optional<int> ended = zinf.wait_exit(output, std::chrono::seconds(60));
  INFO("output: " << output);
  REQUIRE(ended.has_value());
  CHECK(WIFSIGNALED(*ended));
  // Whichever of the two was handled second (pending signals may be delivered in either order).
  if (WIFSIGNALED(*ended)) CHECK((WTERMSIG(*ended) == SIGTERM || WTERMSIG(*ended) == SIGINT));
}

// Defect: an NVMe run whose steps all succeeded exited 1 with no summary and no record because the
// plan's 64 MiB bandwidth probe, run after the steps, found no room for its 128 MiB. Here the room
// is a file-size limit (ulimit -f, with SIGXFSZ ignored so a write past it fails instead of killing):
// the run's own swap files fit, the probe's do not. The probe now runs before step 1, and one that
// cannot run is reported as unmeasured.
TEST_CASE("train launcher: an NVMe bandwidth probe with no room is unmeasured and the run keeps its record") {
  TempDir dir;
  json scenario = tiny_scenario(4, 3);
  scenario["zero"] = {{"params", "nvme"},
                      {"optimizer", "nvme"},
                      {"nvme_paths", {dir.path() + "/swap"}},
                      {"host_memory", "64MiB"},
                      {"persistence_threshold", 64}};
  scenario["output"] = {{"record", dir.path() + "/record.json"}};
  const std::string path = dir.write("nvme.json", scenario.dump());
  // 65536 blocks: 32 MiB in 512-byte blocks, 64 MiB in 1024-byte ones; either is below 128 MiB.
  Result<ProcessOutput> run = run_process(std::vector<std::string>{
      "/bin/sh", "-c", "trap '' XFSZ; ulimit -f 65536 && exec \"$0\" train \"$1\"", ZINF_BINARY, path});
  REQUIRE(run.is_ok());
  INFO("stderr: " << run->err);
  REQUIRE(run->exit_status == 0);
  CHECK(run->err.find("warning: NVMe bandwidth unmeasured") != std::string::npos);
  CHECK(run->out.find("Plan vs measured") != std::string::npos);
  const json record = json::parse(test_support::read_text(dir.path() + "/record.json"));
  CHECK(record.at("status") == "completed");
  CHECK(record.at("steps").size() == 3);
  const json& plan = record.at("plan");
  REQUIRE(plan.at("unmeasured").size() == 1);
  CHECK(plan.at("unmeasured").at(0).get<std::string>().rfind("NVMe bandwidth unmeasured", 0) == 0);
  CHECK(plan.at("hardware").at("nvme_read_bandwidth") == 0);
  for (const json& row : plan.at("rows")) {
    INFO(row.dump());
    if (row.at("unit") == "ms") {
      CHECK(row.at("predicted").is_null());  // a time without the NVMe traffic is not this run's
    } else {
      CHECK(row.at("predicted").is_number());
    }
  }
}

}  // namespace
}  // namespace zinf::cli
