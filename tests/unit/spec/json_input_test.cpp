#include "libengine/spec/json_input.h"

#include "tests/catch.h"

namespace zinf::spec {
namespace {

TEST_CASE("malformed JSON reports file, line and column") {
  const auto result = parse_json_text("{\n  \"a\": 1,\n  \"b\": ,\n}", "profile.json");
  REQUIRE_FALSE(result.is_ok());
  CHECK(result.status().message().find("profile.json:3:") == 0);
  CHECK(result.status().message().find("malformed JSON") != std::string::npos);
}

TEST_CASE("missing file is NotFound naming the path") {
  const auto result = read_json_file("/nonexistent/zinf/profile.json");
  REQUIRE_FALSE(result.is_ok());
  CHECK(result.status().code() == ErrorCode::kNotFound);
  CHECK(result.status().message() == "/nonexistent/zinf/profile.json: no such file");
}

TEST_CASE("typed getters name the dotted path") {
  const nlohmann::json doc = nlohmann::json::parse(R"({"node": {"gpus": -2, "memory": "80GiB", "bw": "12GB/s",
      "name": 3, "flag": "yes", "nvme": 0, "mem2": 1024}})");
  const JsonObject root = JsonObject::wrap(doc, "hw").value();
  const JsonObject node = root.object("node").value();
  CHECK(node.path() == "hw.node");
  CHECK(node.positive_int("gpus").status().message() == "hw.node.gpus: expected a positive integer, found -2 (number)");
  CHECK(node.bytes("memory").value() == 80ULL << 30);
  CHECK(node.bytes("mem2").value() == 1024);
  CHECK(node.bandwidth("bw").value() == 12e9);
  CHECK(node.string("name").status().message() == "hw.node.name: expected a string, found 3 (number)");
  CHECK(node.optional_bool("flag").status().message().find("hw.node.flag: expected true or false") == 0);
  CHECK(node.bytes("nvme", /*zero_allowed=*/true).value() == 0);
  CHECK_FALSE(node.bytes("nvme").is_ok());
  CHECK(node.bytes("absent").status().message() == "hw.node.absent: required field is missing");
  CHECK(root.object("missing").status().message() == "hw.missing: required field is missing");
}

TEST_CASE("unknown keys are rejected with a suggestion") {
  const nlohmann::json doc = nlohmann::json::parse(R"({"gpus": 8, "cpu_memroy": "2TB"})");
  const JsonObject node = JsonObject::wrap(doc, "hw.node").value();
  const Status status = node.reject_unknown_keys({"gpus", "cpu_memory", "gpu"});
  CHECK(status.message().find("hw.node.cpu_memroy: unknown field (did you mean 'cpu_memory'?)") == 0);
  CHECK(closest_match("zzzzzz", {"gpus", "gpu"}) == std::nullopt);
}

}  // namespace
}  // namespace zinf::spec
