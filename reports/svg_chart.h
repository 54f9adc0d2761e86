// SVG chart writer: draws a Chart (chart.h) as one inline <svg> element for the HTML report —
// axes with rounded ticks, a legend, reference lines, a <title> per point so hovering shows the
// value (no JavaScript). The output is well-formed XML (every text escaped), uses no external
// resources (not even an xmlns URL: HTML5 puts <svg> in the SVG namespace itself), and has a fixed viewBox with width
// 100% so it scales with the page.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "reports/chart.h"

namespace zinf::reports {

// Writes `chart` as an <svg> element. A chart without any finite value draws its frame and the
// words "no data" instead of axes. Stream errors are left in out's state.
void write_svg(const Chart& chart, std::ostream& out);

// `text` with &, <, >, " and ' replaced by entities, so it can stand in XML text and attributes.
std::string xml_escape(std::string_view text);

// About `target` (>= 2) round tick values covering [low, high]: steps of 1, 2 or 5 times a power of
// ten, the first tick <= low and the last >= high. low == high gives a range around the value.
std::vector<double> nice_ticks(double low, double high, int target);

}  // namespace zinf::reports
