#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/fuzz/fuzz_target.h"

namespace zinf::fuzz {

void fuzz_fail(std::string_view what, std::size_t input_size) {
  std::fprintf(stderr, "fuzz invariant broken (input of %zu bytes): %.*s\n", input_size, static_cast<int>(what.size()),
               what.data());
  std::abort();
}

void check_one_line(const Status& status, std::size_t input_size) {
  if (status.is_ok()) return;
  const std::string& message = status.message();
  if (message.empty()) fuzz_fail("an error with an empty message", input_size);
  if (message.find('\n') != std::string::npos) fuzz_fail("an error message spans lines: " + message, input_size);
  // Messages quote at most a few dozen characters of the input; a long one means an unbounded quote.
  if (message.size() > 2000) fuzz_fail("an error message of " + std::to_string(message.size()) + " bytes", input_size);
}

bool has_non_finite_word(std::string_view text) {
  const auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (std::size_t i = 0; i + 3 <= text.size(); ++i) {
    const std::string word{lower(text[i]), lower(text[i + 1]), lower(text[i + 2])};
    if (word != "inf" && word != "nan") continue;
    const bool starts = i == 0 || !letter(text[i - 1]);
    const bool ends = i + 3 == text.size() || !letter(text[i + 3]);
    if (starts && ends) return true;
  }
  return false;
}

}  // namespace zinf::fuzz
