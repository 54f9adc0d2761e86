// quoted(): how an error message shows text that came from a user or a file. Messages are one
// line a person reads on a terminal (docs/architecture.md §8), so the text is put in single quotes, control
// characters (newlines, escape sequences) are written as \xNN, and anything past `max_chars` bytes
// is cut to "..." — a 16 MiB string in a JSON file must not become a 16 MiB error line.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace zinf {

// 'text' with control characters escaped and at most max_chars bytes of the text kept.
std::string quoted(std::string_view text, std::size_t max_chars = 60);

}  // namespace zinf
