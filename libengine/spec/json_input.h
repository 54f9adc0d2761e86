// JSON input: reading user-written JSON files (hardware profiles, HF configs, scenarios) with errors
// a person can act on — the file and line of a syntax error, the dotted path of a bad field, what
// type or value was expected. Not a general JSON library: nlohmann::json does the parsing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/core/status.h"

namespace zinf::spec {

// Arrays and objects nested deeper than this are refused: no zinf input needs more than a handful of
// levels, and printing or destroying a value recurses once per level.
inline constexpr std::size_t kMaxJsonDepth = 64;

// Parses `text`. Every failure is one InvalidArgument line starting with `source`, never an
// exception and never a crash, whatever the bytes:
//   syntax      "<source>:<line>:<column>: malformed JSON: <what>"
//   number      "<source>:<line>:<column>: node.gpus: number 1e400 is out of range (...)" (any number
//               a double cannot hold, used by the caller or not)
//   nesting     "<source>:<line>:<column>: JSON nested deeper than 64 levels of arrays and objects"
//   duplicate   "<source>: key "gpus" appears twice in one object (in node); each key may appear once"
// Messages quote at most a few dozen characters of the input.
Result<nlohmann::json> parse_json_text(std::string_view text, std::string_view source);
// Reads (read_input_file: regular files up to 16 MiB only) and parses a file; a missing or
// unreadable file is NotFound/IoError naming the path, a directory, device, FIFO or oversized file
// InvalidArgument naming it.
Result<nlohmann::json> read_json_file(const std::string& path);

// A value as error messages show it: at most 40 characters of its JSON text (control characters
// escaped) and its type, `"8" (string)`, `[1,2,3] (array)`. Cost is bounded by the 40 characters,
// not by the value's size.
std::string describe_json_value(const nlohmann::json& value);

// A view of one JSON object with the dotted path that names it in errors ("hw.node.nvme").
// Getters fail with InvalidArgument naming "<path>.<key>", the value found and what is allowed.
class JsonObject {
 public:
  // Fails when `value` is not an object.
  static Result<JsonObject> wrap(const nlohmann::json& value, std::string path);

  const std::string& path() const { return path_; }
  bool has(std::string_view key) const;
  std::string field_path(std::string_view key) const;

  Result<JsonObject> object(std::string_view key) const;   // required object
  Result<std::string> string(std::string_view key) const;  // required string
  Result<std::optional<std::string>> optional_string(std::string_view key) const;
  // Strings that end up on a terminal (names, descriptions): control characters (bytes below 0x20
  // and 0x7f, e.g. an escape sequence) are refused, naming the first one's position.
  Result<std::string> printable_string(std::string_view key) const;
  Result<std::optional<std::string>> optional_printable_string(std::string_view key) const;
  Result<std::int64_t> positive_int(std::string_view key) const;  // required, >= 1
  Result<std::optional<std::int64_t>> optional_positive_int(std::string_view key) const;
  Result<std::optional<bool>> optional_bool(std::string_view key) const;
  // A finite JSON number (integer or not); absent or null → nullopt.
  Result<std::optional<double>> optional_number(std::string_view key) const;
  // Sizes accept a string with units ("80GiB", "12GB/s") or a bare number in base units.
  Result<std::uint64_t> bytes(std::string_view key, bool zero_allowed = false) const;
  Result<double> bandwidth(std::string_view key) const;
  Result<double> flops(std::string_view key) const;

  // Fails on the first key not in `known`, suggesting the closest known key when one is near.
  Status reject_unknown_keys(const std::vector<std::string_view>& known) const;

  const nlohmann::json& raw() const { return *value_; }

 private:
  JsonObject(const nlohmann::json* value, std::string path) : value_(value), path_(std::move(path)) {}
  Result<const nlohmann::json*> required(std::string_view key) const;

  const nlohmann::json* value_;  // not owned; the document outlives the view
  std::string path_;
};

// The value as a 64-bit integer when it is a JSON integer that fits, else nullopt. Unlike
// nlohmann's get<>(), never converts a float (1e300 into an int64 is undefined behaviour) and never
// wraps a value around.
std::optional<std::int64_t> exact_int64(const nlohmann::json& value);
std::optional<std::uint64_t> exact_uint64(const nlohmann::json& value);

// The closest candidate to `word` by edit distance, if it is close enough to be a likely typo;
// else the candidate that contains `word` or that `word` contains (a prefix such as DeepSpeed's
// "stage3_" left off or added), at least six characters of it.
std::optional<std::string_view> closest_match(std::string_view word, const std::vector<std::string_view>& candidates);

}  // namespace zinf::spec
