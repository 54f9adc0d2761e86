// `zinf bench peers` records (apps/zinf/bench_peers.h) as report sections: the side-by-side table
// "zinf | DeepSpeed | PyTorch" (each side's median and range over the rounds, the reference, the
// zinf/peer ratios with their spread, as a table and a bar chart, every peer error), and the first steps' losses of
// every side from the same initial weights and tokens, with their largest relative difference.
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "reports/chart.h"
#include "reports/humanise.h"
#include "reports/report_parts.h"

namespace zinf::reports::detail {
namespace {

using nlohmann::json;

// One figure of a row in its unit, scaled as people read it (humanise.h): params/s and tokens/s as
// counts per second, GB/s as GB/s, peak RSS (recorded in MiB) and storage (recorded in MB) as bytes.
std::string row_figure(const std::string& unit, double value) {
  if (unit == "params/s" || unit == "tokens/s") return humane(value, Quantity::kCount) + "/s";
  if (unit == "GB/s") return humane(value, Quantity::kGBps);
  if (unit.rfind("MiB", 0) == 0) return humane(value * 1048576.0, Quantity::kBytes);
  if (unit.rfind("MB/step", 0) == 0) return humane(value * 1e6, Quantity::kBytes);
  return humane_number(value);
}

// The unit column: what the figures are, and which way is better.
std::string unit_text(const std::string& unit, bool higher_is_better) {
  std::string base = unit.substr(0, unit.find(" ("));
  if (base == "MiB") base = "peak RSS";
  if (base == "MB/step") base = "bytes/step";
  return base + (higher_is_better ? "" : ", lower is better");
}

// "median (min..max)", the side's error, or "-" when the side does not take part in the row.
std::string side_cell(const json& side, const std::string& unit) {
  if (side.is_null()) return "-";
  if (side.contains("error")) {
    std::string error = side.at("error").get<std::string>();
    if (error.size() > 60) error = error.substr(0, 57) + "...";
    return "error: " + error;
  }
  if (!side.contains("median")) return "-";
  return fmt::format("{} ({}..{})", row_figure(unit, side.at("median").get<double>()),
                     row_figure(unit, side.at("min").get<double>()), row_figure(unit, side.at("max").get<double>()));
}

std::string ratio_cell(const json& ratios, const std::string& key) {
  if (!ratios.contains(key)) return "-";
  const json& r = ratios.at(key);
  if (!r.at("value").is_number()) return "-";
  return fmt::format("{:.2f}\u00d7 ({:.2f}..{:.2f}\u00d7){}", r.at("value").get<double>(), r.at("low").get<double>(),
                     r.at("high").get<double>(), r.value("too_wide", false) ? " wide" : "");
}

double ratio_value(const json& ratios, const std::string& key) {
  if (!ratios.contains(key) || !ratios.at(key).at("value").is_number()) return std::nan("");
  return ratios.at(key).at("value").get<double>();
}

std::string losses_text(const json& losses) {
  std::vector<std::string> parts;
  for (const json& l : losses) parts.push_back(fmt::format("{:.6f}", l.get<double>()));
  return fmt::format("{}", fmt::join(parts, " "));
}

// The first round of each training item: zinf's and every peer's losses on one row each, and the
// largest relative difference over the first 3 steps (bench_peers.cpp computes it into the round).
Section losses_section(const json& record, const std::string& heading) {
  Section losses = titled(heading, "First steps' losses, same initial weights and tokens (first round)");
  losses.table.columns = {
      {"item"}, {"side"}, {"losses, warm-up steps first"}, {"max rel. diff, steps 1-3", Align::kRight}};
  for (const json& round : record.at("rounds")) {
    if (round.at("round").get<std::int64_t>() != 1 || !round.at("zinf").contains("losses")) continue;
    const std::string item = round.at("item").get<std::string>();
    losses.table.rows.push_back({item, "zinf", losses_text(round.at("zinf").at("losses")), "-"});
    const json diffs = round.value("loss_max_rel_diff", json::object());
    for (const auto& [mode, peer] : round.at("peers").items()) {
      const json diff = diffs.value(mode, json(nullptr));
      losses.table.rows.push_back({item, mode, peer.contains("losses") ? losses_text(peer.at("losses")) : "-",
                                   diff.is_number() ? humane_number(diff.get<double>()) : std::string("-")});
    }
  }
  if (record.value("init", json(nullptr)).is_object()) {
    losses.notes.push_back(
        "Every side started from the same weights (scripts/torch_gpt.py's initialisation, written by peers.py init "
        "as GPT-2-named safetensors and loaded by zinf's \"init\") and trained batch n of the same uint16 token file "
        "at step n. fp32 everywhere, so the losses agree closely but not bit for bit: the sides sum in different "
        "orders (zinf's blocked GEMMs and attention against oneDNN/ATen), which moves the first loss by about 10⁻⁷ "
        "relative; each Adam step then amplifies the gradient's rounding a little. A relative difference under 10⁻⁴ "
        "over the first 3 steps is the expected agreement; more would mean a different computation.");
  } else {
    losses.notes.push_back(
        "Not the same initial weights nor the same data (a record without \"init\"): the losses show each run "
        "trained; they are not a correctness comparison.");
  }
  return losses;
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
  Chart chart;
  chart.title = "zinf / peer per row (median over the rounds; above 1 favours zinf except where lower is better)";
  chart.kind = ChartKind::kBar;
  chart.x_label = "row";
  chart.y_label = "zinf / peer";
  chart.references.push_back({"parity", 1.0});
  Series over_ds{"zinf / DeepSpeed", {}, {}, false};
  Series over_pt{"zinf / PyTorch", {}, {}, false};
  for (const json& row : record.at("rows")) {
    const json& ratios = row.at("ratios");
    const std::string unit = row.at("unit").get<std::string>();
    std::string reference = side_cell(row.at("reference"), unit);
    if (!row.at("reference").is_null()) reference = row.at("reference").at("name").get<std::string>() + " " + reference;
    chart.categories.push_back(row.at("name").get<std::string>());
    over_ds.y.push_back(ratio_value(ratios, "zinf/deepspeed"));
    over_pt.y.push_back(ratio_value(ratios, "zinf/pytorch"));
    table.table.rows.push_back({row.at("name").get<std::string>(),
                                unit_text(unit, row.at("higher_is_better").get<bool>()),
                                side_cell(row.at("zinf"), unit), side_cell(row.at("deepspeed"), unit),
                                side_cell(row.at("pytorch"), unit), row.at("reference").is_null() ? "-" : reference,
                                ratio_cell(ratios, "zinf/deepspeed"), ratio_cell(ratios, "zinf/pytorch")});
    for (const char* side : {"zinf", "deepspeed", "pytorch"}) {
      if (row.at(side).is_object() && row.at(side).contains("error")) {
        table.notes.push_back(fmt::format("{} — {}: {}", row.at("name").get<std::string>(), side,
                                          row.at(side).at("error").get<std::string>()));
      }
    }
  }
  chart.series = {std::move(over_ds), std::move(over_pt)};
  table.charts.push_back(std::move(chart));
  table.notes.push_back(
      "Each cell: median (min..max) over the rounds. Ratios are zinf/peer of the medians, with the range pairing the "
      "extreme rounds; 'wide' marks a side whose rounds disagree by more than 20% (" +
      record.value("spread_rule", std::string()) + "). For peak RSS lower is better, so a ratio below 1 favours zinf.");
  out.push_back(std::move(table));

  Section losses = losses_section(record, heading);
  if (!losses.table.rows.empty()) out.push_back(std::move(losses));
  return out;
}

}  // namespace zinf::reports::detail
