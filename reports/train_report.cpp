// The report of a zinf.train/1 record (docs/records/train-record.md): loss, step time and phases, memory per
// tier, links, and whatever else the record holds. Every figure is a record field.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "libengine/core/units.h"
#include "reports/report_parts.h"

namespace zinf::reports::detail {
namespace {

using nlohmann::json;

std::string fmt_ms(double ms) { return fmt::format("{:.2f} ms", ms); }
std::string fmt_loss(double loss) { return fmt::format("{:.4f} nats/token", loss); }

// The (step, loss) points of the array at `path` (steps or evals), elements without either skipped.
Series step_series(const json& record, std::string_view path, std::string name, bool points_only) {
  Series series{std::move(name), {}, {}, points_only};
  const json* array = find_path(record, path);
  if (array == nullptr || !array->is_array()) return series;
  for (const json& e : *array) {
    const std::optional<double> x = number_at(e, "step");
    const std::optional<double> y = number_at(e, "loss");
    if (x && y) {
      series.x.push_back(*x);
      series.y.push_back(*y);
    }
  }
  return series;
}

Section loss_section(const json& record, const std::string& heading) {
  Section s = titled(heading, "Loss");
  Chart chart;
  chart.title = "Loss per step";
  chart.x_label = "step";
  chart.y_label = "loss (nats/token)";
  chart.series.push_back(step_series(record, "steps", "training loss", false));
  Series held_out = step_series(record, "evals", "held-out loss", true);
  if (!held_out.x.empty()) chart.series.push_back(std::move(held_out));
  const std::optional<double> entropy = number_at(record, "data.entropy_rate_nats");
  if (entropy) chart.references.push_back({"entropy floor", *entropy});
  s.fields.emplace_back("final loss",
                        Cell(or_dash(number_at(record, "summary.final_loss"), fmt_loss), Emphasis::kStrong));
  s.fields.emplace_back("held-out loss", or_dash(number_at(record, "summary.final_eval_loss"), fmt_loss));
  s.fields.emplace_back("entropy floor", or_dash(entropy, fmt_loss));
  if (const std::optional<double> gap = number_at(record, "summary.loss_vs_entropy_rate")) {
    s.fields.emplace_back("loss above the floor", fmt::format("{:+.1f}%", *gap * 100.0));
  }
  s.charts.push_back(std::move(chart));
  return s;
}

// Phase columns of a step: every "<name>_ms" number in the step except the total and the
// forward+backward sum (forward and backward are there separately), plus the engine's "*_ms"
// (stalls), so a phase the engine starts recording appears without a change here.
std::vector<std::string> phase_keys(const json& step) {
  // The order a step runs them in; phases this list does not know follow in the record's order.
  static const std::vector<std::string> kOrder = {"data_ms", "forward_ms", "backward_ms", "optimizer_ms"};
  std::vector<std::string> keys;
  for (const std::string& key : kOrder) {
    if (step.contains(key) && step.at(key).is_number()) keys.push_back(key);
  }
  for (const auto& [key, value] : step.items()) {
    if (!value.is_number() || key == "step_ms" || key == "forward_backward_ms") continue;
    const bool known = std::find(keys.begin(), keys.end(), key) != keys.end();
    if (!known && key.size() > 3 && key.compare(key.size() - 3, 3, "_ms") == 0) keys.push_back(key);
  }
  return keys;
}

Section step_time_section(const json& record, const std::string& heading) {
  Section s = titled(heading, "Step time");
  const json* summary = find_path(record, "summary.step_ms");
  if (summary != nullptr && summary->is_object()) {
    for (const auto& [key, value] : summary->items()) {
      if (value.is_number()) s.fields.emplace_back(key, fmt_ms(value.get<double>()));
    }
  }
  if (const std::optional<double> tps = number_at(record, "summary.tokens_per_s")) {
    s.fields.emplace_back("throughput", Cell(format_count(*tps) + " tokens/s", Emphasis::kStrong));
  }
  if (const std::optional<double> flops = number_at(record, "summary.flops_per_s")) {
    s.fields.emplace_back("compute", format_flops(*flops));
  }
  const std::string mfu_issue = string_at(record, "summary.mfu_inconsistent");
  if (!mfu_issue.empty()) {
    s.fields.emplace_back("MFU", Cell("not reported: " + mfu_issue, Emphasis::kBad));
  } else if (const std::optional<double> mfu = number_at(record, "summary.mfu")) {
    s.fields.emplace_back("MFU", fmt::format("{:.1f}% of the measured {} peak ({})", *mfu * 100.0,
                                             string_at(record, "compute_peak.kind", "matmul"),
                                             or_dash(number_at(record, "compute_peak.flops_per_s"), format_flops)));
  }

  const json* steps = find_path(record, "steps");
  if (steps == nullptr || !steps->is_array() || steps->empty()) return s;
  Chart times;
  times.title = "Step time per step (warm-up steps apart)";
  times.x_label = "step";
  times.y_label = "ms";
  Series measured{"step time", {}, {}, false};
  Series warmup{"warm-up", {}, {}, true};
  Series stall{"stall", {}, {}, false};
  for (const json& step : *steps) {
    const std::optional<double> x = number_at(step, "step");
    const std::optional<double> y = number_at(step, "step_ms");
    if (!x || !y) continue;
    Series& into = step.value("warmup", false) ? warmup : measured;
    into.x.push_back(*x);
    into.y.push_back(*y);
    if (const std::optional<double> st = number_at(step, "engine.stall_ms")) {
      stall.x.push_back(*x);
      stall.y.push_back(*st);
    }
  }
  times.series.push_back(std::move(measured));
  if (!warmup.x.empty()) times.series.push_back(std::move(warmup));
  bool any_stall = false;
  for (const double v : stall.y) any_stall = any_stall || v > 0;
  if (any_stall) times.series.push_back(std::move(stall));
  for (const char* p : {"p10", "median", "p90"}) {
    if (summary == nullptr) break;
    if (const std::optional<double> v = number_at(*summary, p)) times.references.push_back({p, *v});
  }
  s.charts.push_back(std::move(times));

  Chart phases;
  phases.title = "Phase breakdown per step";
  phases.kind = ChartKind::kStackedBar;
  phases.x_label = "step";
  phases.y_label = "ms";
  const std::vector<std::string> keys = phase_keys(steps->front());
  for (const std::string& key : keys) phases.series.push_back({key.substr(0, key.size() - 3), {}, {}, false});
  for (const json& step : *steps) {
    phases.categories.push_back(value_text(step.value("step", json(nullptr))));
    for (std::size_t k = 0; k < keys.size(); ++k) {
      phases.series[k].y.push_back(number_at(step, keys[k]).value_or(std::nan("")));
    }
  }
  s.charts.push_back(std::move(phases));
  return s;
}

Section memory_section(const json& record, const std::string& heading) {
  Section s = titled(heading, "Memory per tier");
  const json* memory = find_path(record, "memory");
  if (memory == nullptr || !memory->is_object()) return s;
  Chart chart;
  chart.title = "Peak memory per tier against its budget";
  chart.kind = ChartKind::kBar;
  chart.x_label = "tier";
  chart.y_label = "GiB";
  Series peak{"peak", {}, {}, false};
  Series budget{"budget", {}, {}, false};
  s.table.columns = {{"tier"}, {"peak", Align::kRight}, {"budget", Align::kRight}, {"current", Align::kRight}};
  for (const auto& [tier, usage] : memory->items()) {
    const std::optional<double> p = number_at(usage, "peak_bytes");
    if (!usage.is_object() || !p) continue;
    const std::optional<double> cap = number_at(usage, "capacity_bytes");
    chart.categories.push_back(tier);
    peak.y.push_back(gib(*p));
    budget.y.push_back(cap && *cap > 0 ? gib(*cap) : std::nan(""));
    s.table.rows.push_back({tier, format_bytes(*p), cap && *cap > 0 ? format_bytes(*cap) : std::string("none"),
                            or_dash(number_at(usage, "current_bytes"), format_bytes)});
  }
  chart.series = {std::move(peak), std::move(budget)};
  s.charts.push_back(std::move(chart));
  // Model states: bytes and tier of each kind.
  const json* states = find_path(*memory, "model_states_bytes");
  if (states != nullptr && states->is_object()) {
    for (const auto& [state, bytes] : states->items()) {
      if (!bytes.is_number()) continue;
      s.fields.emplace_back(fmt::format("{} ({})", state, string_at(*memory, "model_states_tier." + state, "?")),
                            format_bytes(bytes.get<double>()));
    }
  }
  if (const std::optional<double> a = number_at(*memory, "activations_bytes")) {
    s.fields.emplace_back("activations", format_bytes(*a));
  }
  if (const std::optional<double> rss = number_at(*memory, "host.peak_rss_bytes")) {
    s.fields.emplace_back("process peak RSS", format_bytes(*rss));
  }
  return s;
}

Section links_section(const json& record, const std::string& heading) {
  Section s = titled(heading, "Links: bytes and GB/s");
  const json* links = find_path(record, "engine.links");
  if (links == nullptr || !links->is_object() || links->empty()) return s;
  // Columns: the union of the links' numeric fields, in first-seen order.
  std::vector<std::string> keys;
  for (const auto& [name, link] : links->items()) {
    if (!link.is_object()) continue;
    for (const auto& [key, value] : link.items()) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    }
  }
  s.table.columns.push_back({"link"});
  for (const std::string& key : keys) s.table.columns.push_back({key, Align::kRight});
  Chart gbps;
  gbps.title = "Achieved GB/s per link";
  gbps.kind = ChartKind::kBar;
  gbps.x_label = "link";
  gbps.y_label = "GB/s";
  Chart bytes;
  bytes.title = "Bytes per step per link";
  bytes.kind = ChartKind::kBar;
  bytes.x_label = "link";
  bytes.y_label = "GiB per step";
  for (const std::string& key : keys) {
    const bool is_rate = key.find("gbps") != std::string::npos;
    const bool is_bytes = key.find("bytes") != std::string::npos;
    if (is_rate) gbps.series.push_back({key, {}, {}, false});
    if (is_bytes) bytes.series.push_back({key, {}, {}, false});
  }
  for (const auto& [name, link] : links->items()) {
    if (!link.is_object()) continue;
    std::vector<Cell> row{name};
    gbps.categories.push_back(name);
    bytes.categories.push_back(name);
    std::size_t g = 0, b = 0;
    for (const std::string& key : keys) {
      const std::optional<double> v = number_at(link, key);
      const bool is_rate = key.find("gbps") != std::string::npos;
      const bool is_bytes = key.find("bytes") != std::string::npos;
      row.emplace_back(!v ? std::string("-") : is_bytes ? format_bytes(*v) : format_figure(*v));
      if (is_rate) gbps.series[g++].y.push_back(v.value_or(std::nan("")));
      if (is_bytes) bytes.series[b++].y.push_back(v ? gib(*v) : std::nan(""));
    }
    s.table.rows.push_back(std::move(row));
  }
  s.charts.push_back(std::move(bytes));
  s.charts.push_back(std::move(gbps));
  s.fields.emplace_back("engine", string_at(record, "engine.description", "-"));
  if (const std::optional<double> hit = number_at(record, "engine.prefetch.hit_rate")) {
    s.fields.emplace_back("prefetch hit rate", fmt::format("{:.1f}%", *hit * 100.0));
  }
  if (const std::optional<double> stall = number_at(record, "engine.stall_fraction_of_forward_backward")) {
    s.fields.emplace_back("stall / forward+backward", fmt::format("{:.1f}%", *stall * 100.0));
  }
  return s;
}

}  // namespace

