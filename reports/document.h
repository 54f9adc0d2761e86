// Document: what a command shows people, independent of how it is rendered. A command builds one
// Document from its record; the writers (text_writer.h, markdown_writer.h, csv_writer.h) render it.
// Cells hold finished text — the command formats numbers with units — plus an emphasis that the
// terminal writer may color. Nothing here computes a figure: records are the source of truth.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "reports/chart.h"

namespace zinf::reports {

enum class Emphasis {
  kNone,
  kStrong,  // headline figure
  kGood,    // fits, fast, passes
  kWarn,    // close to a limit
  kBad,     // does not fit, bottleneck, fails
  kMuted,   // secondary detail
};

struct Cell {
  std::string text;
  Emphasis emphasis = Emphasis::kNone;

  Cell() = default;
  Cell(std::string t, Emphasis e = Emphasis::kNone) : text(std::move(t)), emphasis(e) {}  // NOLINT: implicit from text
  Cell(const char* t, Emphasis e = Emphasis::kNone) : text(t), emphasis(e) {}             // NOLINT
};

enum class Align { kLeft, kRight };

struct Column {
  std::string title;
  Align align = Align::kLeft;  // numbers right-aligned
};

struct Table {
  std::vector<Column> columns;
  std::vector<std::vector<Cell>> rows;  // each row has columns.size() cells
  // The first column names each row (a test, a tier, a metric), so a long-form view can key rows by
  // it (record_report.h: document_csv). False for a table whose first column is a measured value:
  // its rows are keyed by their number.
  bool first_column_is_key = true;
};

// A titled part of a document: optional "key: value" lines, an optional table, optional notes
// (free sentences shown after the table, e.g. the explanation of a bottleneck).
struct Section {
  std::string title;
  std::vector<std::pair<std::string, Cell>> fields;
  Table table;  // empty when columns is empty
  std::vector<std::string> notes;
  std::vector<Chart> charts;  // figures (chart.h); drawn as SVG in HTML, as data tables in Markdown/CSV
};

struct Document {
  std::string title;
  std::vector<Section> sections;
};

}  // namespace zinf::reports
