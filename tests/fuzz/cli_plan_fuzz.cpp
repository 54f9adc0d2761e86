// Fuzz target: the `zinf plan` and `zinf hw show` command lines, run in process exactly as the
// binary runs them. Each line of the input is one argument after "zinf plan" (or after "zinf hw
// show" when the first line is "hw"). Arguments that would write files (--out) or run long sweeps
// (--sweep, ranges) are dropped: this target is about what a user can type, not about disk or time.
// Invariants: exit 0, 2 or 4 only (1 would be a runtime failure, which planning has none of; 4 is a
// plan that does not fit, printed like a feasible one); exit 2 is exactly one "error: " line on
// stderr and nothing on stdout; exits 0 and 4 print no "inf" or "nan" figure and no control
// character.
#include <sstream>
#include <string>
#include <vector>

#include "apps/zinf/cli.h"
#include "tests/fuzz/fuzz_target.h"

using zinf::fuzz::fuzz_fail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;
  std::vector<std::string> args{"zinf", "plan"};
  std::string current;
  const auto flush = [&]() {
    if (args.size() == 2 && args[1] == "plan" && current == "hw") {
      args = {"zinf", "hw", "show"};
    } else {
      args.push_back(current);
    }
    current.clear();
  };
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      flush();
    } else {
      current.push_back(static_cast<char>(data[i]));
    }
  }
  flush();
  for (const std::string& arg : args) {
    if (arg.find("--out") != std::string::npos || arg.find("--sweep") != std::string::npos ||
        arg.find("..") != std::string::npos || arg.find(std::string("\0", 1)) != std::string::npos) {
      return 0;
    }
  }
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  std::ostringstream out;
  std::ostringstream err;
  const zinf::cli::Io io{out, err, false, false, true, 100};
  const int code = zinf::cli::run_cli(static_cast<int>(argv.size()), argv.data(), io);
  const std::string stdout_text = out.str();
  const std::string stderr_text = err.str();
  if (code == 2) {
    if (stderr_text.rfind("error: ", 0) != 0) fuzz_fail("exit 2 without an error line", size);
    if (stderr_text.find('\n') != stderr_text.size() - 1)
      fuzz_fail("an error of more than one line: " + stderr_text, size);
    if (!stdout_text.empty()) fuzz_fail("exit 2 with output on stdout", size);
    return 0;
  }
  if (code != 0 && code != 4) fuzz_fail("exit " + std::to_string(code) + ": " + stderr_text, size);
  if (zinf::fuzz::has_non_finite_word(stdout_text)) {
    fuzz_fail("a non-finite figure printed with exit " + std::to_string(code), size);
  }
  for (const char c : stdout_text + stderr_text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\n' && c != '\t') || byte == 0x7f) fuzz_fail("a control character printed", size);
  }
  return 0;
}
