// run_zinf: runs the zinf CLI in-process, as a shell would ("zinf" + args), and captures what it
// printed and its exit code. Shared by the CLI test binaries.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "apps/zinf/cli.h"

namespace zinf::cli::test_support {

struct Outcome {
  int code = -1;
  std::string out;
  std::string err;
};

inline Outcome run_zinf(const std::vector<std::string>& args, bool terminal = false, bool color_allowed = true) {
  std::vector<std::string> storage{"zinf"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<const char*> argv;
  for (const std::string& a : storage) argv.push_back(a.c_str());
  std::ostringstream out;
  std::ostringstream err;
  const Io io{out, err, terminal, color_allowed, 120};
  Outcome outcome;
  outcome.code = run_cli(static_cast<int>(argv.size()), argv.data(), io);
  outcome.out = out.str();
  outcome.err = err.str();
  return outcome;
}

}  // namespace zinf::cli::test_support
