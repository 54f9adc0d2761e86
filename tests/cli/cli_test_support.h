// What the CLI test binaries share: running the zinf CLI in-process as a shell would ("zinf" +
// args) and capturing what it printed and its exit code, the one-line usage-error check, and
// reading files and fixtures.
#pragma once

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/zinf/cli.h"
#include "tests/catch.h"

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
  const Io io{out, err, terminal, terminal, color_allowed, 120};
  Outcome outcome;
  outcome.code = run_cli(static_cast<int>(argv.size()), argv.data(), io);
  outcome.out = out.str();
  outcome.err = err.str();
  return outcome;
}

// Bad input: exit 2, nothing on stdout and exactly one line on stderr, "error: ..." containing
// `needle`.
inline void check_usage_error(const Outcome& o, const std::string& needle) {
  INFO("stderr: " << o.err);
  CHECK(o.code == 2);
  CHECK(o.err.rfind("error: ", 0) == 0);
  CHECK(o.err.find(needle) != std::string::npos);
  CHECK(std::count(o.err.begin(), o.err.end(), '\n') == 1);
  CHECK(o.out.empty());
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The loss of every step of a `zinf train` run record.
inline std::vector<double> losses_of(const nlohmann::json& record) {
  std::vector<double> losses;
  for (const nlohmann::json& step : record.at("steps")) losses.push_back(step.at("loss").get<double>());
  return losses;
}

inline std::string fixture(const std::string& name) { return std::string(ZINF_FIXTURES_DIR) + "/" + name; }

}  // namespace zinf::cli::test_support
