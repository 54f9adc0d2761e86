// `zinf bench scaling` (bench_scaling.h): flags into a validated list of world sizes (every error
// naming its flag), one training run per world size, the zinf.bench-scaling/1 record, and its
// rendering through the report renderer of that record kind.
#include "apps/zinf/bench_scaling.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/zinf/output.h"
#include "apps/zinf/plan_flags.h"
#include "apps/zinf/rank_spawner.h"
#include "apps/zinf/scaling_runs.h"
#include "apps/zinf/scratch_dir.h"
#include "kernels/threads.h"
#include "libengine/core/split.h"
#include "libengine/core/units.h"
#include "libengine/spec/json_input.h"
#include "libengine/spec/scenario.h"
#include "planner/hardware_profile.h"
#include "reports/record_envelope.h"
#include "reports/record_report.h"

namespace zinf::cli {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxWorldSizes = 16;

// "1,2,4" -> {1, 2, 4}: each a rank count the spawner accepts, no repeats, increasing.
Result<std::vector<int>> parse_rank_list(const std::string& text) {
  std::vector<int> ranks;
  for (const std::string_view item : split(text, ',')) {
    const Result<int> n = parse_ranks(item);
    if (!n.is_ok()) {
      return Status::invalid_argument(
          fmt::format("--ranks: '{}' in '{}' is not a rank count from 1 to {} (a comma "
                      "list such as 1,2,4)",
                      item, text, kMaxSpawnRanks));
    }
    if (!ranks.empty() && *n <= ranks.back()) {
      return Status::invalid_argument(
          fmt::format("--ranks: '{}' lists {} after {}; give each world size once, increasing (e.g. 1,2,4)", text, *n,
                      ranks.back()));
    }
    ranks.push_back(*n);
  }
  if (ranks.empty()) return Status::invalid_argument("--ranks: '' is empty; expected a comma list such as 1,2,4");
  if (ranks.size() > kMaxWorldSizes) {
    return Status::invalid_argument(
        fmt::format("--ranks: '{}' lists {} world sizes; at most {}", text, ranks.size(), kMaxWorldSizes));
  }
  return ranks;
}

class BenchScalingCommand final : public Subcommand {
 public:
  explicit BenchScalingCommand(CLI::App& bench) {
    cmd_ = bench.add_subcommand("scaling",
                                "Train a scenario at several world sizes (through mpirun) and report tokens/s, step "
                                "time, communication and how much was hidden, speed-up and efficiency, plan next to "
                                "measured");
    cmd_->add_option("scenario", scenario_path_, "Scenario JSON file")->required()->type_name("FILE");
    cmd_->add_option("--ranks", ranks_text_, "Comma list of world sizes, increasing (default 1,2,4)")
        ->type_name("LIST");
    cmd_->add_flag("--weak", weak_,
                   "Weak scaling: keep the scenario's batch per rank (default: strong, same global "
                   "batch split over the ranks)");
    cmd_->add_option("--steps", steps_text_, "Override the scenario's steps for every run")->type_name("N");
    cmd_->add_option("--hw", hw_, "Hardware profile the plan is made for, one device per rank (default cpu-only)")
        ->type_name("NAME|FILE");
    cmd_->add_option("--comm-timeout", timeout_text_, "Seconds a rank waits for its peers (default 300)")
        ->type_name("SECONDS");
    add_output_options(*cmd_, output_);
    cmd_->footer(
        "Examples:\n"
        "  zinf bench scaling scenarios/offload-cpu.json --ranks 1,2,4 --steps 8\n"
        "  zinf bench scaling scenarios/offload-cpu.json --ranks 1,2 --weak --format md --out scaling.md");
  }

  Status run(const Io& io) override;

 private:
  Result<json> measure(const spec::Scenario& scenario, const json& document, const std::vector<int>& ranks,
                       const planner::HardwareProfile& hardware, const ScalingRunOptions& options, const Io& io) const;

