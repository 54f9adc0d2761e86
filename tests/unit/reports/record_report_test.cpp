// Report of records against hand-made fixtures (tests/fixtures/reports/README.md gives the figures)
// and every record kind the project writes (fixtures made by running the commands).
#include "reports/record_report.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "reports/csv_writer.h"
#include "reports/html_writer.h"
#include "reports/markdown_writer.h"
#include "tests/catch.h"
#include "tests/unit/reports/fixture.h"

namespace zinf::reports {
namespace {

using nlohmann::json;

using test::fixture;

const Section* find_section(const Document& doc, const std::string& title_end) {
  for (const Section& s : doc.sections) {
    if (s.title.size() >= title_end.size() &&
        s.title.compare(s.title.size() - title_end.size(), title_end.size(), title_end) == 0) {
      return &s;
    }
  }
  return nullptr;
}

const Chart* find_chart(const Section& s, const std::string& title) {
  for (const Chart& c : s.charts) {
    if (c.title == title) return &c;
  }
  return nullptr;
}

std::string field(const Section& s, const std::string& key) {
  for (const auto& [k, v] : s.fields) {
    if (k == key) return v.text;
  }
  return "(missing)";
}

TEST_CASE("train report: loss with held-out points and the entropy floor", "[report]") {
  const Document doc = report_of_records({{"small-train.json", fixture("small-train.json")}});
  const Section* loss = find_section(doc, "Loss");
  REQUIRE(loss != nullptr);
  const Chart* chart = find_chart(*loss, "Loss per step");
  REQUIRE(chart != nullptr);
  REQUIRE(chart->series.size() == 2);
  CHECK(chart->series[0].x == std::vector<double>{0, 1, 2});
  CHECK(chart->series[0].y == std::vector<double>{3.0, 2.5, 2.0});
  CHECK(chart->series[1].points_only);
  CHECK(chart->series[1].x == std::vector<double>{2});
  CHECK(chart->series[1].y == std::vector<double>{2.25});
  REQUIRE(chart->references.size() == 1);
  CHECK(chart->references[0].y == 1.25);
  CHECK(field(*loss, "final loss") == "2.5000 nats/token");
  CHECK(field(*loss, "loss above the floor") == "+80.0%");
}

TEST_CASE("train report: step time, phases, memory against budget, links", "[report]") {
  const Document doc = report_of_records({{"small-train.json", fixture("small-train.json")}});
  const Section* time = find_section(doc, "Step time");
  REQUIRE(time != nullptr);
  const Chart* steps = find_chart(*time, "Step time per step (warm-up steps apart)");
  REQUIRE(steps != nullptr);
  CHECK(steps->series[0].y == std::vector<double>{30.0, 32.0});  // measured
  CHECK(steps->series[1].y == std::vector<double>{40.0});        // warm-up
  CHECK(steps->series[2].name == "stall");
  CHECK(steps->series[2].y == std::vector<double>{0.0, 2.0, 1.0});
  const Chart* phases = find_chart(*time, "Phase breakdown per step");
  REQUIRE(phases != nullptr);
  CHECK(phases->kind == ChartKind::kStackedBar);
  CHECK(phases->categories == std::vector<std::string>{"0", "1", "2"});
  std::vector<std::string> names;
  for (const Series& s : phases->series) names.push_back(s.name);
  CHECK(names == std::vector<std::string>{"data", "forward", "backward", "optimizer"});
  CHECK(phases->series[2].y == std::vector<double>{20.0, 16.0, 17.0});
  CHECK(field(*time, "median") == "31 ms");

  const Section* memory = find_section(doc, "Memory per tier");
  REQUIRE(memory != nullptr);
  const Chart* tiers = find_chart(*memory, "Peak memory per tier against its budget");
  REQUIRE(tiers != nullptr);
  CHECK(tiers->categories == std::vector<std::string>{"device", "host"});
  CHECK(tiers->y_quantity == Quantity::kBytes);  // the SVG scales the axis (GiB here)
  CHECK(tiers->series[0].y == std::vector<double>{2.0 * 1073741824.0, 0.5 * 1073741824.0});
  CHECK(tiers->series[1].y[0] == 4.0 * 1073741824.0);
  CHECK(std::isnan(tiers->series[1].y[1]));  // no host budget

  const Section* links = find_section(doc, "Links: bytes and GB/s");
  REQUIRE(links != nullptr);
  const Chart* gbps = find_chart(*links, "Achieved GB/s per link");
  REQUIRE(gbps != nullptr);
  CHECK(gbps->categories == std::vector<std::string>{"host_to_device", "nvme_read"});
  CHECK(gbps->series[0].y == std::vector<double>{10.0, 2.5});
}

TEST_CASE("train report: the plan next to what was measured, per phase, tier and link", "[report]") {
  json record = fixture("small-train.json");
  record["plan"] = {
      {"schedule", "zinf"},
      {"rows",
       {{{"figure", "step"}, {"unit", "ms"}, {"predicted", 237.0}, {"measured", 318.1}, {"error_percent", -25.5}},
        {{"figure", "nvme peak"},
         {"unit", "bytes"},
         {"predicted", 46298112.0},
         {"measured", 46298112.0},
         {"error_percent", 0.0}},
        {{"figure", "nvme_read"},
         {"unit", "bytes/step"},
         {"predicted", 0.0},
         {"measured", 0.0},
         {"error_percent", nullptr}}}},
      {"hardware", {{"memory_bandwidth", 1e10}, {"source", {{"from", "measured in this run"}}}}}};
  const Document doc = report_of_records({{"p.json", record}});
  const Section* plan = find_section(doc, "Plan vs measured (zinf schedule)");
  REQUIRE(plan != nullptr);
  REQUIRE(plan->table.rows.size() == 3);
  const std::vector<std::string> step = {"step", "phase", "237 ms", "318 ms", "-25.5%"};
  for (std::size_t c = 0; c < step.size(); ++c) CHECK(plan->table.rows[0][c].text == step[c]);
  CHECK(plan->table.rows[0][4].emphasis == Emphasis::kWarn);  // 20% or more off
  CHECK(plan->table.rows[1][1].text == "tier peak");
  CHECK(plan->table.rows[1][2].text == "44.2 MiB");  // 46298112 / 2^20 = 44.15
  CHECK(plan->table.rows[2][1].text == "link");
  CHECK(plan->table.rows[2][3].text == "0 B/step");
  CHECK(plan->table.rows[2][4].text == "-");
  const Section* assumed = find_section(doc, "What the plan assumed");
  REQUIRE(assumed != nullptr);
  CHECK(field(*assumed, "hardware") == "measured in this run");
  CHECK(field(*assumed, "hardware figures") == "memory bandwidth 10.0 GB/s");
  const Section* other = find_section(doc, "Other fields");
  REQUIRE(other != nullptr);
  for (const auto& row : other->table.rows) CHECK(row[0].text.rfind("plan.", 0) != 0);
}

TEST_CASE("a field no renderer knows still appears", "[report]") {
  const Document doc = report_of_records({{"small-train.json", fixture("small-train.json")}});
  const Section* other = find_section(doc, "Other fields");
  REQUIRE(other != nullptr);
  bool found = false;
  for (const auto& row : other->table.rows)
    found = found || (row[0].text == "summary.brand_new_figure" && row[1].text == "42");
  CHECK(found);
}

TEST_CASE("bench io report: zinf next to fio with the ratio's range and the too-wide flag", "[report]") {
  const Document doc = report_of_records({{"small-bench-io.json", fixture("small-bench-io.json")}});
  const Section* s = find_section(doc, "zinf next to fio");
  REQUIRE(s != nullptr);
  REQUIRE(s->table.rows.size() == 2);
  CHECK(s->table.rows[0][1].text == "3 (2.9..3.1)");
  CHECK(s->table.rows[0][2].text == "3.2 (3.1..3.3)");
  CHECK(s->table.rows[0][3].text == "0.94 (0.88..1.00)");
  CHECK(s->table.rows[1][3].text == "0.80 (0.38..1.08), spread too wide to judge");
  CHECK(s->table.rows[1][3].emphasis == Emphasis::kWarn);
  REQUIRE(s->charts.size() == 1);
  CHECK(s->charts[0].series[0].y == std::vector<double>{3.0, 2.0});
  CHECK(s->charts[0].series[3].y == std::vector<double>{3.2, 2.5});
}

TEST_CASE("bench scaling report: one row per world size and throughput against ranks", "[report]") {
  const Document doc = report_of_records({{"small-bench-scaling.json", fixture("small-bench-scaling.json")}});
  const Section* s = find_section(doc, "Scaling over ranks");
  REQUIRE(s != nullptr);
  REQUIRE(s->table.rows.size() == 3);
  // ranks, batch/rank, tokens/s, step ms, min..max, comm ms, waited ms, hidden, speed-up, efficiency, plan, ratio
  const std::vector<std::string> two = {"2",  "4",   "1800",  "284.4", "280..300", "40",
                                        "10", "75%", "1.80x", "90%",   "128",      "2.22x"};
  for (std::size_t c = 0; c < two.size(); ++c) CHECK(s->table.rows[1][c].text == two[c]);
  CHECK(s->table.rows[1][9].emphasis == Emphasis::kGood);  // efficiency >= 90%
  CHECK(s->table.rows[0][7].text == "-");                  // nothing communicated at one rank
  CHECK(s->table.rows[2][10].text == "-");                 // infeasible plan
  REQUIRE(s->charts.size() == 1);
  const Chart& chart = s->charts[0];
  REQUIRE(chart.series.size() == 3);
  CHECK(chart.series[0].x == std::vector<double>{1, 2, 4});
  CHECK(chart.series[0].y == std::vector<double>{1000, 1800, 2000});
  CHECK(chart.series[1].y == std::vector<double>{1000, 2000, 4000});  // ideal: linear from 1 rank
  CHECK(chart.series[2].x == std::vector<double>{1, 2});              // the plan where it fits
  CHECK(chart.series[2].points_only);
  CHECK(std::find(s->notes.begin(), s->notes.end(), "A hand-made scaling record.") != s->notes.end());
}

TEST_CASE("an unknown record kind renders its arrays as a table and a chart", "[report]") {
  const Document doc = report_of_records({{"unknown-kind.json", fixture("unknown-kind.json")}});
  const Section* s = find_section(doc, "results");
  REQUIRE(s != nullptr);
  CHECK(s->table.columns.size() == 3);
  CHECK(s->table.rows.size() == 3);
  CHECK(s->table.rows[1][0].text == "8.25 GB/s");  // columns in key order: busbw_gbps, bytes, time_us
  REQUIRE(s->charts.size() == 1);
  const Section* other = find_section(doc, "Other fields");
  REQUIRE(other != nullptr);
  CHECK(other->table.rows.size() == 2);  // collective, ranks
}

TEST_CASE("every record kind the project writes renders to HTML, Markdown and CSV with its charts", "[report]") {
  struct Expect {
    const char* file;
    std::size_t min_charts;
  };
  // train (ZeRO-0: no byte crosses a link, so no link charts): loss, step time, phases, memory; bench io: 1;
  // bench train: 1;
  // plan: one per tier that holds states (7B on dgx-h100: the GPU) + resources; sweep: two curves + the feasible
  // region.
  const Expect kinds[] = {
      {"train.json", 4},      {"bench-io.json", 1},   {"bench-train.json", 1},        {"plan.json", 2},
      {"plan-sweep.json", 3}, {"max-params.json", 1}, {"small-bench-scaling.json", 1}};
  for (const Expect& e : kinds) {
    INFO(e.file);
    const Document doc = report_of_records({{e.file, fixture(e.file)}});
    std::size_t charts = 0;
    for (const Section& s : doc.sections) charts += s.charts.size();
    CHECK(charts >= e.min_charts);
    std::ostringstream html, md, csv;
    write_html(doc, html);
    write_markdown(doc, md);
    write_csv(document_csv(doc), csv);
    if (e.min_charts > 0) CHECK(html.str().find("<svg") != std::string::npos);
    CHECK(html.str().find("http:") == std::string::npos);
    CHECK(html.str().find("<script") == std::string::npos);
    if (e.min_charts > 0) CHECK(md.str().find("*Figure: ") != std::string::npos);
    CHECK(csv.str().rfind("section,item,row,column,value\n", 0) == 0);
  }
}

TEST_CASE("several train records: a side-by-side table and a scaling chart", "[report]") {
  json bigger = fixture("small-train.json");
  bigger["model"]["params"] = 4000;
  bigger["summary"]["tokens_per_s"] = 2000.0;
  const Document doc = report_of_records({{"a.json", fixture("small-train.json")}, {"b.json", bigger}});
  REQUIRE(!doc.sections.empty());
  const Section& side = doc.sections.front();
  CHECK(side.title == "Train runs side by side");
  CHECK(side.table.columns.size() == 3);
  CHECK(side.table.rows[0][0].text == "parameters");
  CHECK(side.table.rows[0][2].text == "4000");
  REQUIRE(side.charts.size() == 1);  // no ranks field in these records: model size only
  CHECK(side.charts[0].series[0].x == std::vector<double>{1000, 4000});
  CHECK(side.charts[0].series[0].y == std::vector<double>{8258.0645, 2000.0});
}

// The (row, column) pairs of the CSV cells of the table of the section whose title ends in `title_end`.
std::vector<std::pair<std::string, std::string>> csv_cells(const Document& doc, const std::string& title_end) {
  std::vector<std::pair<std::string, std::string>> cells;
  for (const std::vector<Cell>& r : document_csv(doc).rows) {
    const std::string& section = r[0].text;
    if (r[1].text == "table" && section.size() >= title_end.size() &&
        section.compare(section.size() - title_end.size(), title_end.size(), title_end) == 0) {
      cells.emplace_back(r[2].text, r[3].text + "=" + r[4].text);
    }
  }
  return cells;
}

TEST_CASE("document CSV keys generic table rows by number, or by a name that identifies them", "[report]") {
  // The first column is a measured value (busbw 1.5 twice) and the last element lacks it: keyed by
  // that value, two rows shared one key and a third had an empty one.
  const json record = {{"schema", "zinf.widget/1"},
                       {"rows",
                        {{{"busbw_gbps", 1.5}, {"op", "all_reduce"}},
                         {{"busbw_gbps", 1.5}, {"op", "all_gather"}},
                         {{"op", "broadcast"}}}}};
  const std::vector<std::pair<std::string, std::string>> cells =
      csv_cells(report_of_records({{"widget.json", record}}), "rows");
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"1", "busbw_gbps=1.5 GB/s"}, {"1", "op=all_reduce"}, {"2", "busbw_gbps=1.5 GB/s"},
      {"2", "op=all_gather"},       {"3", "busbw_gbps="},   {"3", "op=broadcast"}};
  CHECK(cells == expected);

  // A "name" that tells every element apart keys the rows, wherever it stood. Values carry the unit
  // their key names (gbps: GB/s).
  const json named = {{"schema", "zinf.widget/1"},
                      {"tests", {{{"gbps", 2.0}, {"name", "seq-read"}}, {{"gbps", 1.0}, {"name", "seq-write"}}}}};
  const std::vector<std::pair<std::string, std::string>> by_name =
      csv_cells(report_of_records({{"widget.json", named}}), "tests");
  const std::vector<std::pair<std::string, std::string>> expected_names = {{"seq-read", "gbps=2 GB/s"},
                                                                           {"seq-write", "gbps=1 GB/s"}};
  CHECK(by_name == expected_names);
}

TEST_CASE("document CSV carries fields, table cells and chart points", "[report]") {
  const Document doc = report_of_records({{"small-bench-io.json", fixture("small-bench-io.json")}});
  std::ostringstream csv;
  write_csv(document_csv(doc), csv);
  CHECK(csv.str().find("figure: GB/s per test: zinf next to fio (median),seq-read,zinf,3\n") != std::string::npos);
  CHECK(csv.str().find(",table,seq-write,zinf/fio (range),") != std::string::npos);
}

}  // namespace
}  // namespace zinf::reports
