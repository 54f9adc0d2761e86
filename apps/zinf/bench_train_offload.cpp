// Rendering of `zinf bench train --zero0` (bench_train_offload.h).
#include "apps/zinf/bench_train_offload.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "libengine/core/units.h"
#include "probes/latency_stats.h"
#include "reports/record_envelope.h"

namespace zinf::cli {

using nlohmann::json;
using probes::offload_side_json;
using probes::OffloadSide;

Rendered render_offload_bench(const spec::Scenario& scenario, const OffloadBenchRun& run,
                              const probes::OffloadBenchResult& result, const reports::ConditionsSnapshot& started) {
  Rendered out;
  out.record = reports::make_record_envelope("bench-train", 1, started);
  out.record["scenario_path"] = run.scenario_path;
  out.record["scenario"] = spec::to_json(scenario);
  out.record["run.stepsper_repetition"] = run.steps;
  out.record["run.warmupsteps"] = run.warmup;
  out.record["repetitions"] = run.repeat;
  out.record["engine"] = offload_side_json(result.engine);
  out.record["zero0"] = offload_side_json(result.zero0);
  if (result.serial) out.record["engine_overlap_off"] = offload_side_json(*result.serial);
  if (result.nvme_read_gbps) {
    out.record["swap_store_sequential_gbps"] = {{"read",
                                                 {{"median", result.nvme_read_gbps->median},
                                                  {"min", result.nvme_read_gbps->min},
                                                  {"max", result.nvme_read_gbps->max}}},
                                                {"write",
                                                 {{"median", result.nvme_write_gbps->median},
                                                  {"min", result.nvme_write_gbps->min},
                                                  {"max", result.nvme_write_gbps->max}}}};
  }
  if (scenario.zero.uses_nvme()) {
    // The capacity the bound used (the higher median), then both measurements of the pattern.
    const auto spread_json = [](const std::optional<probes::SampleSpread>& s, const std::string& why_not) {
      if (!s) return json{{"why_not", why_not}};
      return json{{"median", s->median}, {"min", s->min}, {"max", s->max}};
    };
    json mixed = spread_json(result.nvme_mixed_gbps, "neither fio nor the swap store measured it");
    mixed["source"] = result.nvme_mixed_source.empty() ? json(nullptr) : json(result.nvme_mixed_source);
    mixed["read_percent"] = result.nvme_mixed_read_percent;
    mixed["fio"] = spread_json(result.nvme_mixed_fio_gbps, result.fio_mixed_why_not);
    if (!result.fio_mixed_argv.empty()) mixed["fio"]["argv"] = result.fio_mixed_argv;
    mixed["swap_store"] = spread_json(result.nvme_mixed_store_gbps, result.store_mixed_why_not);
    out.record["drive_mixed_gbps"] = std::move(mixed);
  }
  out.record["targets"] = result.ratios;

  out.document.title = "zinf bench train --zero0";
  reports::Section setup;
  setup.title = "Setup";
  setup.fields.emplace_back("scenario", run.scenario_path);
  setup.fields.emplace_back("runs", fmt::format("{} repetitions x ({} warm-up + {} timed steps), engine{} and ZeRO-0 "
                                                "alternating",
                                                run.repeat, run.warmup, run.steps,
                                                result.serial ? ", engine with overlap_optimizer false" : ""));
  if (result.nvme_read_gbps) {
    setup.fields.emplace_back("swap store",
                              fmt::format("sequential read {:.2f} GB/s, write {:.2f} GB/s (median of 3, same run)",
                                          result.nvme_read_gbps->median, result.nvme_write_gbps->median));
  }
  if (scenario.zero.uses_nvme()) {
    const auto rate = [](const std::optional<probes::SampleSpread>& s, const std::string& why_not) {
      return s ? fmt::format("{:.2f} GB/s ({:.2f}..{:.2f})", s->median, s->min, s->max) : "n/a (" + why_not + ")";
    };
    setup.fields.emplace_back(
        "drive, mixed",
        fmt::format("read+write at {}% read of the bytes, reads and writes on separate extents, median of 3 "
                    "alternating, same files: swap store {}, fio (two jobs) {}; capacity {}",
                    result.nvme_mixed_read_percent, rate(result.nvme_mixed_store_gbps, result.store_mixed_why_not),
                    rate(result.nvme_mixed_fio_gbps, result.fio_mixed_why_not),
                    result.nvme_mixed_source.empty() ? std::string("none") : result.nvme_mixed_source));
  }
  out.document.sections.push_back(std::move(setup));
  reports::Section sides;
  sides.title = "Step time (ms)";
  sides.table.columns = {{"states"},
                         {"median", reports::Align::kRight},
                         {"min", reports::Align::kRight},
                         {"max", reports::Align::kRight},
                         {"fwd+bwd", reports::Align::kRight},
                         {"optimizer", reports::Align::kRight},
                         {"stepped during bwd", reports::Align::kRight}};
  std::vector<std::pair<const char*, const OffloadSide*>> rows{{"engine", &result.engine}};
  if (result.serial) rows.emplace_back("engine, overlap off", &*result.serial);
  rows.emplace_back("ZeRO-0", &result.zero0);
  for (const auto& [name, side] : rows) {
    const json j = offload_side_json(*side);
    const json& overlapped = j["optimizer_stepped_during_backward_fraction"];
    sides.table.rows.push_back(
        {name, fmt::format("{:.1f}", j["step_ms_median"].get<double>()),
         fmt::format("{:.1f}", j["step_ms_min"].get<double>()), fmt::format("{:.1f}", j["step_ms_max"].get<double>()),
         fmt::format("{:.1f}", j["forward_backward_ms_median"].get<double>()),
         fmt::format("{:.1f}", j["optimizer_ms_median"].get<double>()),
         overlapped.is_null() ? std::string("-") : fmt::format("{:.0f}%", overlapped.get<double>() * 100.0)});
  }
  out.document.sections.push_back(std::move(sides));
  // Where forward+backward goes: waits for parameters against CPU time and run-queue waits
  // (offload_bench.h), medians per step.
  reports::Section where;
  where.title = "Forward+backward: waits and CPU (ms per step, median)";
  where.table.columns = {{"states"},
                         {"fwd", reports::Align::kRight},
                         {"bwd", reports::Align::kRight},
                         {"param wait", reports::Align::kRight},
                         {"Adam (in bwd)", reports::Align::kRight},
                         {"compute CPU", reports::Align::kRight},
                         {"compute run-queue", reports::Align::kRight},
                         {"I/O thread CPU", reports::Align::kRight},
                         {"I/O run-queue", reports::Align::kRight}};
  for (const auto& [name, side] : rows) {
    const json j = offload_side_json(*side);
    const auto ms = [&j](const char* key) {
      return j[key].is_number() ? fmt::format("{:.1f}", j[key].get<double>()) : std::string("-");
    };
    where.table.rows.push_back({name, ms("forward_ms_median"), ms("backward_ms_median"), ms("param_wait_ms_median"),
                                fmt::format("{} ({})", ms("adam_ms_median"), ms("adam_overlapped_ms_median")),
                                ms("compute_cpu_ms_median"), ms("compute_runqueue_wait_ms_median"),
                                ms("io_thread_cpu_ms_median"), ms("io_thread_runqueue_wait_ms_median")});
  }
  where.notes.push_back(
      "param wait: the training thread blocked in acquire() for a parameter; CPU and run-queue (ready to run, no "
      "core free) from /proc/self/task/*/schedstat; compute = the training thread and its OpenMP team");
  out.document.sections.push_back(std::move(where));
  reports::Section targets;
  targets.title = "Targets";
  targets.table.columns = {
      {"target"}, {"value", reports::Align::kRight}, {"bound", reports::Align::kRight}, {"met"}, {"what"}};
  for (const auto& [name, t] : result.ratios.items()) {
    const bool met = t["met"].get<bool>();
    // A target that does not apply to this run says why (overlap_speedup with a small optimizer phase,
    // optimizer_nvme_speed when the optimizer's transfers are no longer in its phase).
    const bool applies = t.value("applies", true);
    // A spread too wide to judge cannot say "met: yes" (or "no") beside it: the verdict follows it.
    const bool too_wide =
        t.contains("spread") && t["spread"]["too_wide"].is_boolean() && t["spread"]["too_wide"].get<bool>();
    targets.table.rows.push_back(
        {name,
         t.contains("spread") && t["spread"]["low"].is_number()
             ? reports::Cell(fmt::format("{:.3f} ({:.2f}..{:.2f}){}", t["value"].get<double>(),
                                         t["spread"]["low"].get<double>(), t["spread"]["high"].get<double>(),
                                         t["spread"]["too_wide"].get<bool>() ? ", spread too wide to judge" : ""),
                             t["spread"]["too_wide"].get<bool>() ? reports::Emphasis::kWarn : reports::Emphasis::kNone)
             : reports::Cell(fmt::format("{:.3f}", t["value"].get<double>())),
         fmt::format("{:.2f}", t["bound"].get<double>()),
         !applies   ? reports::Cell("n/a: " + t.value("why_not", std::string("does not apply")))
         : too_wide ? reports::Cell("unclear: spread too wide", reports::Emphasis::kWarn)
                    : reports::Cell(met ? "yes" : "no", met ? reports::Emphasis::kGood : reports::Emphasis::kBad),
         t["what"].get<std::string>()});
  }
  const json engine = offload_side_json(result.engine);
  targets.notes.push_back(fmt::format(
      "host memory over the timed steps: host tier varied by {}, process RSS by {} (peak {})",
      format_bytes(engine["host_tier_bytes_range"].get<double>()),
      format_bytes(engine["rss_bytes_range"].get<double>()), format_bytes(engine["rss_bytes_max"].get<double>())));
  out.document.sections.push_back(std::move(targets));
  out.csv.columns = {{"target"}, {"value"}, {"bound"}, {"met"}};
  for (const auto& [name, t] : result.ratios.items()) {
    out.csv.rows.push_back(
        {name, fmt::format("{:.4f}", t["value"].get<double>()), fmt::format("{:.2f}", t["bound"].get<double>()),
         t.contains("spread") && t["spread"]["too_wide"].is_boolean() && t["spread"]["too_wide"].get<bool>()
             ? "unclear"
             : (t["met"].get<bool>() ? "true" : "false")});
  }
  return out;
}

}  // namespace zinf::cli
