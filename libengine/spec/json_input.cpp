#include "libengine/spec/json_input.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "libengine/core/input_file.h"
#include "libengine/core/quote.h"
#include "libengine/core/units.h"

namespace zinf::spec {
namespace {

using nlohmann::json;

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

// The byte offset of the first '[' or '{' (outside strings) that opens level max_depth + 1.
std::size_t offset_of_depth(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return text.size();
}

// A message built from untrusted text stays one readable line of bounded length.
std::string clipped(std::string text, std::size_t max_chars = 200) {
  if (text.size() > max_chars) {
    text.resize(max_chars - 3);
    text += "...";
  }
  return text;
}

// A key as error messages name it: clipped, with control characters written as \uXXXX, so that a
// key holding a newline cannot split the one-line error it appears in (found by the
// deepspeed_config fuzz target).
std::string key_name(const std::string& key) {
  std::string out;
  for (const char c : clipped(key, 40)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\u{:04x}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

// Builds the document like nlohmann's own DOM parser, but refuses what that parser accepts and zinf
// must not: nesting deeper than kMaxJsonDepth (printing or destroying such a value recurses once per
// level) and a key given twice in one object (nlohmann keeps the last silently). Errors are kept,
// not thrown: the SAX parser stops when an event returns false.
class BoundedDomBuilder {
 public:
  explicit BoundedDomBuilder(json& root) : root_(root) {}

  bool null() { return add(json(nullptr)); }
  bool boolean(bool value) { return add(json(value)); }
  bool number_integer(json::number_integer_t value) { return add(json(value)); }
  bool number_unsigned(json::number_unsigned_t value) { return add(json(value)); }
  bool number_float(json::number_float_t value, const json::string_t& /*text*/) { return add(json(value)); }
  bool string(json::string_t& value) { return add(json(std::move(value))); }
  bool binary(json::binary_t& value) { return add(json::binary(std::move(value))); }
  bool start_object(std::size_t /*elements*/) { return open(json::object()); }
  bool start_array(std::size_t /*elements*/) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(json::string_t& key) {
    json& object = *stack_.back().value;
    if (object.contains(key)) {
      const std::string where = stack_.size() > 1 ? fmt::format("in {}", container_path()) : "at the top level";
      return fail(kDuplicateKey,
                  fmt::format("key {} appears twice in one object ({}); each key may appear once",
                              json(clipped(key, 40)).dump(-1, ' ', false, json::error_handler_t::replace), where));
    }
    pending_key_ = std::move(key);
    return true;
  }

  template <class Exception>
  bool parse_error(std::size_t position, const std::string& last_token, const Exception& error) {
    position_ = position;
    if (error.id == 406) {  // out_of_range: a number no double holds
      std::string path = container_path();
      if (!stack_.empty() && stack_.back().value->is_object()) {
        if (!path.empty()) path += '.';
        path += key_name(pending_key_);
      } else if (!stack_.empty()) {
        path += fmt::format("[{}]", stack_.back().value->size());
      }
      return fail(kNumberOutOfRange,
                  fmt::format("{}{}number {} is out of range (beyond +-1.8e308, what a double holds)", path,
                              path.empty() ? "" : ": ", clipped(last_token, 40)));
    }
    std::string what = error.what();
    // Drop nlohmann's "[json.exception.parse_error.101] parse error at line 3, column 5: " prefix.
    if (const auto colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
    return fail(kSyntax, clipped(what));
  }

  enum Failure { kNone, kSyntax, kNumberOutOfRange, kTooDeep, kDuplicateKey };
  Failure failure() const { return failure_; }
  const std::string& message() const { return message_; }
  std::size_t position() const { return position_; }

 private:
  struct Open {
    json* value;
    std::string name;  // how the path names it: the key, or [index]
  };

  // "node.gpu", "architectures[2]": where the innermost open container sits; "" for the root.
  std::string container_path() const {
    std::string path;
    for (std::size_t i = 1; i < stack_.size(); ++i) {
      if (!path.empty() && stack_[i].name.front() != '[') path += '.';
      path += stack_[i].name;
    }
    return clipped(path, 80);
  }

  bool fail(Failure failure, std::string message) {
    if (failure_ == kNone) {
      failure_ = failure;
      message_ = std::move(message);
    }
    return false;
  }

  // Places `value` where the parser is: the root, the next array element or the pending key.
  json* place(json&& value, std::string& name) {
    if (stack_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& parent = *stack_.back().value;
    if (parent.is_array()) {
      name = fmt::format("[{}]", parent.size());
      parent.push_back(std::move(value));
      return &parent.back();
    }
    name = key_name(pending_key_);
    json& slot = parent[pending_key_];
    slot = std::move(value);
    return &slot;
  }

  bool add(json&& value) {
    std::string name;
    place(std::move(value), name);
    return true;
  }

  bool open(json&& container) {
    if (stack_.size() >= kMaxJsonDepth) {
      return fail(kTooDeep, fmt::format("nested deeper than {} levels of arrays and objects", kMaxJsonDepth));
    }
    std::string name;
    json* placed = place(std::move(container), name);
    stack_.push_back({placed, std::move(name)});
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  json& root_;
  std::vector<Open> stack_;
  std::string pending_key_;
  Failure failure_ = kNone;
  std::string message_;
  std::size_t position_ = 0;
};

// The first max_chars characters of what value.dump() would print, without printing the rest:
// a value from a file may be megabytes long.
void bounded_dump(const json& value, std::string& out, std::size_t max_chars) {
  if (out.size() > max_chars) return;
  switch (value.type()) {
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, element] : value.items()) {
        if (out.size() > max_chars) return;
        if (!first) out += ',';
        first = false;
        out += json(key.substr(0, max_chars)).dump(-1, ' ', false, json::error_handler_t::replace);
        out += ':';
        bounded_dump(element, out, max_chars);
      }
      out += '}';
      return;
    }
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const json& element : value) {
        if (out.size() > max_chars) return;
        if (!first) out += ',';
        first = false;
        bounded_dump(element, out, max_chars);
      }
      out += ']';
      return;
    }
    case json::value_t::string: {
      const auto& text = value.get_ref<const std::string&>();
      out += json(text.substr(0, max_chars + 1)).dump(-1, ' ', false, json::error_handler_t::replace);
      return;
    }
    default:
      out += value.dump(-1, ' ', false, json::error_handler_t::replace);
      return;
  }
}

}  // namespace

std::string describe_json_value(const nlohmann::json& value) {
  constexpr std::size_t kMaxChars = 40;
  std::string dumped;
  bounded_dump(value, dumped, kMaxChars);
  if (dumped.size() > kMaxChars) {
    dumped.resize(kMaxChars - 3);
    dumped += "...";
  }
  return fmt::format("{} ({})", dumped, value.type_name());
}

Result<nlohmann::json> parse_json_text(std::string_view text, std::string_view source) {
  json document;
  BoundedDomBuilder builder(document);
  bool parsed = false;
  try {
    parsed = json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json, /*strict=*/true,
                             /*ignore_comments=*/false);
  } catch (const json::exception& error) {
    // Not expected (every parser error reaches parse_error), but a library exception must not end
    // the process.
    return Status::invalid_argument(fmt::format("{}: malformed JSON: {}", source, clipped(error.what())));
  }
  if (parsed && builder.failure() == BoundedDomBuilder::kNone) return document;
  switch (builder.failure()) {
    case BoundedDomBuilder::kTooDeep: {
      const auto [line, column] = line_and_column(text, offset_of_depth(text, kMaxJsonDepth));
      return Status::invalid_argument(fmt::format("{}:{}:{}: JSON {}", source, line, column, builder.message()));
    }
    case BoundedDomBuilder::kDuplicateKey:
      return Status::invalid_argument(fmt::format("{}: {}", source, builder.message()));
    case BoundedDomBuilder::kSyntax:
    case BoundedDomBuilder::kNumberOutOfRange:
    case BoundedDomBuilder::kNone: {
      // position is 1-based and points one past the offending character.
      const std::size_t offset = builder.position() > 0 ? builder.position() - 1 : 0;
      const auto [line, column] = line_and_column(text, offset);
      std::string what = builder.message();
      if (builder.failure() != BoundedDomBuilder::kNumberOutOfRange) {
        what = what.empty() ? std::string("malformed JSON") : fmt::format("malformed JSON: {}", what);
      }
      return Status::invalid_argument(fmt::format("{}:{}:{}: {}", source, line, column, what));
    }
  }
  return Status::internal("parse_json_text: unhandled failure");
}

