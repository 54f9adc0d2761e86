#include "reports/csv_writer.h"

#include <string_view>

#include "libengine/core/check.h"

namespace zinf::reports {
namespace {

void write_field(std::string_view field, std::ostream& out) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) {
    out << field;
    return;
  }
  out << '"';
  for (char c : field) {
    if (c == '"') out << '"';
    out << c;
  }
  out << '"';
}

// `field_text(i)` returns the text of the record's i-th field; templated so Cells and strings share
// one quoting path without copying cells into strings.
template <typename Record, typename FieldText>
void write_record(const Record& record, FieldText field_text, std::ostream& out) {
  // A lone empty field would be an empty line, which readers skip as no record at all.
  if (record.size() == 1 && field_text(record[0]).empty()) {
    out << "\"\"\n";
    return;
  }
  for (std::size_t i = 0; i < record.size(); ++i) {
    if (i > 0) out << ',';
    write_field(field_text(record[i]), out);
  }
  out << '\n';
}

}  // namespace

void write_csv(const Table& table, std::ostream& out) {
  if (table.columns.empty()) return;
  write_record(
      table.columns, [](const Column& column) -> std::string_view { return column.title; }, out);
  for (const auto& row : table.rows) {
    ZINF_CHECK(row.size() == table.columns.size(), "a table row must have one cell per column");
    write_record(
        row, [](const Cell& cell) -> std::string_view { return cell.text; }, out);
  }
}

void write_csv(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
               std::ostream& out) {
  const auto text = [](const std::string& field) -> std::string_view { return field; };
  if (!header.empty()) write_record(header, text, out);
  for (const auto& row : rows) {
    ZINF_CHECK(header.empty() || row.size() == header.size(), "a CSV row must have one field per header column");
    write_record(row, text, out);
  }
}

}  // namespace zinf::reports
