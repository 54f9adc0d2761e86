#include "reports/markdown_writer.h"

#include <sstream>
#include <string>

#include "tests/catch.h"

namespace zinf::reports {
namespace {

std::string render(const Document& document) {
  std::ostringstream out;
  write_markdown(document, out);
  return out.str();
}

TEST_CASE("markdown: headings, field list, pipe table with alignment row, notes") {
  Section memory;
  memory.title = "Memory";
  memory.fields = {{"params", Cell("1.00T", Emphasis::kStrong)}, {"speedup", Cell("2×", Emphasis::kGood)}};
  memory.table.columns = {{"tier", Align::kLeft}, {"used", Align::kRight}};
  memory.table.rows = {{Cell("device|host"), Cell("80 GiB")}, {Cell("nvme"), Cell("full", Emphasis::kBad)}};
  memory.notes = {"NVMe reads bound the step.", "Second note."};
  CHECK(render({.title = "Plan", .sections = {memory}}) ==
        "# Plan\n"
        "\n"
        "## Memory\n"
        "\n"
        "- params: **1.00T**\n"
        "- speedup: 2×\n"
        "\n"
        "| tier         |     used |\n"
        "| ------------ | -------: |\n"
        "| device\\|host |   80 GiB |\n"
        "| nvme         | **full** |\n"
        "\n"
        "NVMe reads bound the step.\n"
        "\n"
        "Second note.\n");
}

TEST_CASE("markdown: markup characters and line breaks render as text") {
  Section section;
  section.title = "a_b";
  section.table.columns = {{"x", Align::kRight}};
  section.table.rows = {{Cell("2*3\nok")}, {Cell("", Emphasis::kStrong)}};
  section.notes = {"- not a list", "1. not ordered", "<b>"};
  CHECK(render({.title = "", .sections = {section}}) ==
        "## a\\_b\n"
        "\n"
        "|       x |\n"
        "| ------: |\n"
        "| 2\\*3 ok |\n"
        "|         |\n"
        "\n"
        "\\- not a list\n"
        "\n"
        "1\\. not ordered\n"
        "\n"
        "\\<b\\>\n");
}

}  // namespace
}  // namespace zinf::reports
