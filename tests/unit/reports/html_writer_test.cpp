// HTML writer and SVG charts: escaping, self-containment, ticks.
#include "reports/html_writer.h"

#include <sstream>

#include "reports/svg_chart.h"
#include "tests/catch.h"

namespace zinf::reports {
namespace {

TEST_CASE("html: escaped text, one svg per chart, no external references", "[html]") {
  Document doc;
  doc.title = "a <b> & 'c'";
  Section s;
  s.title = "S";
  s.fields = {{"k", Cell("v<1>", Emphasis::kBad)}};
  Chart chart;
  chart.title = "line & dots";
  chart.series = {{"s1", {1, 2, 3}, {4, 5, 6}, false}};
  chart.references = {{"floor", 4.5}};
  s.charts = {chart, chart};
  doc.sections.push_back(s);
  std::ostringstream out;
  write_html(doc, out);
  const std::string html = out.str();
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("<title>a &lt;b&gt; &amp; &#39;c&#39;</title>") != std::string::npos);
  CHECK(html.find("<td class=\"bad\">v&lt;1&gt;</td>") != std::string::npos);
  std::size_t svgs = 0;
  for (std::size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++svgs;
  CHECK(svgs == 2);
  CHECK(html.find("http") == std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("<polyline") != std::string::npos);
  CHECK(html.find("floor 4.5") != std::string::npos);
}

TEST_CASE("svg: a chart without finite values says no data", "[html]") {
  Chart chart;
  chart.title = "empty";
  chart.series = {{"s", {1}, {std::nan("")}, false}};
  std::ostringstream out;
  write_svg(chart, out);
  CHECK(out.str().find("no data") != std::string::npos);
}

TEST_CASE("nice ticks are 1, 2 or 5 times a power of ten and cover the range", "[html]") {
  CHECK(nice_ticks(0, 10, 5) == std::vector<double>{0, 5, 10});
  CHECK(nice_ticks(0.3, 9.1, 5) == std::vector<double>{0, 5, 10});
  CHECK(nice_ticks(0, 1, 6) == std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1});
  const std::vector<double> t = nice_ticks(3, 3, 5);  // a single value gets a range around it
  CHECK(t.front() <= 3);
  CHECK(t.back() >= 3);
}

}  // namespace
}  // namespace zinf::reports