std::vector<Section> train_sections(const json& record, const std::string& heading) {
  std::vector<Section> out;
  out.push_back(envelope_section(record, heading));
  Section& run = out.back();
  run.fields.emplace_back("scenario", fmt::format("{} ({})", string_at(record, "scenario.name", "-"),
                                                  string_at(record, "scenario_path", "-")));
  run.fields.emplace_back("device", string_at(record, "device.description", "-"));
  run.fields.emplace_back("model", or_dash(number_at(record, "model.params"), format_count) + " parameters");
  run.fields.emplace_back("data", string_at(record, "data.description", "-"));
  // A run that failed midway or was stopped (issue 24) holds the steps it completed; its figures are a
  // partial run's.
  if (const std::string status = string_at(record, "status", "completed"); status == "failed" || status == "stopped") {
    run.fields.emplace_back("status", Cell(fmt::format("{} after {} steps: {}", status,
                                                       or_dash(number_at(record, "summary.steps_run"),
                                                               [](double n) { return fmt::format("{:.0f}", n); }),
                                                       string_at(record, "error", "-")),
                                           Emphasis::kBad));
  }
  if (std::optional<Section> flags = consistency_section(record, heading)) out.push_back(std::move(*flags));
  out.push_back(loss_section(record, heading));
  out.push_back(step_time_section(record, heading));
  out.push_back(memory_section(record, heading));
  out.push_back(links_section(record, heading));
  // Plan next to measurement, when a record carries it (an array of {figure, predicted, measured,...}).
  if (const json* pvm = find_path(record, "plan_vs_measured"); pvm != nullptr && pvm->is_array()) {
    Section s = titled(heading, "Plan vs measured");
    s.table = objects_table(*pvm);
    out.push_back(std::move(s));
  }
  out.push_back(other_fields_section(record, {"steps", "evals", "plan_vs_measured", "consistency"}, heading));
  return out;
}

}  // namespace zinf::reports::detail
