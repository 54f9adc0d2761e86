// CSV writer: tables and raw rows as RFC 4180 CSV, for spreadsheets and plotting scripts.
//
// Fields are separated by commas; a field is quoted when it contains a comma, a double quote, CR
// or LF, and quotes inside it are doubled. Records end with LF rather than RFC 4180's CRLF: every
// CSV reader accepts LF, and LF keeps `--out` files diffable and greppable on the Linux machines
// zinf runs on. Emphasis is presentation and is dropped. This writer formats nothing: cells are
// written as the finished text they hold.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "reports/document.h"

namespace zinf::reports {

// Writes a header record of the column titles, then one record per row; a table without columns
// writes nothing. Precondition: every row has exactly columns.size() cells (checked with ZINF_CHECK).
void write_csv(const Table& table, std::ostream& out);

// Writes `header` (skipped when empty, for header-less data) and then `rows`. Precondition: when
// `header` is not empty, every row has header.size() fields (checked with ZINF_CHECK).
void write_csv(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
               std::ostream& out);

}  // namespace zinf::reports
