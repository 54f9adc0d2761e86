#include "apps/zinf/process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "libengine/core/check.h"
#include "libengine/core/split.h"

extern char** environ;  // NOLINT: POSIX, for posix_spawn

namespace zinf::cli {
namespace {

// Closes the descriptors it holds when it goes out of scope.
class Pipe {
 public:
  Pipe() = default;
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  ~Pipe() {
    close_read();
    close_write();
  }
  Status open() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return Status::io_error(fmt::format("pipe: {}", std::strerror(errno)));
    read_fd = fds[0];
    write_fd = fds[1];
    return Status::ok();
  }
  void close_read() {
    if (read_fd >= 0) ::close(read_fd);
    read_fd = -1;
  }
  void close_write() {
    if (write_fd >= 0) ::close(write_fd);
    write_fd = -1;
  }
  int read_fd = -1;
  int write_fd = -1;
};

// Owns posix_spawn_file_actions_t.
class SpawnActions {
 public:
  SpawnActions() { ok_ = ::posix_spawn_file_actions_init(&actions_) == 0; }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
  ~SpawnActions() {
    if (ok_) ::posix_spawn_file_actions_destroy(&actions_);
  }
  bool ok() const { return ok_; }
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_{};
  bool ok_ = false;
};

// State, parent pid and start time of `pid` from /proc/<pid>/stat; nullopt when it is gone. The
// command name in parentheses may hold spaces and parentheses, so fields are counted after the last ')'.
struct ProcStat {
  char state = 0;
  int ppid = 0;
  unsigned long long start_time = 0;
};
std::optional<ProcStat> read_proc_stat(int pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text;
  if (!in || !std::getline(in, text)) return std::nullopt;
  const std::size_t paren = text.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(paren + 1));
  ProcStat stat;
  std::string skip;
  fields >> stat.state >> stat.ppid;  // fields 3 and 4
  for (int field = 5; field < 22; ++field) fields >> skip;
  fields >> stat.start_time;  // field 22
  if (!fields) return std::nullopt;
  return stat;
}

}  // namespace

std::vector<ProcessId> descendants_of(int pid) {
  std::multimap<int, ProcessId> children;  // parent pid -> child
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const int child = std::stoi(name);
    if (const std::optional<ProcStat> stat = read_proc_stat(child)) {
      children.emplace(stat->ppid, ProcessId{child, stat->start_time});
    }
  }
  std::vector<ProcessId> out;
  std::vector<int> frontier{pid};
  while (!frontier.empty()) {
    const int parent = frontier.back();
    frontier.pop_back();
    const auto [begin, end] = children.equal_range(parent);
    for (auto it = begin; it != end; ++it) {
      out.push_back(it->second);
      frontier.push_back(it->second.pid);
    }
  }
  return out;
}

bool still_running(const ProcessId& process) {
  const std::optional<ProcStat> stat = read_proc_stat(process.pid);
  return stat && stat->start_time == process.start_time && stat->state != 'Z' && stat->state != 'X';
}

Result<std::string> find_program(std::string_view program, std::string_view search_path) {
  if (program.find('/') != std::string_view::npos) {
    if (::access(std::string(program).c_str(), X_OK) == 0) return std::string(program);
    return Status::not_found(fmt::format("{}: not found or not executable", program));
  }
  for (const std::string_view directory : split(search_path, ':')) {
    const std::string candidate = fmt::format("{}/{}", directory.empty() ? "." : directory, program);
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return Status::not_found(fmt::format("{}: not found on PATH", program));
}

Result<ProcessOutput> run_process(std::span<const std::string> argv) {
  ZINF_CHECK(!argv.empty(), "run_process needs argv[0]");
  Pipe out_pipe;
  Pipe err_pipe;
  ZINF_RETURN_IF_ERROR(out_pipe.open());
  ZINF_RETURN_IF_ERROR(err_pipe.open());
  SpawnActions actions;
  if (!actions.ok() || ::posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0) != 0 ||
      ::posix_spawn_file_actions_adddup2(actions.get(), out_pipe.write_fd, STDOUT_FILENO) != 0 ||
      ::posix_spawn_file_actions_adddup2(actions.get(), err_pipe.write_fd, STDERR_FILENO) != 0) {
    return Status::io_error(fmt::format("{}: cannot set up the child's output", argv[0]));
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));  // NOLINT: posix_spawn's signature
  args.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, argv[0].c_str(), actions.get(), nullptr, args.data(), environ);
  if (spawned != 0) return Status::io_error(fmt::format("{}: cannot start: {}", argv[0], std::strerror(spawned)));
  out_pipe.close_write();
  err_pipe.close_write();

  ProcessOutput output;
  std::array<pollfd, 2> fds{pollfd{out_pipe.read_fd, POLLIN, 0}, pollfd{err_pipe.read_fd, POLLIN, 0}};
  std::array<std::string*, 2> sinks{&output.out, &output.err};
  std::array<char, 65536> chunk{};
  int open_streams = 2;
  while (open_streams > 0) {
    const int ready = ::poll(fds.data(), fds.size(), -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;  // cannot happen with valid fds; fall through to waitpid so no zombie is left
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, chunk.data(), chunk.size());
      if (n > 0) {
        sinks[i]->append(chunk.data(), static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;  // end of stream (or a read error): stop polling it
        --open_streams;
      }
    }
  }
  int wait_status = 0;
  while (::waitpid(pid, &wait_status, 0) < 0) {
    if (errno != EINTR) return Status::io_error(fmt::format("{}: waitpid: {}", argv[0], std::strerror(errno)));
  }
  if (WIFEXITED(wait_status)) {
    output.exit_status = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    output.exit_status = 128 + WTERMSIG(wait_status);
  }
  return output;
}

}  // namespace zinf::cli
