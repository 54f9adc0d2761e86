#include "reports/csv_writer.h"

#include <sstream>
#include <string>
#include <vector>

#include "tests/catch.h"

namespace zinf::reports {
namespace {

TEST_CASE("csv: table with header, emphasis dropped, special fields quoted") {
  Table table;
  table.columns = {{"tier", Align::kLeft}, {"used, GiB", Align::kRight}};
  table.rows = {
      {Cell("device"), Cell("80", Emphasis::kBad)}, {Cell("say \"hi\""), Cell("two\nlines")}, {Cell("cr\r"), Cell("")}};
  std::ostringstream out;
  write_csv(table, out);
  CHECK(out.str() ==
        "tier,\"used, GiB\"\n"
        "device,80\n"
        "\"say \"\"hi\"\"\",\"two\nlines\"\n"
        "\"cr\r\",\n");
}

TEST_CASE("csv: raw rows, with and without a header") {
  const std::vector<std::vector<std::string>> rows = {{"1", "0.5"}, {"2", "a,b"}};
  std::ostringstream with_header;
  write_csv({"step", "ms"}, rows, with_header);
  CHECK(with_header.str() == "step,ms\n1,0.5\n2,\"a,b\"\n");

  std::ostringstream without_header;
  write_csv({}, rows, without_header);
  CHECK(without_header.str() == "1,0.5\n2,\"a,b\"\n");
}

TEST_CASE("csv: a lone empty field is quoted so the record is not lost, no columns writes nothing") {
  std::ostringstream single;
  write_csv({"name"}, {{""}}, single);
  CHECK(single.str() == "name\n\"\"\n");

  std::ostringstream empty;
  write_csv(Table{}, empty);
  CHECK(empty.str().empty());
}

}  // namespace
}  // namespace zinf::reports
