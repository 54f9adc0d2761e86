#include "libengine/core/quote.h"

#include <fmt/format.h>

namespace zinf {

std::string quoted(std::string_view text, std::size_t max_chars) {
  std::string out = "'";
  const std::size_t kept = text.size() > max_chars ? max_chars : text.size();
  for (std::size_t i = 0; i < kept; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += text[i];
    }
  }
  if (kept < text.size()) out += "...";
  out += '\'';
  return out;
}

}  // namespace zinf