Result<nlohmann::json> read_json_file(const std::string& path) {
  ZINF_ASSIGN_OR_RETURN(const std::string contents, read_input_file(path));
  return parse_json_text(contents, path);
}

Result<JsonObject> JsonObject::wrap(const nlohmann::json& value, std::string path) {
  if (!value.is_object()) {
    return Status::invalid_argument(
        fmt::format("{}: expected a JSON object, found {}", path, describe_json_value(value)));
  }
  return JsonObject(&value, std::move(path));
}

bool JsonObject::has(std::string_view key) const { return value_->contains(key); }

std::string JsonObject::field_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

Result<const nlohmann::json*> JsonObject::required(std::string_view key) const {
  const auto it = value_->find(key);
  if (it == value_->end())
    return Status::invalid_argument(fmt::format("{}: required field is missing", field_path(key)));
  return &*it;
}

Result<JsonObject> JsonObject::object(std::string_view key) const {
  ZINF_ASSIGN_OR_RETURN(const nlohmann::json* value, required(key));
  return wrap(*value, field_path(key));
}

Result<std::string> JsonObject::string(std::string_view key) const {
  ZINF_ASSIGN_OR_RETURN(const nlohmann::json* value, required(key));
  if (!value->is_string()) {
    return Status::invalid_argument(
        fmt::format("{}: expected a string, found {}", field_path(key), describe_json_value(*value)));
  }
  return value->get<std::string>();
}

