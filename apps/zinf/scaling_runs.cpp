// Scaling runs (scaling_runs.h): one world size's training through the rank spawner, its record
// condensed into a row, and the planner's prediction for it.
#include "apps/zinf/scaling_runs.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "apps/zinf/output.h"
#include "apps/zinf/rank_spawner.h"
#include "libengine/spec/json_input.h"
#include "planner/planner.h"
#include "planner/scenario_plan.h"
#include "probes/latency_stats.h"

namespace zinf::cli {

// The measuring harness (probes/) this file calls.
using probes::SampleSpread;
using probes::spread_of;

using nlohmann::json;

namespace {

const json& at_or_null(const json& object, const char* key) {
  static const json null_value;
  const auto it = object.find(key);
  return it == object.end() ? null_value : *it;
}

}  // namespace

Result<json> run_training_at(const json& scenario_document, const ScalingPoint& point, const ScalingRunOptions& options,
                             const Io& io) {
  json document = scenario_document;
  document["batch"] = point.global_batch;
  document.erase("checkpoint");
  document.erase("output");
  const std::filesystem::path scenario_path = options.work_dir / fmt::format("scenario-{}-ranks.json", point.ranks);
  const std::filesystem::path record_path = options.work_dir / fmt::format("train-{}-ranks.json", point.ranks);
  ZINF_RETURN_IF_ERROR(write_output_file(scenario_path.string(), document.dump(2) + "\n", "bench scaling", io));

  std::vector<std::string> args = {"train",          scenario_path.string(),
                                   "--quiet",        "--no-resume",
                                   "--format",       "json",
                                   "--out",          record_path.string(),
                                   "--comm-timeout", std::to_string(options.comm_timeout_s)};
  if (options.steps) {
    args.push_back("--steps");
    args.push_back(std::to_string(*options.steps));
  }
  ZINF_ASSIGN_OR_RETURN(const int exit_code, spawn_ranks(point.ranks, args));
  if (exit_code != 0) {
    return Status::internal(
        fmt::format("bench scaling: training at {} rank{} failed (exit status {}); its error is "
                    "printed above",
                    point.ranks, point.ranks == 1 ? "" : "s", exit_code));
  }
  return spec::read_json_file(record_path.string());
}

json scaling_row(const ScalingPoint& point, const json& record) {
  std::vector<double> step_ms;
  for (const json& step : record.at("steps")) {
    if (!step.at("warmup").get<bool>()) step_ms.push_back(step.at("step_ms").get<double>());
  }
  const SampleSpread spread = spread_of(step_ms);
  const json& summary = record.at("summary");
  const json& comm = at_or_null(record.at("engine"), "comm");
  json row = {
      {"ranks", point.ranks},
      {"global_batch", point.global_batch},
      {"batch_per_rank", point.global_batch / point.ranks},
      {"tokens_per_step", record.at("steps").empty() ? 0 : record.at("steps").front().at("tokens").get<double>()},
      {"tokens_per_s", summary.at("tokens_per_s")},
      {"step_ms", {{"median", spread.median}, {"min", spread.min}, {"max", spread.max}, {"samples", step_ms}}},
      {"final_loss", at_or_null(summary, "final_loss")}};
  if (comm.is_object()) {
    row["comm"] = {{"busy_ms_median", comm.at("busy_ms_median")},
                   {"wait_ms_median", comm.at("wait_ms_median")},
                   {"hidden_fraction", comm.at("hidden_fraction")},
                   {"calls_per_step", comm.at("calls_per_step")},
                   {"send_bytes_per_step", comm.at("send_bytes_per_step")}};
  }
  // Every rank's step median: the slowest rank is what the step waits for.
  if (const auto ranks = record.find("ranks"); ranks != record.end()) {
    json per_rank = json::array();
    for (const json& r : ranks->at("per_rank")) per_rank.push_back(r.at("step_ms_median"));
    row["rank_step_ms_median"] = per_rank;
  }
  return row;
}

json planned_row(const spec::Scenario& scenario, const ScalingPoint& point, const planner::HardwareProfile& hardware) {
  // The point's global batch split over its ranks, planned as `zinf plan --scenario` plans it
  // (planner/scenario_plan.h), on one node with one device per rank.
  spec::Scenario at_point = scenario;
  at_point.batch = point.global_batch;
  planner::PlanInput input = planner::plan_input_for(at_point, hardware, point.ranks);
  input.hardware.nodes = 1;
  input.hardware.node.gpus = point.ranks;
  const Result<planner::Plan> plan = planner::make_plan(input);
  if (!plan.is_ok()) return {{"infeasible", plan.status().message()}};
  if (!plan->feasible) return {{"infeasible", plan->bottleneck}};
  return {{"step_ms", plan->prediction.step_seconds * 1e3},
          {"tokens_per_s", plan->prediction.tokens_per_second},
          {"family", plan->family},
          {"bottleneck", plan->bottleneck}};
}

}  // namespace zinf::cli
