#include "libengine/core/split.h"

#include <string_view>
#include <vector>

#include "tests/catch.h"

namespace zinf {
namespace {

using Items = std::vector<std::string_view>;

TEST_CASE("split keeps every item, empty ones included") {
  CHECK(split("1,2,4", ',') == Items{"1", "2", "4"});
  CHECK(split("params=nvme", ',') == Items{"params=nvme"});
  CHECK(split("1,,2", ',') == Items{"1", "", "2"});
  CHECK(split("1,", ',') == Items{"1", ""});
  CHECK(split("", ',') == Items{""});
}

}  // namespace
}  // namespace zinf
