#include "apps/zinf/peer_rows.h"

#include <fmt/format.h>

#include "probes/latency_stats.h"
#include "probes/ratio_spread.h"

namespace zinf::cli {

using nlohmann::json;
using probes::ratio_with_spread;
using probes::SampleSpread;
using probes::spread_of;

json Rows::to_json() const {
  json out = json::array();
  for (const std::string& name : order_) {
    const Row& row = rows_.at(name);
    json r = {{"name", name},
              {"item", row.item},
              {"unit", row.unit},
              {"what", row.what},
              {"higher_is_better", row.higher_is_better}};
    std::vector<double> zinf;
    for (const char* side : {"zinf", "deepspeed", "pytorch", "reference"}) {
      const auto found = row.sides.find(side);
      if (found == row.sides.end()) {
        r[side] = nullptr;
        continue;
      }
      json s = found->second;
      std::vector<double> samples = s.at("samples").get<std::vector<double>>();
      if (!samples.empty()) {
        const SampleSpread spread = spread_of(samples);
        s["median"] = spread.median;
        s["min"] = spread.min;
        s["max"] = spread.max;
      }
      if (std::string(side) == "zinf") zinf = samples;
      r[side] = std::move(s);
    }
    json ratios = json::object();
    for (const char* peer : {"deepspeed", "pytorch"}) {
      if (r[peer].is_null() || r[peer].contains("error") || zinf.empty()) continue;
      const std::vector<double> samples = r[peer].at("samples").get<std::vector<double>>();
      if (!samples.empty()) ratios[fmt::format("zinf/{}", peer)] = ratio_with_spread(zinf, samples);
    }
    r["ratios"] = std::move(ratios);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace zinf::cli
