// Child processes for the benchmarks' baselines (fio, PyTorch): find a program on PATH, run it with
// its output captured. POSIX only (posix_spawn); no shell is involved, so arguments need no quoting.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "libengine/core/status.h"

namespace zinf::probes {

// The first executable `program` in the ':'-separated `search_path` (the value of PATH); empty
// entries mean the current directory. NotFound when there is none.
Result<std::string> find_program(std::string_view program, std::string_view search_path);

struct ProcessOutput {
  int exit_status = -1;  // exit code, or 128 + signal number when killed by a signal
  std::string out;
  std::string err;
};

// Runs argv[0] (a path, not searched) with argv, the current environment, stdin from /dev/null,
// and stdout/stderr captured. Blocks until the child exits. IoError when it cannot be started.
Result<ProcessOutput> run_process(std::span<const std::string> argv);

}  // namespace zinf::probes
