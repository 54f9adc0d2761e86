// The zinf command line: builds the CLI11 app with every subcommand, parses, runs, and maps the
// outcome to an exit code (exit_codes.h). Errors are printed as one line: "error: <message>".
#pragma once

#include <iosfwd>

#include "apps/zinf/subcommand.h"

namespace zinf::cli {

// `io.out`/`io.err` receive all output. Never calls exit().
int run_cli(int argc, const char* const* argv, const Io& io);

// Prints `message` as the CLI's one error line ("error: ...", newlines and control characters
// escaped) on io.err. run_cli does this for a failed subcommand; a subcommand calls it itself only
// where it must print before returning (rank 0 of ranks that failed together).
void print_error(const Io& io, const std::string& message);

// How the real process should present itself: stdout a TTY? NO_COLOR/TERM=dumb? terminal width.
Io process_io(std::ostream& out, std::ostream& err);

}  // namespace zinf::cli
