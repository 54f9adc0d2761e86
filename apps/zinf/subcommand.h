// Subcommand: what every `zinf <name>` implements. A subcommand registers its options on a CLI11
// app it owns (binding them to its own members), and after parsing, run() does the work and
// returns a Status; cli.cpp turns that Status into the exit code and the one-line error.
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>

#include "libengine/core/status.h"
#include "reports/run_conditions.h"

namespace zinf::cli {

// Where a subcommand writes. Tests pass string streams; main() passes std::cout/std::cerr.
struct Io {
  std::ostream& out;
  std::ostream& err;
  bool out_is_terminal = false;  // stdout is a TTY (decides color)
  bool err_is_terminal = false;  // stderr is a TTY (decides progress bars vs plain lines)
  bool color_allowed = true;     // false under NO_COLOR or TERM=dumb
  int terminal_width = 100;
  // The machine's load and CPU times when the command started (run_cli takes it just before run()):
  // every record's "conditions" measures from here. Not taken: those values are null.
  reports::ConditionsSnapshot started{};
};

class Subcommand {
 public:
  virtual ~Subcommand() = default;
  // Runs after a successful parse. InvalidArgument/NotFound mean bad input (exit 2), anything
  // else a runtime failure (exit 1).
  virtual Status run(const Io& io) = 0;
  // The exit code after run() succeeded: 0, or kExitRegression when `zinf compare` found one.
  virtual int exit_code_on_success() const { return 0; }
  // When run() returned ok but the process must still exit non-zero with its error already printed:
  // the work went to child processes (--ranks: mpirun and its ranks; their exit status), or the
  // ranks of a job failed together and rank 0 printed the one error. nullopt otherwise.
  virtual std::optional<int> delegated_exit_code() const { return std::nullopt; }
};

// One factory per cmd_<name>.cpp. Each adds its subcommand to `app` and returns the object that
// owns the subcommand's options; it must outlive parsing.
std::unique_ptr<Subcommand> add_plan_command(CLI::App& app);
std::unique_ptr<Subcommand> add_hw_command(CLI::App& app);
std::unique_ptr<Subcommand> add_bench_command(CLI::App& app);
std::unique_ptr<Subcommand> add_train_command(CLI::App& app);
std::unique_ptr<Subcommand> add_report_command(CLI::App& app);
std::unique_ptr<Subcommand> add_compare_command(CLI::App& app);
std::unique_ptr<Subcommand> add_checkpoint_command(CLI::App& app);
std::unique_ptr<Subcommand> add_export_command(CLI::App& app);

}  // namespace zinf::cli
