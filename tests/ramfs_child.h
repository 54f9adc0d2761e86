// run_in_ramfs_child: a check run in a forked child that mounted ramfs — a file system that refuses
// O_DIRECT on every kernel (tmpfs accepts it since Linux 6.6) — in a private mount namespace, so
// nothing is mounted outside the child. Mounting needs CAP_SYS_ADMIN: where it is refused the result
// says so and the caller skips its check with a warning. Shared by the swap store's and bench io's
// O_DIRECT tests.
#pragma once

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <stdexcept>
#include <string>

namespace zinf::testing {

struct RamfsChildResult {
  bool mounted = false;  // false: this machine refused the mount, nothing ran
  int exit_code = 0;     // what `body` returned
  std::string report;    // what `body` wrote to its descriptor
};

// Creates the directory `mount_point` (inside a TempDir), forks, and in the child mounts ramfs there
// and runs `body(report_fd)`, exiting with what it returns (77 is taken: "not mounted"). The parent
// reads what the child writes to report_fd until it exits and waits for it. Throws
// std::runtime_error when mkdir, pipe, fork or waitpid fail or the child does not exit normally.
inline RamfsChildResult run_in_ramfs_child(const std::string& mount_point, const std::function<int(int)>& body) {
  if (::mkdir(mount_point.c_str(), 0700) != 0) throw std::runtime_error("mkdir " + mount_point + " failed");
  int report[2];
  if (::pipe(report) != 0) throw std::runtime_error("pipe failed");
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error("fork failed");
  if (child == 0) {
    ::close(report[0]);
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("ramfs", mount_point.c_str(), "ramfs", 0, nullptr) != 0) {
      ::_exit(77);
    }
    ::_exit(body(report[1]));
  }
  ::close(report[1]);
  RamfsChildResult result;
  char chunk[256];
  for (ssize_t n; (n = ::read(report[0], chunk, sizeof chunk)) > 0;) {
    result.report.append(chunk, static_cast<std::size_t>(n));
  }
  ::close(report[0]);
  int wstatus = 0;
  if (::waitpid(child, &wstatus, 0) != child) throw std::runtime_error("waitpid failed");
  if (!WIFEXITED(wstatus)) throw std::runtime_error("the ramfs child did not exit normally");
  result.exit_code = WEXITSTATUS(wstatus);
  result.mounted = result.exit_code != 77;
  return result;
}

}  // namespace zinf::testing
