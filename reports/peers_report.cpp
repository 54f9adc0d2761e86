// `zinf bench peers` records (apps/zinf/bench_peers.h) as report sections: the side-by-side table
// "zinf | DeepSpeed | PyTorch" (each side's median and range over the rounds, the reference, the
// zinf/peer ratios with their spread, every peer error), and the first steps' losses.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "reports/chart.h"
#include "reports/report_parts.h"

namespace zinf::reports::detail {
namespace {

using nlohmann::json;

// "median (min..max)", the side's error, or "-" when the side does not take part in the row.
std::string side_cell(const json& side) {
  if (side.is_null()) return "-";
  if (side.contains("error")) {
    std::string error = side.at("error").get<std::string>();
    if (error.size() > 60) error = error.substr(0, 57) + "...";
    return "error: " + error;
  }
  if (!side.contains("median")) return "-";
  return fmt::format("{} ({}..{})", reports::format_figure(side.at("median").get<double>()),
                     reports::format_figure(side.at("min").get<double>()),
                     reports::format_figure(side.at("max").get<double>()));
}

std::string ratio_cell(const json& ratios, const std::string& key) {
  if (!ratios.contains(key)) return "-";
  const json& r = ratios.at(key);
  if (!r.at("value").is_number()) return "-";
  return fmt::format("{:.2f} ({:.2f}..{:.2f}){}", r.at("value").get<double>(), r.at("low").get<double>(),
                     r.at("high").get<double>(), r.value("too_wide", false) ? " wide" : "");
}

std::string losses_text(const json& losses) {
  std::vector<std::string> parts;
  for (const json& l : losses) parts.push_back(fmt::format("{:.4f}", l.get<double>()));
  return fmt::format("{}", fmt::join(parts, " "));
}

}  // namespace

std::vector<Section> bench_peers_sections(const json& record, const std::string& heading) {
  std::vector<Section> out;
  out.push_back(envelope_section(record, heading));
  Section table = titled(heading, "Side by side: zinf | DeepSpeed | PyTorch");
  const json& versions = record.value("peer_versions", json(nullptr));
  if (versions.is_object()) {
    table.fields.emplace_back(
        "peers", fmt::format("DeepSpeed {}, PyTorch {}, Python {}", versions.value("deepspeed", std::string("?")),
                             versions.value("torch", std::string("?")), versions.value("python", std::string("?"))));
  }
  table.fields.emplace_back("zinf", record.at("generator").value("version", std::string("?")));
  const json& input = record.at("input");
  table.fields.emplace_back("rounds",
                            fmt::format("{} per item, alternating who goes first; {} threads",
                                        input.at("repeat").get<std::int64_t>(), input.at("threads").get<int>()));
  table.table.columns = {{"row"},
                         {"unit"},
                         {"zinf", Align::kRight},
                         {"DeepSpeed", Align::kRight},
                         {"PyTorch", Align::kRight},
                         {"reference", Align::kRight},
                         {"zinf/DeepSpeed", Align::kRight},
                         {"zinf/PyTorch", Align::kRight}};
  for (const json& row : record.at("rows")) {
    const json& ratios = row.at("ratios");
    std::string reference = side_cell(row.at("reference"));
    if (!row.at("reference").is_null()) reference = row.at("reference").at("name").get<std::string>() + " " + reference;
    table.table.rows.push_back({row.at("name").get<std::string>(), row.at("unit").get<std::string>(),
                                side_cell(row.at("zinf")), side_cell(row.at("deepspeed")), side_cell(row.at("pytorch")),
                                row.at("reference").is_null() ? "-" : reference, ratio_cell(ratios, "zinf/deepspeed"),
                                ratio_cell(ratios, "zinf/pytorch")});
    for (const char* side : {"zinf", "deepspeed", "pytorch"}) {
      if (row.at(side).is_object() && row.at(side).contains("error")) {
        table.notes.push_back(fmt::format("{} — {}: {}", row.at("name").get<std::string>(), side,
                                          row.at(side).at("error").get<std::string>()));
      }
    }
  }
  table.notes.push_back(
      "Each cell: median (min..max) over the rounds. Ratios are zinf/peer of the medians, with the range pairing the "
      "extreme rounds; 'wide' marks a side whose rounds disagree by more than 20% (" +
      record.value("spread_rule", std::string()) + "). For peak RSS lower is better, so a ratio below 1 favours zinf.");
  out.push_back(std::move(table));

  Section losses = titled(heading, "First steps' losses (first round of each training item)");
  losses.table.columns = {{"item"}, {"side"}, {"losses, warm-up steps first"}};
  for (const json& round : record.at("rounds")) {
    if (round.at("round").get<std::int64_t>() != 1 || !round.at("zinf").contains("losses")) continue;
    const std::string item = round.at("item").get<std::string>();
    losses.table.rows.push_back({item, "zinf", losses_text(round.at("zinf").at("losses"))});
    for (const auto& [mode, peer] : round.at("peers").items()) {
      losses.table.rows.push_back(
          {item, mode, peer.contains("losses") ? losses_text(peer.at("losses")) : std::string("-")});
    }
  }
  losses.notes.push_back(
      "Not the same initial weights nor the same data: zinf draws its own initial weights and trains on its Markov "
      "source; the peers use scripts/torch_gpt.py's initialisation and uniform random tokens. The losses show each "
      "run trained; they are not a correctness comparison.");
  if (!losses.table.rows.empty()) out.push_back(std::move(losses));
  return out;
}

}  // namespace zinf::reports::detail
