// Terminal writer: renders a Document as aligned plain text, optionally colored with ANSI SGR codes.
//
// Layout (no color):
//
//   Plan for 1T on dgx-h100          document title, underlined with '='
//   =======================
//
//   Memory                           section heading
//     params    1.00T                fields: keys padded to the section's longest key
//     fits      yes
//
//     tier      used  capacity       table: columns padded to their widest cell, two spaces apart,
//     ------  ------  --------       right-aligned where Align::kRight, a '-' rule under the header
//     device  80 GiB    80 GiB
//
//     Notes are wrapped at the style's width and indented like the rest of the section.
//
// Widths are counted in UTF-8 code points of the visible text, never in bytes and never counting
// escape codes, so "1×" and "→" line up. East Asian wide characters (two terminal columns) are not
// expected in reports and are counted as one. Tables are never wrapped: a table wider than the
// terminal is better scrolled than broken. Deciding whether to color (TTY, NO_COLOR) is the CLI's
// job; this writer only obeys TextStyle.
#pragma once

#include <cstddef>
#include <ostream>
#include <string_view>

#include "reports/document.h"

namespace zinf::reports {

struct TextStyle {
  bool color = false;  // emit ANSI SGR codes; when false the output holds no escape bytes at all
  int width = 100;     // terminal columns that notes are wrapped to (indent included)
};

// Writes `document` to `out`. Every line ends with '\n'; no line has trailing spaces; blocks are
// separated by one blank line. Precondition: every table row has exactly columns.size() cells
// (checked with ZINF_CHECK). Stream errors are left in out's state for the caller to inspect.
void write_text(const Document& document, std::ostream& out, const TextStyle& style);

// Columns `text` occupies on a terminal: its UTF-8 code points (continuation bytes not counted).
// Exposed because the Markdown writer and the CLI's terminal helpers pad with the same measure.
std::size_t display_width(std::string_view text);

}  // namespace zinf::reports
