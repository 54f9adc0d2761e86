// HTML writer: renders a Document as one self-contained HTML page — inline CSS, charts as inline
// SVG (svg_chart.h), no scripts, no fonts, images or style sheets fetched from anywhere — so a
// report can be archived as a CI artifact and opened years later, offline, with JavaScript off.
//
// The page is also well-formed XML (XHTML syntax: every element closed, attributes quoted, text
// escaped), so both HTML5 and XML parsers accept it. Fields become a two-column table, tables a
// <table> after the section's charts (numbers right-aligned, long cells wrapped so a table fits the
// page, which is up to 1560 px wide), each chart a <figure> with its SVG and a caption (figures sit
// side by side where the page is wide enough), notes paragraphs. A chart without data
// (chart_has_data) is left out and one line says why. Emphasis becomes a CSS class (strong, good,
// warn, bad, muted).
#pragma once

#include <ostream>

#include "reports/document.h"

namespace zinf::reports {

// Writes `document` as a complete page. Precondition: every table row has exactly columns.size()
// cells (ZINF_CHECK). Stream errors are left in out's state.
void write_html(const Document& document, std::ostream& out);

}  // namespace zinf::reports
