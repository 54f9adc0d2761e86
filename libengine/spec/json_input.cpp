#include "libengine/spec/json_input.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "libengine/core/units.h"

namespace zinf::spec {
namespace {

// nlohmann reports a byte offset; people want line and column.
std::pair<std::size_t, std::size_t> line_and_column(std::string_view text, std::size_t byte_offset) {
  std::size_t line = 1;
  std::size_t column = 1;
  const std::size_t end = std::min(byte_offset, text.size());
  for (std::size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

std::string describe(const nlohmann::json& value) {
  std::string dumped = value.dump();
  if (dumped.size() > 40) dumped = dumped.substr(0, 37) + "...";
  return fmt::format("{} ({})", dumped, value.type_name());
}

}  // namespace

Result<nlohmann::json> parse_json_text(std::string_view text, std::string_view source) {
  try {
    return nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/true,
                                 /*ignore_comments=*/false);
  } catch (const nlohmann::json::parse_error& error) {
    // error.byte is 1-based and points one past the offending character.
    const std::size_t offset = error.byte > 0 ? error.byte - 1 : 0;
    const auto [line, column] = line_and_column(text, offset);
    std::string what = error.what();
    // Drop nlohmann's "[json.exception.parse_error.101] parse error at line 3, column 5: " prefix.
    if (const auto colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
    return Status::invalid_argument(fmt::format("{}:{}:{}: malformed JSON: {}", source, line, column, what));
  }
}

Result<nlohmann::json> read_json_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    const int err = errno;
    if (err == ENOENT) return Status::not_found(fmt::format("{}: no such file", path));
    return Status::io_error(fmt::format("{}: cannot open: {}", path, std::strerror(err)));
  }
  std::ostringstream contents;
  contents << file.rdbuf();
  if (file.bad()) return Status::io_error(fmt::format("{}: read failed", path));
  return parse_json_text(contents.str(), path);
}

Result<JsonObject> JsonObject::wrap(const nlohmann::json& value, std::string path) {
  if (!value.is_object()) {
    return Status::invalid_argument(fmt::format("{}: expected a JSON object, found {}", path, describe(value)));
  }
  return JsonObject(&value, std::move(path));
}

bool JsonObject::has(std::string_view key) const { return value_->contains(key); }

std::string JsonObject::field_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

Result<const nlohmann::json*> JsonObject::required(std::string_view key) const {
  const auto it = value_->find(key);
  if (it == value_->end()) return Status::invalid_argument(fmt::format("{}: required field is missing", field_path(key)));
  return &*it;
}

Result<JsonObject> JsonObject::object(std::string_view key) const {
  ZINF_ASSIGN_OR_RETURN(const nlohmann::json* value, required(key));
  return wrap(*value, field_path(key));
}

Result<std::string> JsonObject::string(std::string_view key) const {
  ZINF_ASSIGN_OR_RETURN(const nlohmann::json* value, required(key));
  if (!value->is_string()) {
    return Status::invalid_argument(fmt::format("{}: expected a string, found {}", field_path(key), describe(*value)));
  }
  return value->get<std::string>();
}

Result<std::optional<std::string>> JsonObject::optional_string(std::string_view key) const {
  if (!has(key) || value_->at(key).is_null()) return std::optional<std::string>{};
  ZINF_ASSIGN_OR_RETURN(std::string value, string(key));
  return std::optional<std::string>(std::move(value));
}

Result<std::int64_t> JsonObject::positive_int(std::string_view key) const {
  ZINF_ASSIGN_OR_RETURN(const nlohmann::json* value, required(key));
  if (!value->is_number_integer() || value->get<std::int64_t>() <= 0) {
    return Status::invalid_argument(
        fmt::format("{}: expected a positive integer, found {}", field_path(key), describe(*value)));
  }
  return value->get<std::int64_t>();
}

Result<std::optional<std::int64_t>> JsonObject::optional_positive_int(std::string_view key) const {
  if (!has(key) || value_->at(key).is_null()) return std::optional<std::int64_t>{};
  ZINF_ASSIGN_OR_RETURN(const std::int64_t value, positive_int(key));
  return std::optional<std::int64_t>(value);
}

Result<std::optional<bool>> JsonObject::optional_bool(std::string_view key) const {
  if (!has(key) || value_->at(key).is_null()) return std::optional<bool>{};
  const nlohmann::json& value = value_->at(key);
  if (!value.is_boolean()) {
    return Status::invalid_argument(fmt::format("{}: expected true or false, found {}", field_path(key), describe(value)));
  }
  return std::optional<bool>(value.get<bool>());
}

namespace {

// Sizes in JSON are either strings with units or bare numbers in base units.
template <typename Parse>
auto parse_size_field(const nlohmann::json& value, const std::string& field, Parse parse)
    -> decltype(parse(std::string_view{}, std::string_view{})) {
  if (value.is_string()) return parse(value.get<std::string>(), field);
  if (value.is_number()) return parse(value.dump(), field);
  return Status::invalid_argument(
      fmt::format("{}: expected a size string like \"80GiB\" or a number, found {}", field, describe(value)));
}

}  // namespace

Result<std::uint64_t> JsonObject::bytes(std::string_view key, bool zero_allowed) const {
  ZINF_ASSIGN_OR_RETURN(const nlohmann::json* value, required(key));
  const ZeroIs zero = zero_allowed ? ZeroIs::kAllowed : ZeroIs::kRejected;
  return parse_size_field(*value, field_path(key),
                          [zero](std::string_view text, std::string_view field) { return parse_bytes(text, field, zero); });
}

Result<double> JsonObject::bandwidth(std::string_view key) const {
  ZINF_ASSIGN_OR_RETURN(const nlohmann::json* value, required(key));
  return parse_size_field(*value, field_path(key),
                          [](std::string_view text, std::string_view field) { return parse_bandwidth(text, field); });
}

Result<double> JsonObject::flops(std::string_view key) const {
  ZINF_ASSIGN_OR_RETURN(const nlohmann::json* value, required(key));
  return parse_size_field(*value, field_path(key),
                          [](std::string_view text, std::string_view field) { return parse_flops(text, field); });
}

Status JsonObject::reject_unknown_keys(const std::vector<std::string_view>& known) const {
  for (const auto& [key, value] : value_->items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    const auto suggestion = closest_match(key, known);
    std::string allowed;
    for (std::string_view name : known) allowed += fmt::format("{}{}", allowed.empty() ? "" : ", ", name);
    if (suggestion) {
      return Status::invalid_argument(
          fmt::format("{}: unknown field (did you mean '{}'?); allowed: {}", field_path(key), *suggestion, allowed));
    }
    return Status::invalid_argument(fmt::format("{}: unknown field; allowed: {}", field_path(key), allowed));
  }
  return Status::ok();
}

std::optional<std::string_view> closest_match(std::string_view word, const std::vector<std::string_view>& candidates) {
  // Levenshtein distance; fine for the handful of short keys a schema has.
  const auto distance = [](std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      std::size_t diagonal = row[0];
      row[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j) {
        const std::size_t above = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diagonal = above;
      }
    }
    return row[b.size()];
  };
  std::optional<std::string_view> best;
  std::size_t best_distance = 0;
  for (std::string_view candidate : candidates) {
    const std::size_t d = distance(word, candidate);
    if (!best || d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  // A typo is at most a third of the word (at least 1, at most 3 edits).
  const std::size_t limit = std::clamp<std::size_t>(word.size() / 3, 1, 3);
  if (best && best_distance <= limit) return best;
  return std::nullopt;
}

}  // namespace zinf::spec
