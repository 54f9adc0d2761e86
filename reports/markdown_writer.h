// Markdown writer: renders a Document as GitHub-flavoured Markdown, for pasting into issues, pull
// requests and CI summaries.
//
//   # Plan for 1T on dgx-h100
//
//   ## Memory
//
//   - params: **1.00T**
//   - fits: yes
//
//   | tier   |   used | capacity |
//   | ------ | -----: | -------: |
//   | device | 80 GiB |   80 GiB |
//
//   A note is one paragraph.
//
// Charts become an italic "Figure: <title>" line and their data as a table (chart_table.h).
// Fields become a bullet list ("- key: value"); tables become pipe tables with an alignment row
// ("---:" for Align::kRight), padded so the source reads as well as the rendering. kStrong and kBad
// cells are bold; other emphases have no Markdown form and are written plain. Characters Markdown
// would take as markup (\ ` * _ [ ] < > # |) are backslash-escaped, a note's opening that would start
// a list or heading is escaped too, and line breaks inside text become spaces, so text renders as the
// text it is. It is not an HTML writer: nothing here relies on inline HTML.
#pragma once

#include <ostream>

#include "reports/document.h"

namespace zinf::reports {

// Writes `document` to `out`. Blocks are separated by one blank line; the output ends with '\n'.
// Precondition: every table row has exactly columns.size() cells (checked with ZINF_CHECK). Stream
// errors are left in out's state for the caller to inspect.
void write_markdown(const Document& document, std::ostream& out);

}  // namespace zinf::reports
