// stdout_reaches_terminal (stdout_terminal.h).
#include "apps/zinf/stdout_terminal.h"

#include <optional>
#include <string>

namespace zinf::cli {

bool stdout_reaches_terminal(bool stdout_isatty, const comm::EnvLookup& env) {
  const Result<comm::LaunchInfo> launch = comm::launch_info_from(env);
  // A malformed launcher variable fails the command later, naming it; until then assume a launcher.
  if (launch.is_ok() && !launch->under_launcher()) return stdout_isatty;
  return env(kStdoutTerminalEnv) == std::optional<std::string>("1");
}

}  // namespace zinf::cli