  CLI::App* cmd_ = nullptr;
  std::string scenario_path_;
  std::string ranks_text_ = "1,2,4";
  bool weak_ = false;
  std::string steps_text_;
  std::string hw_ = "cpu-only";
  std::string timeout_text_ = "300";
  OutputOptions output_;
};

Status BenchScalingCommand::run(const Io& io) {
  ZINF_RETURN_IF_ERROR(output_format(output_, /*allow_html=*/true).status());
  if (!output_.out_path.empty()) ZINF_RETURN_IF_ERROR(check_output_path(output_.out_path, "--out"));
  ZINF_ASSIGN_OR_RETURN(const std::vector<int> ranks, parse_rank_list(ranks_text_));
  ScalingRunOptions options;
  if (!steps_text_.empty()) {
    ZINF_ASSIGN_OR_RETURN(options.steps,
                          parse_int_in_range(steps_text_, "--steps", spec::kStepsRange.min, spec::kStepsRange.max));
  }
  ZINF_ASSIGN_OR_RETURN(options.comm_timeout_s, parse_int_in_range(timeout_text_, "--comm-timeout", 1, 86400));
  Result<planner::HardwareProfile> hardware = planner::load_hardware_profile(hw_);
  if (!hardware.is_ok()) return Status(hardware.status().code(), "--hw: " + hardware.status().message());
  ZINF_ASSIGN_OR_RETURN(const spec::Scenario scenario, spec::load_scenario(scenario_path_, scenario_shape_resolver()));
  ZINF_ASSIGN_OR_RETURN(const json document, spec::read_json_file(scenario_path_));
  if (!weak_) {
    for (const int n : ranks) {
      if (scenario.batch % n != 0) {
        return Status::invalid_argument(fmt::format(
            "--ranks: {} does not divide scenario.batch {} (strong scaling splits the global batch over the ranks); "
            "use world sizes that divide it, or --weak",
            n, scenario.batch));
      }
    }
  }
  ZINF_ASSIGN_OR_RETURN(ScratchDir work, ScratchDir::create("bench scaling", "zinf-scaling-"));
  options.work_dir = work.path();
  ZINF_ASSIGN_OR_RETURN(json record, measure(scenario, document, ranks, *hardware, options, io));

  Rendered out;
  out.record = std::move(record);
  out.document.title = "zinf bench scaling";
  out.document.sections = reports::record_sections(out.record, "");
  out.csv.columns = {{"ranks"},           {"batch_per_rank"}, {"tokens_per_s"}, {"step_ms_median"},
                     {"step_ms_min"},     {"step_ms_max"},    {"comm_busy_ms"}, {"comm_wait_ms"},
                     {"hidden_fraction"}, {"speedup"},        {"efficiency"},   {"plan_step_ms"}};
  const auto number = [](const json& row, const char* a, const char* b = nullptr) -> std::string {
    const json* v = &row;
    for (const char* key : {a, b}) {
      if (key == nullptr) break;
      if (!v->is_object() || !v->contains(key)) return "";
      v = &v->at(key);
    }
    return v->is_number() ? fmt::format("{:.6g}", v->get<double>()) : std::string();
  };
  for (const json& row : out.record.at("rows")) {
    out.csv.rows.push_back({number(row, "ranks"), number(row, "batch_per_rank"), number(row, "tokens_per_s"),
                            number(row, "step_ms", "median"), number(row, "step_ms", "min"),
                            number(row, "step_ms", "max"), number(row, "comm", "busy_ms_median"),
                            number(row, "comm", "wait_ms_median"), number(row, "comm", "hidden_fraction"),
                            number(row, "speedup"), number(row, "efficiency"), number(row, "plan", "step_ms")});
  }
  return emit(output_, out, io, /*allow_html=*/true);
}

Result<json> BenchScalingCommand::measure(const spec::Scenario& scenario, const json& document,
                                          const std::vector<int>& ranks, const planner::HardwareProfile& hardware,
                                          const ScalingRunOptions& options, const Io& io) const {
  json rows = json::array();
  for (const int n : ranks) {
    const ScalingPoint point{n, weak_ ? scenario.batch * n : scenario.batch};
    io.err << fmt::format("bench scaling: {} rank{}, global batch {} ({} per rank)\n", n, n == 1 ? "" : "s",
                          point.global_batch, point.global_batch / n);
    io.err.flush();
    ZINF_ASSIGN_OR_RETURN(const json train_record, run_training_at(document, point, options, io));
    json row = scaling_row(point, train_record);
    row["plan"] = planned_row(scenario, point, hardware);
    rows.push_back(std::move(row));
  }
  // Speed-up and efficiency against the smallest world size measured (1 when the list starts there).
  const json& base = rows.front();
  const double base_ranks = base.at("ranks").get<double>();
  const double base_tps = base.at("tokens_per_s").is_number() ? base.at("tokens_per_s").get<double>() : 0.0;
  for (json& row : rows) {
    const double tps = row.at("tokens_per_s").is_number() ? row.at("tokens_per_s").get<double>() : 0.0;
    const bool measured = base_tps > 0 && tps > 0;
    const double speedup = measured ? tps / base_tps : 0.0;
    row["speedup"] = measured ? json(speedup) : json(nullptr);
    row["efficiency"] = measured ? json(speedup / (row.at("ranks").get<double>() / base_ranks)) : json(nullptr);
    json& plan = row.at("plan");
    if (plan.contains("step_ms") && plan.at("step_ms").get<double>() > 0) {
      plan["measured_over_plan"] = row.at("step_ms").at("median").get<double>() / plan.at("step_ms").get<double>();
    }
  }
  json record = reports::make_record_envelope("bench-scaling", 1, io.started);
  record["scenario_path"] = scenario_path_;
  record["mode"] = weak_ ? "weak" : "strong";
  record["ranks"] = ranks;
  record["steps"] = options.steps.value_or(scenario.steps);
  record["plan_hardware"] = fmt::format("{} (one device per rank, one node)", hardware.name);
  record["baseline"] = {{"ranks", base_ranks}, {"tokens_per_s", base_tps > 0 ? json(base_tps) : json(nullptr)}};
  record["rows"] = std::move(rows);
  record["notes"] = json::array(
      {fmt::format("Every world size trains {} steps through mpirun (--oversubscribe) on this machine; the first "
                   "steps are warm-up and not counted (the train record's rule).",
                   options.steps.value_or(scenario.steps)),
       fmt::format("Ranks on one node share its cores (each rank gets cores / ranks compute threads unless the "
                   "scenario sets threads); this machine has {} available.",
                   kernels::cpu::available_cores())});
  return record;
}

}  // namespace

std::unique_ptr<Subcommand> add_bench_scaling_command(CLI::App& bench) {
  return std::make_unique<BenchScalingCommand>(bench);
}

}  // namespace zinf::cli
