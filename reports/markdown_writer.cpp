#include "reports/markdown_writer.h"

#include "reports/chart_table.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "libengine/core/check.h"
#include "reports/text_writer.h"

namespace zinf::reports {
namespace {

// Markdown source for `text` that renders as exactly `text`, on one line.
std::string escape(std::string_view text) {
  constexpr std::string_view kMarkup = "\\`*_[]<>#|";
  std::string escaped;
  escaped.reserve(text.size());
  for (char c : text) {
    if (c == '\n' || c == '\r') {
      escaped += ' ';
      continue;
    }
    if (kMarkup.find(c) != std::string_view::npos) escaped += '\\';
    escaped += c;
  }
  return escaped;
}

std::string render(const Cell& cell) {
  std::string source = escape(cell.text);
  const bool bold = cell.emphasis == Emphasis::kStrong || cell.emphasis == Emphasis::kBad;
  // "****" would render as a rule or literal stars, so empty cells stay empty.
  if (bold && !source.empty()) return "**" + source + "**";
  return source;
}

// A note as a paragraph. Beyond inline escaping, a paragraph's first characters could open a block
// ("- " a list, "1. " an ordered list, "    " code, "===" a heading underline), so those are
// neutralised too.
std::string paragraph_source(std::string_view note) {
  std::string source = escape(note);
  const std::size_t first = source.find_first_not_of(' ');
  if (first == std::string::npos) return {};
  source.erase(0, first);
  source.erase(source.find_last_not_of(' ') + 1);
  const std::size_t digits = source.find_first_not_of("0123456789");
  if (source.front() == '-' || source.front() == '+' || source.front() == '=') {
    source.insert(0, 1, '\\');
  } else if (digits > 0 && digits != std::string::npos && (source[digits] == '.' || source[digits] == ')')) {
    source.insert(digits, 1, '\\');
  }
  return source;
}

void write_padded(std::ostream& out, const std::string& source, std::size_t width, Align align) {
  const std::string padding(width - display_width(source), ' ');
  if (align == Align::kRight) {
    out << padding << source;
  } else {
    out << source << padding;
  }
}

void write_table(const Table& table, std::ostream& out) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(table.rows.size() + 1);
  std::vector<std::string>& header = rows.emplace_back();
  for (const Column& column : table.columns) header.push_back(escape(column.title));
  for (const auto& row : table.rows) {
    ZINF_CHECK(row.size() == table.columns.size(), "a table row must have one cell per column");
    std::vector<std::string>& rendered = rows.emplace_back();
    for (const Cell& cell : row) rendered.push_back(render(cell));
  }

  // Three dashes is the shortest delimiter every Markdown implementation accepts.
  std::vector<std::size_t> widths(table.columns.size(), 3);
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], display_width(row[c]));
  }

  const auto write_row = [&](const std::vector<std::string>& row) {
    out << '|';
    for (std::size_t c = 0; c < row.size(); ++c) {
      out << ' ';
      write_padded(out, row[c], widths[c], table.columns[c].align);
      out << " |";
    }
    out << '\n';
  };

  write_row(rows.front());
  out << '|';
  for (std::size_t c = 0; c < table.columns.size(); ++c) {
    if (table.columns[c].align == Align::kRight) {
      out << ' ' << std::string(widths[c] - 1, '-') << ": |";
    } else {
      out << ' ' << std::string(widths[c], '-') << " |";
    }
  }
  out << '\n';
  for (std::size_t r = 1; r < rows.size(); ++r) write_row(rows[r]);
}

}  // namespace

void write_markdown(const Document& document, std::ostream& out) {
  bool any_block = false;
  const auto begin_block = [&] {
    if (any_block) out << '\n';
    any_block = true;
  };

  if (!document.title.empty()) {
    begin_block();
    out << "# " << escape(document.title) << '\n';
  }
  for (const Section& section : document.sections) {
    if (!section.title.empty()) {
      begin_block();
      out << "## " << escape(section.title) << '\n';
    }
    if (!section.fields.empty()) {
      begin_block();
      for (const auto& [key, value] : section.fields) {
        out << "- " << escape(key) << ':';
        const std::string rendered = render(value);
        if (!rendered.empty()) out << ' ' << rendered;
        out << '\n';
      }
    }
    if (!section.table.columns.empty()) {
      begin_block();
      write_table(section.table, out);
    }
    // A chart becomes its title in italics and its data as a table: the same numbers the HTML draws.
    for (const Chart& chart : section.charts) {
      begin_block();
      out << "*" << escape("Figure: " + chart.title) << "*\n";
      begin_block();
      write_table(chart_table(chart), out);
    }
    for (const std::string& note : section.notes) {
      const std::string paragraph = paragraph_source(note);
      if (paragraph.empty()) continue;
      begin_block();
      out << paragraph << '\n';
    }
  }
}

}  // namespace zinf::reports
