#include "reports/html_writer.h"

#include <string>
#include <string_view>

#include "libengine/core/check.h"
#include "reports/svg_chart.h"

namespace zinf::reports {
namespace {

constexpr const char* kStyle = R"(
body { font: 14px/1.45 system-ui, sans-serif; color: #1b1f24; margin: 2em auto; max-width: 1560px; padding: 0 1em; }
h1 { font-size: 1.6em; border-bottom: 2px solid #d0d7de; padding-bottom: .2em; }
h2 { font-size: 1.2em; margin-top: 1.8em; border-bottom: 1px solid #d0d7de; }
table { border-collapse: collapse; margin: .6em 0; }
th, td { padding: .2em .7em; border-bottom: 1px solid #eaeef2; vertical-align: top; }
td { overflow-wrap: anywhere; }
th { text-align: left; background: #f6f8fa; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
table.fields td:first-child { color: #57606a; white-space: nowrap; }
.strong { font-weight: 600; } .good { color: #1a7f37; } .warn { color: #9a6700; }
.bad { color: #cf222e; font-weight: 600; } .muted { color: #6e7781; }
figure { display: inline-block; vertical-align: top; width: 740px; max-width: 100%; margin: 1em 1.5em 1em 0; }
figcaption { color: #57606a; font-size: .9em; }
svg.chart { display: block; border: 1px solid #eaeef2; }
svg.chart text { font: 11px system-ui, sans-serif; fill: #1b1f24; }
svg.chart text.chart-title { font-size: 13px; font-weight: 600; }
svg.chart .grid { stroke: #eaeef2; } svg.chart .axis { stroke: #57606a; }
svg.chart .reference { stroke: #cf222e; stroke-dasharray: 5 4; }
svg.chart text.reference-label { fill: #cf222e; }
p.note { color: #333; }
div.table-wrap { overflow-x: auto; }
)";

const char* emphasis_class(Emphasis e) {
  switch (e) {
    case Emphasis::kStrong:
      return "strong";
    case Emphasis::kGood:
      return "good";
    case Emphasis::kWarn:
      return "warn";
    case Emphasis::kBad:
      return "bad";
    case Emphasis::kMuted:
      return "muted";
    case Emphasis::kNone:
      break;
  }
  return "";
}

void cell(std::ostream& out, const char* tag, const Cell& c, bool numeric) {
  std::string classes = emphasis_class(c.emphasis);
  if (numeric) classes += classes.empty() ? "num" : " num";
  out << '<' << tag;
  if (!classes.empty()) out << " class=\"" << classes << '"';
  std::string text = xml_escape(c.text);
  // Column titles are often record keys ("fullest_tier_fraction"): a narrow column breaks them at an
  // underscore, not in the middle of a word.
  if (std::string_view(tag) == "th") {
    for (std::size_t at = text.find('_'); at != std::string::npos; at = text.find('_', at + 7))
      text.insert(at + 1, "<wbr/>");
  }
  out << '>' << text << "</" << tag << '>';
}

void table(std::ostream& out, const Table& t) {
  out << "<table>\n<thead><tr>";
  for (const Column& c : t.columns) cell(out, "th", Cell(c.title), c.align == Align::kRight);
  out << "</tr></thead>\n<tbody>\n";
  for (const std::vector<Cell>& row : t.rows) {
    ZINF_CHECK(row.size() == t.columns.size(), "a table row must have one cell per column");
    out << "<tr>";
    for (std::size_t i = 0; i < row.size(); ++i) cell(out, "td", row[i], t.columns[i].align == Align::kRight);
    out << "</tr>\n";
  }
  out << "</tbody>\n</table>\n";
}

}  // namespace

void write_html(const Document& document, std::ostream& out) {
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
      << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n"
      << "<title>" << xml_escape(document.title) << "</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n"
      << "<h1>" << xml_escape(document.title) << "</h1>\n";
  for (const Section& section : document.sections) {
    out << "<section>\n<h2>" << xml_escape(section.title) << "</h2>\n";
    if (!section.fields.empty()) {
      out << "<table class=\"fields\">\n<tbody>\n";
      for (const auto& [key, value] : section.fields) {
        out << "<tr>";
        cell(out, "td", Cell(key), false);
        cell(out, "td", value, false);
        out << "</tr>\n";
      }
      out << "</tbody>\n</table>\n";
    }
    // Charts before the table: the table is the detail behind them (a sweep's rows, a step list).
    // A chart without data is not drawn: an empty frame or a flat line at zero on a -1..1 axis says
    // less than the line saying why it is absent.
    for (const Chart& chart : section.charts) {
      if (!chart_has_data(chart)) {
        out << "<p class=\"note muted\">" << xml_escape(chart_absence(chart)) << "</p>\n";
        continue;
      }
      out << "<figure>\n";
      write_svg(chart, out);
      out << "<figcaption>" << xml_escape(chart.title) << "</figcaption>\n</figure>\n";
    }
    if (!section.table.columns.empty()) {
      out << "<div class=\"table-wrap\">\n";
      table(out, section.table);
      out << "</div>\n";
    }
    for (const std::string& note : section.notes) out << "<p class=\"note\">" << xml_escape(note) << "</p>\n";
    out << "</section>\n";
  }
  out << "</body>\n</html>\n";
}

}  // namespace zinf::reports
