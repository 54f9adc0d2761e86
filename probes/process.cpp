#include "probes/process.h"

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
#include <vector>

#include "libengine/core/check.h"
#include "libengine/core/split.h"

extern char** environ;  // NOLINT: POSIX, for posix_spawn

namespace zinf::probes {
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

}  // namespace

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

}  // namespace zinf::probes
