// zinf: the command-line entry point. Everything happens in cli.cpp so tests can run it in-process.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string_view>

#include "apps/zinf/cli.h"

namespace {

// OpenMP threads that finish a parallel region spin before they sleep (libgomp: 300,000 spins by
// default). On a machine whose cores other jobs share, a spinning thread takes the core the
// thread it waits for needs: the 500-step quickstart ran 2.5x slower with 2 threads than with 1
// under load. libgomp reads OMP_WAIT_POLICY once, when it is loaded, so the policy cannot be set
// from here for this process: when the user set neither it nor GOMP_SPINCOUNT, zinf sets
// OMP_WAIT_POLICY=passive and runs itself again (a few milliseconds, once). OpenBLAS's OpenMP build
// shares the same pool and policy. ZINF_NO_REEXEC marks the second run (and stops a loop).
// Only the commands that run compute threads (train, bench, hw probe) pay for the second start:
// plan, report, compare and checkpoint run none, and start no process that does. zinf takes no
// option before its subcommand other than --help/--version, so argv[1] names it.
void prefer_passive_openmp_wait(int argc, char** argv) {
  if (argc < 2) return;
  const std::string_view command = argv[1];
  if (command != "train" && command != "bench" && command != "hw") return;
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr ||
      std::getenv("ZINF_NO_REEXEC") != nullptr) {
    return;
  }
  if (::setenv("OMP_WAIT_POLICY", "passive", 1) != 0 || ::setenv("ZINF_NO_REEXEC", "1", 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  // exec failed (no /proc): run on with the library's default policy.
  ::unsetenv("OMP_WAIT_POLICY");
}

}  // namespace

int main(int argc, char** argv) {
  prefer_passive_openmp_wait(argc, argv);
  const zinf::cli::Io io = zinf::cli::process_io(std::cout, std::cerr);
  const int code = zinf::cli::run_cli(argc, argv, io);
  std::cout.flush();
  return code;
}
