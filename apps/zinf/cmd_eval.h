// `zinf eval` (cmd_eval.cpp): registered by cli.cpp like the commands subcommand.h lists.
#pragma once

#include <memory>

#include "apps/zinf/subcommand.h"

namespace zinf::cli {

std::unique_ptr<Subcommand> add_eval_command(CLI::App& app);

}  // namespace zinf::cli
