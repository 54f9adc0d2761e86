#include "reports/text_writer.h"

#include <regex>
#include <sstream>
#include <string>

#include "tests/catch.h"

namespace zinf::reports {
namespace {

std::string render(const Document& document, const TextStyle& style = {}) {
  std::ostringstream out;
  write_text(document, out, style);
  return out.str();
}

std::string without_sgr(const std::string& text) { return std::regex_replace(text, std::regex("\x1b\\[[0-9;]*m"), ""); }

Document memory_document() {
  Section memory;
  memory.title = "Memory";
  memory.fields = {{"params", Cell("1.00T", Emphasis::kStrong)}, {"speedup", Cell("2×", Emphasis::kGood)}};
  memory.table.columns = {{"tier", Align::kLeft}, {"used", Align::kRight}, {"state", Align::kLeft}};
  memory.table.rows = {{Cell("device"), Cell("80 GiB"), Cell("fits", Emphasis::kGood)},
                       {Cell("nvme"), Cell("1×", Emphasis::kWarn), Cell("full", Emphasis::kBad)},
                       {Cell("cpu"), Cell("→", Emphasis::kMuted), Cell("")}};
  memory.notes = {"NVMe reads bound the step."};
  return {.title = "Plan µ", .sections = {memory}};
}

TEST_CASE("text: fields, right- and left-aligned columns, notes") {
  CHECK(render(memory_document()) ==
        "Plan µ\n"
        "======\n"
        "\n"
        "Memory\n"
        "  params   1.00T\n"
        "  speedup  2×\n"
        "\n"
        "  tier      used  state\n"
        "  ------  ------  -----\n"
        "  device  80 GiB  fits\n"
        "  nvme        1×  full\n"
        "  cpu          →\n"
        "\n"
        "  NVMe reads bound the step.\n");
}

TEST_CASE("text: widths count UTF-8 code points, not bytes") {
  CHECK(display_width("1×") == 2);
  CHECK(display_width("→ µs") == 4);
  CHECK(display_width("") == 0);
  Section section;
  section.table.columns = {{"x", Align::kRight}, {"y", Align::kLeft}};
  section.table.rows = {{Cell("1×"), Cell("a")}, {Cell("10"), Cell("b")}};
  CHECK(render({.title = "", .sections = {section}}) ==
        "   x  y\n"
        "  --  -\n"
        "  1×  a\n"
        "  10  b\n");
}

TEST_CASE("text: no escape bytes without color") {
  const std::string plain = render(memory_document(), {.color = false, .width = 100});
  CHECK(plain.find('\x1b') == std::string::npos);
}

TEST_CASE("text: color marks emphasis and headings, and padding ignores escape codes") {
  const std::string colored = render(memory_document(), {.color = true, .width = 100});
  CHECK(colored.find("\x1b[1mPlan µ\x1b[0m\n") != std::string::npos);
  CHECK(colored.find("\x1b[1mMemory\x1b[0m\n") != std::string::npos);
  CHECK(colored.find("  params   \x1b[1m1.00T\x1b[0m\n") != std::string::npos);
  CHECK(colored.find("  speedup  \x1b[32m2×\x1b[0m\n") != std::string::npos);
  CHECK(colored.find("  nvme        \x1b[33m1×\x1b[0m  \x1b[31mfull\x1b[0m\n") != std::string::npos);
  CHECK(colored.find("  cpu          \x1b[2m→\x1b[0m\n") != std::string::npos);
  CHECK(colored.find("\x1b[1mtier\x1b[0m      \x1b[1mused\x1b[0m") != std::string::npos);
  CHECK(without_sgr(colored) == render(memory_document()));
}

TEST_CASE("text: notes wrap at the width, indented, long words kept whole") {
  Section section;
  section.title = "Why";
  section.notes = {"alpha beta gamma delta epsilon", "x averyveryverylongword y", "  "};
  CHECK(render({.title = "", .sections = {section}}, {.color = false, .width = 20}) ==
        "Why\n"
        "  alpha beta gamma\n"
        "  delta epsilon\n"
        "\n"
        "  x\n"
        "  averyveryverylongword\n"
        "  y\n");
}

TEST_CASE("text: sections are separated by one blank line, empty parts leave no trace") {
  Section first;
  first.title = "A";
  first.fields = {{"k", Cell("")}};
  Section second;
  second.title = "B";
  second.notes = {"n"};
  CHECK(render({.title = "T", .sections = {first, second}}) ==
        "T\n"
        "=\n"
        "\n"
        "A\n"
        "  k\n"
        "\n"
        "B\n"
        "  n\n");
}

}  // namespace
}  // namespace zinf::reports
