// Reports of records: turns any mix of zinf JSON records (zinf.train/1, zinf.bench-io/1,
// zinf.bench-train/1, zinf.bench-suite/1, zinf.plan/1, zinf.plan-sweep/1, zinf.max-params/1,
// zinf.hardware/1, and kinds this file has never heard of) into one Document with charts, which the
// HTML, Markdown and CSV writers render. Every figure shown is read from a record, never recomputed
// (docs/architecture.md §9): a field missing from a record is missing from its report.
//
// Known kinds get their figures (loss curve with the held-out points and the entropy floor, step
// time and phase breakdown, memory per tier against its budget, per-link bytes and GB/s, zinf next
// to its baseline with the ratio and its spread, memory per tier per state, the bottleneck, sweep
// curves with the feasible region); every scalar a renderer did not use is still listed under
// "Other fields", so new record fields show up without new code. Unknown kinds are rendered
// generically: scalars as fields, arrays of objects as tables, numeric series as charts.
//
// Several train or bench records together add a comparison section first: a side-by-side table
// and, for train records, tokens/s against model size and against ranks.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/document.h"

namespace zinf::reports {

struct SourcedRecord {
  std::string source;     // where the record came from (a path), shown in headings
  nlohmann::json record;  // any JSON object; need not be a zinf record
};

// The report of `records` (non-empty, checked with ZINF_CHECK). Never fails: a value of an
// unexpected type is rendered as text.
Document report_of_records(const std::vector<SourcedRecord>& records);

// The sections of one record, titles prefixed with `heading` ("train: runs/a.json").
std::vector<Section> record_sections(const nlohmann::json& record, const std::string& heading);

// Long-form CSV of a document: columns section, item, row, column, value — one row per field, per
// table cell and per chart point (item = "field", "table", or "figure: " + the chart title), so a
// spreadsheet gets every figure the HTML shows. "row" keys a table row: its first cell where that
// names the rows (Table::first_column_is_key) and is unique in the table, else the row's number
// from 1 (and the first cell is then a value like the others).
Table document_csv(const Document& document);

// The document as JSON ({"title", "sections": [{"title", "fields": {key: text}, "table": {"columns",
// "rows"}, "charts": [{"title", "kind", "x_label", "y_label", "categories", "series": [{"name", "x",
// "y"}], "references"}], "notes"}]}), for tools that want the report's figures without parsing HTML.
nlohmann::json document_json(const Document& document);

}  // namespace zinf::reports
