// The zinf.bench-scaling/1 renderer (report_parts.h): one row per world size — throughput, step
// time and its spread, communication and how much of it was hidden, speed-up and efficiency
// against the smallest world size, and the planner's step time next to the measured one — and a
// chart of tokens/s against ranks with the ideal line (linear from the smallest world size).
#include <cmath>

#include <fmt/format.h>

#include "reports/chart.h"
#include "reports/report_parts.h"

namespace zinf::reports::detail {

using nlohmann::json;

namespace {

std::string percent(double fraction) { return fmt::format("{:.0f}%", fraction * 100.0); }
std::string times(double ratio) { return fmt::format("{:.2f}x", ratio); }

}  // namespace

std::vector<Section> bench_scaling_sections(const json& record, const std::string& heading) {
  std::vector<Section> out;
  out.push_back(envelope_section(record, heading));
  out.back().fields.emplace_back("scenario", string_at(record, "scenario_path", "-"));
  out.back().fields.emplace_back("scaling", string_at(record, "mode", "-"));
  out.back().fields.emplace_back("plan from", string_at(record, "plan_hardware", "-"));
  const json* rows = find_path(record, "rows");
  Section s = titled(heading, "Scaling over ranks");
  s.table.columns = {{"ranks", Align::kRight},      {"batch/rank", Align::kRight},   {"tokens/s", Align::kRight},
                     {"step ms", Align::kRight},    {"min..max", Align::kRight},     {"comm ms", Align::kRight},
                     {"waited ms", Align::kRight},  {"hidden", Align::kRight},       {"speed-up", Align::kRight},
                     {"efficiency", Align::kRight}, {"plan step ms", Align::kRight}, {"measured/plan", Align::kRight}};
  Chart chart;
  chart.title = "Throughput against ranks";
  chart.x_label = "ranks";
  chart.y_label = "tokens/s";
  chart.y_quantity = Quantity::kCount;
  Series measured{"measured", {}, {}, false};
  Series ideal{"ideal (linear from the smallest world size)", {}, {}, false};
  Series planned{"plan", {}, {}, true};
  const double base_ranks = number_at(record, "baseline.ranks").value_or(0);
  const double base_tps = number_at(record, "baseline.tokens_per_s").value_or(0);
  if (rows != nullptr && rows->is_array()) {
    for (const json& row : *rows) {
      const std::optional<double> ranks = number_at(row, "ranks");
      const std::optional<double> tps = number_at(row, "tokens_per_s");
      const std::optional<double> hidden = number_at(row, "comm.hidden_fraction");
      const std::optional<double> plan_ms = number_at(row, "plan.step_ms");
      const std::optional<double> error = number_at(row, "plan.measured_over_plan");
      const std::optional<double> efficiency = number_at(row, "efficiency");
      s.table.rows.push_back({Cell(or_dash(ranks, format_figure), Emphasis::kStrong),
                              or_dash(number_at(row, "batch_per_rank"), format_figure), or_dash(tps, format_figure),
                              or_dash(number_at(row, "step_ms.median"), format_figure),
                              fmt::format("{}..{}", or_dash(number_at(row, "step_ms.min"), format_figure),
                                          or_dash(number_at(row, "step_ms.max"), format_figure)),
                              or_dash(number_at(row, "comm.busy_ms_median"), format_figure),
                              or_dash(number_at(row, "comm.wait_ms_median"), format_figure), or_dash(hidden, percent),
                              or_dash(number_at(row, "speedup"), times),
                              efficiency
                                  ? Cell(percent(*efficiency), *efficiency >= 0.9 ? Emphasis::kGood : Emphasis::kNone)
                                  : Cell(std::string("-")),
                              or_dash(plan_ms, format_figure), or_dash(error, times)});
      if (ranks && tps) {
        measured.x.push_back(*ranks);
        measured.y.push_back(*tps);
        if (base_ranks > 0 && base_tps > 0) {
          ideal.x.push_back(*ranks);
          ideal.y.push_back(base_tps * *ranks / base_ranks);
        }
      }
      if (ranks && number_at(row, "plan.tokens_per_s")) {
        planned.x.push_back(*ranks);
        planned.y.push_back(*number_at(row, "plan.tokens_per_s"));
      }
    }
  }
  for (Series* series : {&measured, &ideal, &planned}) {
    if (!series->x.empty()) chart.series.push_back(std::move(*series));
  }
  if (!chart.series.empty()) s.charts.push_back(std::move(chart));
  s.notes.push_back(
      "speed-up: tokens/s over the smallest world size's; efficiency: speed-up / (ranks / smallest ranks). "
      "comm ms: collectives' busy time per step (rank 0, median); waited ms: what compute waited for them; "
      "hidden: busy time not waited for, over all measured steps.");
  for (const std::string& note : [&] {
         std::vector<std::string> notes;
         if (const json* n = find_path(record, "notes"); n != nullptr && n->is_array()) {
           for (const json& line : *n) {
             if (line.is_string()) notes.push_back(line.get<std::string>());
           }
         }
         return notes;
       }()) {
    s.notes.push_back(note);
  }
  out.push_back(std::move(s));
  out.push_back(
      other_fields_section(record, {"scenario_path", "mode", "plan_hardware", "rows", "baseline", "notes"}, heading));
  return out;
}

}  // namespace zinf::reports::detail
