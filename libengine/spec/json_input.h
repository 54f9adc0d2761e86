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

// Parses `text`; a syntax error reads "<source>:<line>:<column>: malformed JSON: <what>".
Result<nlohmann::json> parse_json_text(std::string_view text, std::string_view source);
// Reads and parses a file; a missing or unreadable file is NotFound/IoError naming the path.
Result<nlohmann::json> read_json_file(const std::string& path);

// A view of one JSON object with the dotted path that names it in errors ("hw.node.nvme").
// Getters fail with InvalidArgument naming "<path>.<key>", the value found and what is allowed.
class JsonObject {
 public:
  // Fails when `value` is not an object.
  static Result<JsonObject> wrap(const nlohmann::json& value, std::string path);

  const std::string& path() const { return path_; }
  bool has(std::string_view key) const;
  std::string field_path(std::string_view key) const;

  Result<JsonObject> object(std::string_view key) const;                      // required object
  Result<std::string> string(std::string_view key) const;                     // required string
  Result<std::optional<std::string>> optional_string(std::string_view key) const;
  Result<std::int64_t> positive_int(std::string_view key) const;              // required, >= 1
  Result<std::optional<std::int64_t>> optional_positive_int(std::string_view key) const;
  Result<std::optional<bool>> optional_bool(std::string_view key) const;
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

// The closest candidate to `word` by edit distance, if it is close enough to be a likely typo.
std::optional<std::string_view> closest_match(std::string_view word, const std::vector<std::string_view>& candidates);

}  // namespace zinf::spec
