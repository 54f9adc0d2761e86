#include "libengine/spec/json_input.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/catch.h"
#include "tests/temp_dir.h"

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

// Issue 15, defect 1: a number no double holds aborted the process from inside nlohmann (an
// uncaught out_of_range), wherever it stood in the file.
TEST_CASE("numbers a double cannot hold are one error line naming where they are") {
  for (const std::string& text : {std::string(R"({"batch": 1e400})"), std::string(R"({"x": {"y": [1, -1e999]}})"),
                                  R"({"n": )" + std::string(400, '7') + "}"}) {
    INFO(text.substr(0, 60));
    const auto result = parse_json_text(text, "s.json");
    REQUIRE_FALSE(result.is_ok());
    CHECK(result.status().code() == ErrorCode::kInvalidArgument);
    CHECK(result.status().message().rfind("s.json:1:", 0) == 0);
    CHECK(result.status().message().find("is out of range") != std::string::npos);
    CHECK(result.status().message().size() < 200);
  }
  CHECK(parse_json_text(R"({"batch": 1e400})", "s.json").status().message().find("batch: number 1e400") !=
        std::string::npos);
  CHECK(parse_json_text(R"({"x": {"y": [1, -1e999]}})", "s.json").status().message().find("x.y[1]: number") !=
        std::string::npos);
  CHECK(parse_json_text(R"({"big": 1e308, "tiny": 1e-400})", "s.json").is_ok());  // finite (or 0) is fine
}

// Issue 15, defect 2: ~70,000 levels of nesting overflowed the stack when an error message dumped
// the value. Depth is bounded at parse time.
TEST_CASE("deeply nested JSON is refused at parse time, with its line and column") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const auto result = parse_json_text(deep, "deep.json");
  REQUIRE_FALSE(result.is_ok());
  CHECK(result.status().message() == "deep.json:1:65: JSON nested deeper than 64 levels of arrays and objects");
  const std::string under_key = R"({"name": )" + std::string(70000, '[');
  CHECK(parse_json_text(under_key, "s.json").status().message().find("nested deeper than 64") != std::string::npos);
  const std::string ok_depth = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  CHECK(parse_json_text(ok_depth, "ok.json").is_ok());
}

TEST_CASE("a value is described in at most 40 characters, however large it is") {
  nlohmann::json big = nlohmann::json::array();
  for (int i = 0; i < 100000; ++i) big.push_back(i);
  CHECK(describe_json_value(big) == big.dump().substr(0, 37) + "... (array)");  // what dump() would start with
  CHECK(describe_json_value(nlohmann::json(std::string(1 << 20, 'x'))).size() < 60);
  CHECK(describe_json_value(nlohmann::json("a\x1b[31m")) == R"("a\u001b[31m" (string))");
  CHECK(describe_json_value(nlohmann::json::parse("[[1,2],{}]")) == "[[1,2],{}] (array)");
}

// Issue 15, defect 11: a key given twice silently kept the last value.
TEST_CASE("duplicate keys are refused, naming the key and the object") {
  CHECK(parse_json_text(R"({"a": 1, "a": 2})", "x.json").status().message() ==
        R"(x.json: key "a" appears twice in one object (at the top level); each key may appear once)");
  CHECK(parse_json_text(R"({"node": {"gpu": {"name": "a", "name": "b"}}})", "x.json").status().message() ==
        R"(x.json: key "name" appears twice in one object (in node.gpu); each key may appear once)");
  CHECK(parse_json_text(R"([{"a": 1}, {"a": 2}])", "x.json").is_ok());  // same key in two objects is fine
  // Found by the deepspeed_config fuzz target: a key holding a newline split the one-line error.
  CHECK(parse_json_text(R"({"ac\nb": {"x": 1, "x": 2}})", "x.json").status().message() ==
        R"(x.json: key "x" appears twice in one object (in ac\u000ab); each key may appear once)");
  CHECK(parse_json_text(R"({"a\tb": 1e999})", "x.json").status().message().find(R"(a\u0009b: number 1e999)") !=
        std::string::npos);
}

// Issue 15, defects 6 and 11: /dev/zero and /dev/urandom were read until memory ran out, and a
// directory was reported as malformed JSON.
TEST_CASE("input files must be regular files of sane size") {
  zinf::testing::TempDir dir;
  CHECK(read_json_file(dir.path()).status().message() == dir.path() + ": is a directory; expected a file");
  CHECK(read_json_file("/dev/zero").status().message() ==
        "/dev/zero: is a character device, not a regular file; expected a file");
  CHECK(read_json_file("/dev/urandom").status().code() == ErrorCode::kInvalidArgument);
  const std::string fifo = dir.path() + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(read_json_file(fifo).status().message() == fifo + ": is a FIFO, not a regular file; expected a file");
  const std::string huge = dir.path() + "/huge.json";
  std::ofstream(huge).close();
  std::filesystem::resize_file(huge, (std::uint64_t{16} << 20) + 1);  // sparse
  CHECK(read_json_file(huge).status().message() == huge + ": is 16.0 MiB; input files are limited to 16.0 MiB");
  // A /proc file reports size 0 but has contents: read (bounded) and parsed, not trusted.
  CHECK(read_json_file("/proc/self/status").status().message().find("malformed JSON") != std::string::npos);
}

TEST_CASE("printable strings refuse control characters") {
  const nlohmann::json doc = nlohmann::json::parse(R"({"name": "x\u001b[2J", "ok": "GPU 80GB"})");
  const JsonObject root = JsonObject::wrap(doc, "hw").value();
  CHECK(root.printable_string("ok").value() == "GPU 80GB");
  CHECK(root.printable_string("name").status().message() ==
        R"(hw.name: "x\u001b[2J" (string) holds a control character (0x1b at byte 1); expected printable text)");
}

// Issue 15 (found by the fuzz targets): an unknown key was echoed raw (newlines, megabytes) and a
// long one made the "did you mean" search quadratic in its length.
TEST_CASE("an unknown key from a file is quoted when it is not a short printable word") {
  const nlohmann::json doc = {{"gpus", 8}, {"bad\nkey", 1}};
  const JsonObject node = JsonObject::wrap(doc, "hw.node").value();
  CHECK(node.reject_unknown_keys({"gpus"}).message() == "hw.node.'bad\\x0akey': unknown field; allowed: gpus");
  const nlohmann::json huge = {{std::string(1 << 20, 'g'), 1}};
  const std::string message = JsonObject::wrap(huge, "hw").value().reject_unknown_keys({"gpus"}).message();
  CHECK(message.size() < 200);
  CHECK(closest_match(std::string(1000, 'g'), {"gpus"}) == std::nullopt);
}

}  // namespace
}  // namespace zinf::spec
