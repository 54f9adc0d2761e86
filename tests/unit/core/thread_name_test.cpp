// name_this_thread: the name tools show for a thread, cut to Linux's 15 bytes.
#include "libengine/core/thread_name.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include "tests/catch.h"

namespace zinf {
namespace {

// The calling thread's name as /proc shows it.
std::string proc_name() {
  std::ifstream comm("/proc/self/task/" + std::to_string(::syscall(SYS_gettid)) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

TEST_CASE("name_this_thread names the calling thread only, cut to 15 bytes") {
  std::string inside, cut;
  const std::string before = proc_name();
  std::thread([&] {
    name_this_thread("zinf-h2d");
    inside = proc_name();
    name_this_thread("zinf-a-name-longer-than-fifteen");
    cut = proc_name();
  }).join();
  CHECK(inside == "zinf-h2d");
  CHECK(cut == "zinf-a-name-lon");
  CHECK(proc_name() == before);  // the caller's own name is untouched
}

}  // namespace
}  // namespace zinf
