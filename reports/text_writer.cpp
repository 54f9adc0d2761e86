#include "reports/text_writer.h"

#include <algorithm>
#include <string>
#include <vector>

#include "libengine/core/check.h"

namespace zinf::reports {
namespace {

constexpr std::string_view kIndent = "  ";
constexpr std::string_view kColumnGap = "  ";
constexpr std::string_view kSgrReset = "\x1b[0m";
constexpr std::string_view kSgrBold = "\x1b[1m";

std::string_view sgr_for(Emphasis emphasis) {
  switch (emphasis) {
    case Emphasis::kNone:
      return {};
    case Emphasis::kStrong:
      return kSgrBold;
    case Emphasis::kGood:
      return "\x1b[32m";
    case Emphasis::kWarn:
      return "\x1b[33m";
    case Emphasis::kBad:
      return "\x1b[31m";
    case Emphasis::kMuted:
      return "\x1b[2m";
  }
  return {};
}

// One output line. Padding is held back until visible text follows it, so padding that would end a
// line (a left-aligned last column, an empty value) is never written and no line has trailing spaces.
class LineWriter {
 public:
  LineWriter(std::ostream& out, bool color) : out_(out), color_(color) {}

  void pad(std::size_t columns) { pending_spaces_ += columns; }

  // `sgr` is the escape sequence that colors `text`; empty for plain text. Ignored without color.
  void text(std::string_view text, std::string_view sgr = {}) {
    if (text.empty()) return;
    out_ << std::string(pending_spaces_, ' ');
    pending_spaces_ = 0;
    if (color_ && !sgr.empty()) {
      out_ << sgr << text << kSgrReset;
    } else {
      out_ << text;
    }
  }

  void end() {
    out_ << '\n';
    pending_spaces_ = 0;
  }

 private:
  std::ostream& out_;
  bool color_;
  std::size_t pending_spaces_ = 0;
};

// Writes a blank line before every block but the first, so blocks are separated by exactly one.
class BlockSeparator {
 public:
  explicit BlockSeparator(std::ostream& out) : out_(out) {}
  void begin_block() {
    if (any_block_) out_ << '\n';
    any_block_ = true;
  }

 private:
  std::ostream& out_;
  bool any_block_ = false;
};

void write_aligned(LineWriter& line, const Cell& cell, std::size_t width, Align align, std::string_view sgr) {
  const std::size_t padding = width - display_width(cell.text);
  if (align == Align::kRight) line.pad(padding);
  line.text(cell.text, sgr);
  if (align == Align::kLeft) line.pad(padding);
}

void write_fields(const Section& section, std::ostream& out, const TextStyle& style) {
  std::size_t key_width = 0;
  for (const auto& [key, value] : section.fields) key_width = std::max(key_width, display_width(key));
  for (const auto& [key, value] : section.fields) {
    LineWriter line(out, style.color);
    line.pad(kIndent.size());
    line.text(key);
    line.pad(key_width - display_width(key) + kColumnGap.size());
    line.text(value.text, sgr_for(value.emphasis));
    line.end();
  }
}

void write_table(const Table& table, std::ostream& out, const TextStyle& style) {
  std::vector<std::size_t> widths;
  widths.reserve(table.columns.size());
  for (const Column& column : table.columns) widths.push_back(display_width(column.title));
  for (const auto& row : table.rows) {
    ZINF_CHECK(row.size() == table.columns.size(), "a table row must have one cell per column");
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], display_width(row[c].text));
  }

  LineWriter header(out, style.color);
  header.pad(kIndent.size());
  for (std::size_t c = 0; c < table.columns.size(); ++c) {
    if (c > 0) header.pad(kColumnGap.size());
    write_aligned(header, Cell(table.columns[c].title), widths[c], table.columns[c].align, kSgrBold);
  }
  header.end();

  LineWriter rule(out, style.color);
  rule.pad(kIndent.size());
  for (std::size_t c = 0; c < table.columns.size(); ++c) {
    if (c > 0) rule.pad(kColumnGap.size());
    rule.text(std::string(widths[c], '-'));
  }
  rule.end();

  for (const auto& row : table.rows) {
    LineWriter line(out, style.color);
    line.pad(kIndent.size());
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line.pad(kColumnGap.size());
      write_aligned(line, row[c], widths[c], table.columns[c].align, sgr_for(row[c].emphasis));
    }
    line.end();
  }
}

std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> words;
  constexpr std::string_view kSpace = " \t\r\n";
  std::size_t start = text.find_first_not_of(kSpace);
  while (start != std::string_view::npos) {
    const std::size_t end = text.find_first_of(kSpace, start);
    words.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    start = text.find_first_not_of(kSpace, end);
  }
  return words;
}

// Greedy wrap. A word longer than the line gets a line of its own rather than being broken, because
// the long words in reports are paths and figures that must stay copyable.
void write_wrapped(const std::vector<std::string_view>& words, std::ostream& out, const TextStyle& style) {
  const std::size_t line_width =
      static_cast<std::size_t>(std::max<int>(style.width - static_cast<int>(kIndent.size()), 1));
  std::size_t used = 0;
  LineWriter line(out, style.color);
  for (std::string_view word : words) {
    const std::size_t word_width = display_width(word);
    if (used > 0 && used + 1 + word_width > line_width) {
      line.end();
      used = 0;
    }
    if (used == 0) {
      line.pad(kIndent.size());
    } else {
      line.pad(1);
      used += 1;
    }
    line.text(word);
    used += word_width;
  }
  line.end();
}

void write_section(const Section& section, std::ostream& out, const TextStyle& style, BlockSeparator& blocks) {
  blocks.begin_block();
  if (!section.title.empty()) {
    LineWriter heading(out, style.color);
    heading.text(section.title, kSgrBold);
    heading.end();
  }
  // The first body block sits directly under the heading; later ones are set apart by a blank line.
  bool any_body_block = false;
  const auto begin_body_block = [&] {
    if (any_body_block) out << '\n';
    any_body_block = true;
  };
  if (!section.fields.empty()) {
    begin_body_block();
    write_fields(section, out, style);
  }
  if (!section.table.columns.empty()) {
    begin_body_block();
    write_table(section.table, out, style);
  }
  for (const std::string& note : section.notes) {
    const std::vector<std::string_view> words = split_words(note);
    if (words.empty()) continue;
    begin_body_block();
    write_wrapped(words, out, style);
  }
}

}  // namespace

std::size_t display_width(std::string_view text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char byte) {
    return (static_cast<unsigned char>(byte) & 0xC0U) != 0x80U;  // not a UTF-8 continuation byte
  }));
}

void write_text(const Document& document, std::ostream& out, const TextStyle& style) {
  BlockSeparator blocks(out);
  if (!document.title.empty()) {
    blocks.begin_block();
    LineWriter title(out, style.color);
    title.text(document.title, kSgrBold);
    title.end();
    out << std::string(display_width(document.title), '=') << '\n';
  }
  for (const Section& section : document.sections) write_section(section, out, style, blocks);
}

}  // namespace zinf::reports
