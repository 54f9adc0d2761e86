#include "apps/zinf/peers_render.h"

#include <string>
#include <vector>

#include <fmt/format.h>

#include "reports/record_report.h"

namespace zinf::cli {

Rendered render_bench_peers(const nlohmann::json& record) {
  using nlohmann::json;
  Rendered out;
  out.record = record;
  out.document.title = "zinf bench peers: zinf | DeepSpeed | PyTorch on this machine";
  // The same sections `zinf report` shows for this record (reports/peers_report.cpp).
  out.document.sections = reports::record_sections(record, "");
  out.csv.columns = {
      {"row"},          {"unit"},         {"zinf_median"}, {"deepspeed_median"}, {"pytorch_median"}, {"reference"},
      {"zinf_over_ds"}, {"zinf_over_pt"}, {"errors"}};
  const auto median = [](const json& side) {
    return side.is_object() && side.contains("median") ? fmt::format("{}", side.at("median").get<double>())
                                                       : std::string();
  };
  const auto ratio = [](const json& ratios, const char* key) {
    return ratios.contains(key) && ratios.at(key).at("value").is_number()
               ? fmt::format("{}", ratios.at(key).at("value").get<double>())
               : std::string();
  };
  for (const json& row : record.at("rows")) {
    std::vector<std::string> errors;
    for (const char* side : {"zinf", "deepspeed", "pytorch"}) {
      if (row.at(side).is_object() && row.at(side).contains("error")) {
        errors.push_back(fmt::format("{}: {}", side, row.at(side).at("error").get<std::string>()));
      }
    }
    const json& ratios = row.at("ratios");
    out.csv.rows.push_back({row.at("name").get<std::string>(), row.at("unit").get<std::string>(),
                            median(row.at("zinf")), median(row.at("deepspeed")), median(row.at("pytorch")),
                            median(row.at("reference")), ratio(ratios, "zinf/deepspeed"), ratio(ratios, "zinf/pytorch"),
                            fmt::format("{}", fmt::join(errors, "; "))});
  }
  return out;
}

}  // namespace zinf::cli
