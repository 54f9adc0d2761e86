// SwapStore cleanup after a signal: a store's swap files have no name from the moment they are
// opened, so a process killed by SIGINT, SIGTERM or SIGKILL leaves nothing behind, and the blocks it
// reserved come back once it has died.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "libengine/io/swap_file.h"
#include "libengine/io/swap_store.h"
#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::io {
namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;

// Bytes of the blocks that process `pid` holds in open files without a name (link count 0) on the
// file system of `directory`. Read from /proc/<pid>/fd, so it is exact whatever other processes
// write or delete on that file system meanwhile (CTest runs other swap store tests beside this one,
// and free space measured with statvfs moved by theirs).
std::uint64_t unlinked_bytes_held(pid_t pid, const std::string& directory) {
  struct stat where {};
  REQUIRE(::stat(directory.c_str(), &where) == 0);
  std::uint64_t total = 0;
  const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& entry : std::filesystem::directory_iterator(fds)) {
    struct stat file {};
    // stat() follows the fd's link to the open file itself, named or not.
    if (::stat(entry.path().c_str(), &file) != 0) continue;
    if (S_ISREG(file.st_mode) && file.st_nlink == 0 && file.st_dev == where.st_dev) {
      total += static_cast<std::uint64_t>(file.st_blocks) * 512;
    }
  }
  return total;
}

double free_bytes(const std::string& directory) {
  const Result<std::uint64_t> free = free_space_bytes(directory);
  REQUIRE(free.is_ok());
  return static_cast<double>(*free);
}

}  // namespace

TEST_CASE("SwapStore's files vanish when the process is killed by a signal", "[swap_store][signal]") {
  for (int signal_number : {SIGINT, SIGTERM, SIGKILL}) {
    DYNAMIC_SECTION("signal " << signal_number) {
      testing::TempDir dir;
      int ready[2];
      REQUIRE(::pipe(ready) == 0);
      const std::uint64_t planned = 512 * kMiB;
      const pid_t child = ::fork();
      REQUIRE(child >= 0);
      if (child == 0) {
        // Child: open a store that reserves `planned` bytes, write into it, say so, wait to be killed.
        // The test runner's own signal handlers came along with fork(); a zinf process has none.
        ::signal(SIGINT, SIG_DFL);
        ::signal(SIGTERM, SIG_DFL);
        ::close(ready[0]);
        SwapStoreOptions options;
        options.paths = {dir.path()};
        options.planned_bytes = planned;
        options.block_bytes = kMiB;
        options.queue_depth = 4;
        Result<std::unique_ptr<SwapStore>> store = SwapStore::open(options);
        if (!store.is_ok()) ::_exit(3);
        std::vector<std::byte> data(4 * kMiB, std::byte{1});
        Result<Ticket> t = (*store)->write(data);
        if (!t.is_ok() || !(*store)->wait(*t).is_ok()) ::_exit(4);
        const char ok = 'k';
        if (::write(ready[1], &ok, 1) != 1) ::_exit(5);
        for (;;) ::pause();
      }
      ::close(ready[1]);
      char got = 0;
      REQUIRE(::read(ready[0], &got, 1) == 1);
      ::close(ready[0]);
      // While the child lives: its swap files hold the reserved blocks and have no name.
      const std::uint64_t held = unlinked_bytes_held(child, dir.path());
      const double free_during = free_bytes(dir.path());
      CHECK(held >= planned);
      CHECK(std::filesystem::is_empty(dir.path()));
      REQUIRE(::kill(child, signal_number) == 0);
      int wstatus = 0;
      REQUIRE(::waitpid(child, &wstatus, 0) == child);
      CHECK(WIFSIGNALED(wstatus));
      CHECK(WTERMSIG(wstatus) == signal_number);
      CHECK(std::filesystem::is_empty(dir.path()));
      // The blocks come back once it has died. The kernel tears down a dead process's io_uring
      // (which holds the registered files) in a worker, so they return shortly after waitpid(), not
      // at once: poll for up to 10 s. Other processes may write to this file system meanwhile, so
      // half of what the child held is enough, seen once.
      const double margin = 0.5 * static_cast<double>(held);
      double returned = 0;
      for (int i = 0; i < 1000; ++i) {
        returned = free_bytes(dir.path()) - free_during;
        if (returned > margin) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      INFO("held " << held << " bytes, " << returned << " came back");
      CHECK(returned > margin);
    }
  }
}

}  // namespace zinf::io
