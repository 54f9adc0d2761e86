// Reading a record from tests/fixtures/reports/ for the reports tests.
#pragma once

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/catch.h"

namespace zinf::reports::test {

inline nlohmann::json fixture(const std::string& name) {
  std::ifstream in(std::string(ZINF_FIXTURES_DIR) + "/reports/" + name);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

}  // namespace zinf::reports::test