Result<std::optional<std::string>> JsonObject::optional_string(std::string_view key) const {
  if (!has(key) || value_->at(key).is_null()) return std::optional<std::string>{};
  ZINF_ASSIGN_OR_RETURN(std::string value, string(key));
  return std::optional<std::string>(std::move(value));
}

Result<std::string> JsonObject::printable_string(std::string_view key) const {
  ZINF_ASSIGN_OR_RETURN(std::string value, string(key));
  for (std::size_t i = 0; i < value.size(); ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c == 0x7f) {
      return Status::invalid_argument(
          fmt::format("{}: {} holds a control character (0x{:02x} at byte {}); expected printable text",
                      field_path(key), describe_json_value(value_->at(key)), c, i));
    }
  }
  return value;
}

Result<std::optional<std::string>> JsonObject::optional_printable_string(std::string_view key) const {
  if (!has(key) || value_->at(key).is_null()) return std::optional<std::string>{};
  ZINF_ASSIGN_OR_RETURN(std::string value, printable_string(key));
  return std::optional<std::string>(std::move(value));
}

Result<std::int64_t> JsonObject::positive_int(std::string_view key) const {
  ZINF_ASSIGN_OR_RETURN(const nlohmann::json* value, required(key));
  if (!value->is_number_integer() || value->get<std::int64_t>() <= 0) {
    return Status::invalid_argument(
        fmt::format("{}: expected a positive integer, found {}", field_path(key), describe_json_value(*value)));
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
    return Status::invalid_argument(
        fmt::format("{}: expected true or false, found {}", field_path(key), describe_json_value(value)));
  }
  return std::optional<bool>(value.get<bool>());
}

