// Whether a zinf process's stdout reaches the user's terminal, which decides colour (output.h).
// Under a launcher a rank's stdout is not the user's: Open MPI's mpirun hands its ranks a
// pseudo-terminal whatever its own stdout is, so isatty() says "terminal" for a run redirected to a
// file. The rank spawner (`--ranks N`) tells its ranks what its own stdout is.
#pragma once

#include "libengine/comm/launch_info.h"

namespace zinf::cli {

// Set by the rank spawner (`--ranks N`) in its ranks' environment: "1" when the spawner's own stdout
// is a terminal, "0" otherwise.
inline constexpr const char* kStdoutTerminalEnv = "ZINF_STDOUT_IS_TERMINAL";

// `stdout_isatty` for a process started directly; under a launcher (comm::LaunchInfo) only what
// kStdoutTerminalEnv says, and no terminal without it (a plain `mpirun ... > file` cannot be told
// from a terminal, and escape codes in a file are worse than a plain table on a terminal).
// Thread-safe when `env` is.
bool stdout_reaches_terminal(bool stdout_isatty, const comm::EnvLookup& env);

}  // namespace zinf::cli
