#include "apps/zinf/cli.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "apps/zinf/cmd_eval.h"
#include "apps/zinf/exit_codes.h"
#include "apps/zinf/stdout_terminal.h"
#include "libengine/comm/communicator_factory.h"
#include "libengine/core/build_info.h"

namespace zinf::cli {
namespace {

std::string version_text() {
  const BuildInfo& info = build_info();
  std::string features;
  for (const BuildFeature& feature : info.features) {
    features += fmt::format("{}{} {}{}", features.empty() ? "" : ", ", feature.name, feature.enabled ? "on" : "off",
                            feature.enabled && !feature.detail.empty() ? fmt::format(" ({})", feature.detail) : "");
  }
  return fmt::format("zinf {} (git {}, {} build, {})\nfeatures: {}", info.version, info.git_sha, info.build_type,
                     info.compiler, features);
}

// CLI11 messages can span lines; the contract is one line per error. Messages quote what the user
// gave, so other control characters (an escape sequence in a profile name) are shown as \xNN
// rather than sent to the terminal.
std::string one_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += ' ';
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

void print_error(const Io& io, const std::string& message) { io.err << "error: " << one_line(message) << '\n'; }

Io process_io(std::ostream& out, std::ostream& err) {
  const bool tty = stdout_reaches_terminal(::isatty(STDOUT_FILENO) == 1, [](std::string_view name) {
    const char* value = std::getenv(std::string(name).c_str());
    return value == nullptr ? std::nullopt : std::optional<std::string>(value);
  });
  const char* no_color = std::getenv("NO_COLOR");
  const char* term = std::getenv("TERM");
  const bool color_allowed =
      (no_color == nullptr || no_color[0] == '\0') && !(term != nullptr && std::string(term) == "dumb");
  int width = 100;
  winsize size{};
  if (tty && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col >= 40) width = size.ws_col;
  return Io{out, err, tty, ::isatty(STDERR_FILENO) == 1, color_allowed, width};
}

int run_cli(int argc, const char* const* argv, const Io& io) {
  CLI::App app{"zinf: plan, train and benchmark models larger than GPU memory (ZeRO-Infinity)", "zinf"};
  app.set_version_flag("--version", version_text(), "Print version, git SHA and build features, then exit");
  app.require_subcommand(1);
  app.get_formatter()->column_width(34);
  app.footer(
      "Examples:\n"
      "  zinf plan --params 1T --hw dgx2-v100\n"
      "  zinf plan --max-params --hw dgx2-v100 --nodes 1\n"
      "  zinf plan --sweep params=1B..100T --nodes 1,2,4,8,16,32,64 --format csv\n"
      "  zinf hw list\n"
      "  zinf bench io --path /mnt/nvme0 --path /mnt/nvme1 --size 16GiB --fio\n"
      "  zinf train scenarios/quickstart.json\n"
      "  zinf report runs/quickstart/record.json --out report.html\n"
      "  zinf compare base.json new.json --threshold 5%\n"
      "  zinf checkpoint verify runs/quickstart/checkpoints\n"
      "Exit codes: 0 ok, 1 runtime failure, 2 bad input, 3 regression found (compare).");

  std::vector<std::unique_ptr<Subcommand>> commands;
  commands.push_back(add_plan_command(app));
  commands.push_back(add_hw_command(app));
  commands.push_back(add_bench_command(app));
  commands.push_back(add_train_command(app));
  commands.push_back(add_report_command(app));
  commands.push_back(add_compare_command(app));
  commands.push_back(add_checkpoint_command(app));
  commands.push_back(add_export_command(app));
  commands.push_back(add_eval_command(app));

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, io.out, io.err);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e, io.out, io.err);
  } catch (const CLI::CallForVersion& e) {
    io.out << e.what() << '\n';
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    // Name the deepest subcommand given ("zinf bench io --help", not "zinf bench --help").
    std::string path = "zinf";
    for (const CLI::App* level = &app;;) {
      const std::vector<CLI::App*> chosen = level->get_subcommands();
      if (chosen.empty()) break;
      level = chosen.front();
      path += " " + level->get_name();
    }
    const std::string help = path + " --help";
    print_error(io, fmt::format("{} (see {})", e.what(), help));
    return kExitBadInput;
  }

  // Exactly one subcommand was parsed (require_subcommand(1)); find its runner.
  const std::vector<CLI::App*> all = app.get_subcommands({});
  for (std::size_t i = 0; i < all.size() && i < commands.size(); ++i) {
    if (!all[i]->parsed()) continue;
    Status status;
    Io run_io = io;
    run_io.started = reports::snapshot_conditions();
    try {
      status = commands[i]->run(run_io);
    } catch (const std::bad_alloc&) {
      status = Status::out_of_memory("ran out of host memory");
    }
    if (!status.is_ok()) {
      print_error(io, status.message());
      // Under mpirun a failed rank must not wait in MPI_Finalize for peers that wait for it.
      comm::end_job_with_failure(exit_code_for(status));
      return exit_code_for(status);
    }
    return commands[i]->delegated_exit_code().value_or(commands[i]->exit_code_on_success());
  }
  print_error(io, "no subcommand given (see zinf --help)");
  return kExitBadInput;
}

}  // namespace zinf::cli