Result<std::optional<double>> JsonObject::optional_number(std::string_view key) const {
  if (!has(key) || value_->at(key).is_null()) return std::optional<double>{};
  const nlohmann::json& value = value_->at(key);
  if (!value.is_number() || !std::isfinite(value.get<double>())) {
    return Status::invalid_argument(
        fmt::format("{}: expected a finite number, found {}", field_path(key), describe_json_value(value)));
  }
  return std::optional<double>(value.get<double>());
}

namespace {

// Sizes in JSON are either strings with units or bare numbers in base units.
template <typename Parse>
auto parse_size_field(const nlohmann::json& value, const std::string& field, Parse parse)
    -> decltype(parse(std::string_view{}, std::string_view{})) {
  if (value.is_string()) return parse(value.get<std::string>(), field);
  if (value.is_number()) return parse(value.dump(), field);
  return Status::invalid_argument(fmt::format("{}: expected a size string like \"80GiB\" or a number, found {}", field,
                                              describe_json_value(value)));
}

}  // namespace

Result<std::uint64_t> JsonObject::bytes(std::string_view key, bool zero_allowed) const {
  ZINF_ASSIGN_OR_RETURN(const nlohmann::json* value, required(key));
  const ZeroIs zero = zero_allowed ? ZeroIs::kAllowed : ZeroIs::kRejected;
  return parse_size_field(*value, field_path(key), [zero](std::string_view text, std::string_view field) {
    return parse_bytes(text, field, zero);
  });
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
    // The key comes from the file: shown as written when it is a short printable word, quoted
    // (escaped, cut) otherwise, so the message stays one readable line.
    const bool plain = key.size() <= 60 && std::all_of(key.begin(), key.end(), [](char c) {
                         const auto byte = static_cast<unsigned char>(c);
                         return byte >= 0x20 && byte != 0x7f;
                       });
    const std::string where = plain ? field_path(key) : field_path(zinf::quoted(key));
    if (suggestion) {
      return Status::invalid_argument(
          fmt::format("{}: unknown field (did you mean '{}'?); allowed: {}", where, *suggestion, allowed));
    }
    return Status::invalid_argument(fmt::format("{}: unknown field; allowed: {}", where, allowed));
  }
  return Status::ok();
}

std::optional<std::int64_t> exact_int64(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    const auto v = value.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(v);
  }
  if (value.is_number_integer()) return value.get<std::int64_t>();
  return std::nullopt;
}

std::optional<std::uint64_t> exact_uint64(const nlohmann::json& value) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer() && value.get<std::int64_t>() >= 0)
    return static_cast<std::uint64_t>(value.get<std::int64_t>());
  return std::nullopt;
}

std::optional<std::string_view> closest_match(std::string_view word, const std::vector<std::string_view>& candidates) {
  // A typo of a short key is short; this also keeps the quadratic distance cheap for any input.
  if (word.size() > 64) return std::nullopt;
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
  // A name with a prefix or suffix left off or added ("max_live_param" for
  // "stage3_max_live_parameters"): the candidate that holds the word, or that the word holds,
  // closest in length. Six characters at least, so that "lr" suggests nothing.
  constexpr std::size_t kMinPart = 6;
  std::optional<std::string_view> part;
  for (std::string_view candidate : candidates) {
    const std::string_view shorter = candidate.size() < word.size() ? candidate : word;
    const std::string_view longer = candidate.size() < word.size() ? word : candidate;
    if (shorter.size() < kMinPart || longer.find(shorter) == std::string_view::npos) continue;
    const auto gap = [&](std::string_view c) {
      return c.size() > word.size() ? c.size() - word.size() : word.size() - c.size();
    };
    if (!part || gap(candidate) < gap(*part)) part = candidate;
  }
  return part;
}

}  // namespace zinf::spec
