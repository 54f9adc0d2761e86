// The report of a zinf.train/1 record (docs/records/train-record.md): loss, step time and phases, memory per
// tier, links, and whatever else the record holds. Every figure is a record field.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "libengine/core/units.h"
#include "reports/humanise.h"
#include "reports/report_parts.h"

namespace zinf::reports::detail {
namespace {

using nlohmann::json;

std::string fmt_ms(double ms) { return humane(ms, Quantity::kMilliseconds); }
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
  chart.y_label = "loss, nats/token";
  chart.series.push_back(step_series(record, "steps", "training loss", false));
  Series held_out = step_series(record, "evals", "held-out loss", true);
  if (!held_out.x.empty()) chart.series.push_back(std::move(held_out));
  const std::optional<double> entropy = number_at(record, "data.entropy_rate_nats");
  if (entropy) chart.references.push_back({"entropy floor", *entropy});
  std::string final_loss = or_dash(number_at(record, "summary.final_loss"), fmt_loss);
  if (const std::optional<double> n = number_at(record, "summary.final_loss_steps"))
    final_loss += fmt::format(" (mean of the last {:.0f} steps)", *n);
  s.fields.emplace_back("final loss", Cell(final_loss, Emphasis::kStrong));
  s.fields.emplace_back("held-out loss", or_dash(number_at(record, "summary.final_eval_loss"), fmt_loss));
  s.fields.emplace_back("entropy floor", or_dash(entropy, fmt_loss));
  if (const std::optional<double> gap = number_at(record, "summary.loss_vs_entropy_rate")) {
    s.fields.emplace_back("loss above the floor", fmt::format("{:+.1f}%", *gap * 100.0));
  }
  if (const std::optional<double> unigram = number_at(record, "data.unigram_entropy_nats")) {
    s.fields.emplace_back("unigram entropy",
                          Cell(fmt_loss(*unigram) + " (a model that ignores context)", Emphasis::kMuted));
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
  if (const json* peak = find_path(record, "compute_peak"); peak != nullptr && peak->is_object()) {
    std::string probes;
    for (const double p : numbers_at(*peak, "probes_flops_per_s"))
      probes += (probes.empty() ? "" : ", ") + format_flops(p);
    s.fields.emplace_back("peak probe",
                          Cell(fmt::format("{}^3 {} in {}{}", value_text(peak->value("matrix_size", json(nullptr))),
                                           string_at(*peak, "kind", "matmul"),
                                           or_dash(number_at(*peak, "probe_seconds"),
                                                   [](double v) { return humane(v, Quantity::kSeconds); }),
                                           probes.empty() ? "" : "; probes " + probes),
                               Emphasis::kMuted));
  }
  std::string medians;
  for (const char* phase : {"data", "forward", "backward", "forward_backward", "optimizer"}) {
    if (const std::optional<double> v = number_at(record, fmt::format("summary.{}_ms_median", phase))) {
      medians += fmt::format("{}{} {}", medians.empty() ? "" : " · ",
                             std::string_view(phase) == "forward_backward" ? "forward+backward" : phase, fmt_ms(*v));
    }
  }
  if (!medians.empty()) s.fields.emplace_back("phase medians", medians);

  const json* steps = find_path(record, "steps");
  if (steps == nullptr || !steps->is_array() || steps->empty()) return s;
  Chart times;
  times.title = "Step time per step (warm-up steps apart)";
  times.x_label = "step";
  times.y_label = "step time";
  times.y_quantity = Quantity::kMilliseconds;
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
  phases.y_label = "time";
  phases.y_quantity = Quantity::kMilliseconds;
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
  chart.y_label = "memory";
  chart.y_quantity = Quantity::kBytes;
  Series peak{"peak", {}, {}, false};
  Series budget{"budget", {}, {}, false};
  s.table.columns = {{"tier"}, {"peak", Align::kRight}, {"budget", Align::kRight}, {"current", Align::kRight}};
  for (const auto& [tier, usage] : memory->items()) {
    const std::optional<double> p = number_at(usage, "peak_bytes");
    if (!usage.is_object() || !p) continue;
    const std::optional<double> cap = number_at(usage, "capacity_bytes");
    chart.categories.push_back(tier);
    peak.y.push_back(*p);
    budget.y.push_back(cap && *cap > 0 ? *cap : std::nan(""));
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
  if (const std::optional<double> total = number_at(*memory, "model_states_total_bytes")) {
    s.fields.emplace_back("model states in all", format_bytes(*total));
  }
  if (const std::optional<double> a = number_at(*memory, "activations_bytes")) {
    s.fields.emplace_back("activations", format_bytes(*a));
  }
  if (const std::optional<double> rss = number_at(*memory, "host.peak_rss_bytes")) {
    s.fields.emplace_back("process peak RSS", format_bytes(*rss));
  }
  return s;
}

// "forward_backward_bytes_per_step" -> "fwd+bwd bytes/step", "optimizer_gbps" -> "optimizer GB/s".
std::string link_column(std::string key) {
  const auto replace = [&key](std::string_view from, std::string_view to) {
    if (const std::size_t at = key.find(from); at != std::string::npos) key.replace(at, from.size(), to);
  };
  replace("forward_backward", "fwd+bwd");
  replace("_bytes_per_step", " bytes/step");
  replace("_gbps", " GB/s");
  for (char& c : key) c = c == '_' ? ' ' : c;
  return key;
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
  for (const std::string& key : keys) s.table.columns.push_back({link_column(key), Align::kRight});
  Chart gbps;
  gbps.title = "Achieved GB/s per link";
  gbps.kind = ChartKind::kBar;
  gbps.x_label = "link";
  gbps.y_label = "achieved";
  gbps.y_quantity = Quantity::kGBps;
  Chart bytes;
  bytes.title = "Bytes per step per link";
  bytes.kind = ChartKind::kBar;
  bytes.x_label = "link";
  bytes.y_label = "per step";
  bytes.y_quantity = Quantity::kBytes;
  for (const std::string& key : keys) {
    const std::string name = link_column(key);
    const std::string series = name.substr(0, name.find(' '));
    if (key.find("gbps") != std::string::npos) gbps.series.push_back({series, {}, {}, false});
    if (key.find("bytes") != std::string::npos) bytes.series.push_back({series, {}, {}, false});
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
      row.emplace_back(!v ? std::string("-") : humane(*v, quantity_of_key(key)));
      if (is_rate) gbps.series[g++].y.push_back(v.value_or(std::nan("")));
      if (is_bytes) bytes.series[b++].y.push_back(v.value_or(std::nan("")));
    }
    s.table.rows.push_back(std::move(row));
  }
  // A run that keeps every state on the device moves nothing over any link: its charts would be
  // flat lines at zero, so they are left out and the reason given instead.
  if (chart_has_data(bytes)) {
    s.charts.push_back(std::move(bytes));
    if (chart_has_data(gbps)) s.charts.push_back(std::move(gbps));
  } else {
    s.notes.push_back(fmt::format("No link charts: no byte crossed a link in this run ({}).",
                                  string_at(record, "engine.description", "no offload")));
  }
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
  // Record paths a section shows; "Other fields" lists the rest.
  std::vector<std::string> used = {"steps",
                                   "evals",
                                   "plan_vs_measured",
                                   "consistency",
                                   "status",
                                   "error",
                                   "scenario",
                                   "scenario_path",
                                   "device.description",
                                   "device.threads",
                                   "model.params",
                                   "model.shape",
                                   "model.flops_per_step",
                                   "data.description",
                                   "data.entropy_rate_nats",
                                   "data.unigram_entropy_nats",
                                   "checkpoint.last_written",
                                   "checkpoint.resumed_from",
                                   "checkpoint.resume_warnings",
                                   "compute_peak.kind",
                                   "compute_peak.flops_per_s",
                                   "compute_peak.matrix_size",
                                   "compute_peak.probe_seconds",
                                   "compute_peak.probes_flops_per_s",
                                   "memory.model_states_bytes",
                                   "memory.model_states_tier",
                                   "memory.model_states_total_bytes",
                                   "memory.activations_bytes",
                                   "memory.host.peak_rss_bytes",
                                   "engine.links",
                                   "engine.description",
                                   "engine.prefetch.hit_rate",
                                   "engine.stall_fraction_of_forward_backward"};
  for (const char* key : {"final_loss",
                          "final_loss_steps",
                          "final_eval_loss",
                          "loss_vs_entropy_rate",
                          "step_ms",
                          "tokens_per_s",
                          "flops_per_s",
                          "mfu",
                          "mfu_inconsistent",
                          "data_ms_median",
                          "forward_ms_median",
                          "backward_ms_median",
                          "forward_backward_ms_median",
                          "optimizer_ms_median",
                          "steps_run",
                          "first_step",
                          "warmup_steps",
                          "measured_steps",
                          "skipped_steps",
                          "train_seconds",
                          "setup_seconds"}) {
    used.push_back(std::string("summary.") + key);
  }
  if (const json* memory = find_path(record, "memory"); memory != nullptr && memory->is_object()) {
    for (const auto& [tier, usage] : memory->items()) {
      if (!usage.is_object() || !usage.contains("peak_bytes")) continue;
      for (const char* key : {"peak_bytes", "capacity_bytes", "current_bytes"})
        used.push_back("memory." + tier + "." + key);
    }
  }
  out.push_back(envelope_section(record, heading));
  Section& run = out.back();
  run.fields.emplace_back("scenario", fmt::format("{} ({})", string_at(record, "scenario.name", "-"),
                                                  string_at(record, "scenario_path", "-")));
  if (const json* sc = find_path(record, "scenario"); sc != nullptr && sc->is_object()) {
    run.fields.emplace_back(
        "settings",
        fmt::format("batch {} x seq {}, {}, {} lr {} ({} schedule), {} steps",
                    value_text(sc->value("batch", json(nullptr))), value_text(sc->value("seq", json(nullptr))),
                    string_at(*sc, "precision", "-"), string_at(*sc, "optimizer.type", "-"),
                    value_text(find_path(*sc, "optimizer.lr") ? *find_path(*sc, "optimizer.lr") : json(nullptr)),
                    string_at(*sc, "optimizer.schedule.kind", "constant"),
                    value_text(sc->value("steps", json(nullptr)))));
  }
  run.fields.emplace_back("device", fmt::format("{}, {} threads", string_at(record, "device.description", "-"),
                                                value_text(find_path(record, "device.threads") != nullptr
                                                               ? *find_path(record, "device.threads")
                                                               : json(nullptr))));
  std::string model = or_dash(number_at(record, "model.params"), format_count) + " parameters";
  if (const json* shape = find_path(record, "model.shape"); shape != nullptr && shape->is_object()) {
    model +=
        fmt::format(": {} layers, hidden {}, {} heads, vocab {}", value_text(shape->value("layers", json(nullptr))),
                    value_text(shape->value("hidden", json(nullptr))), value_text(shape->value("heads", json(nullptr))),
                    value_text(shape->value("vocab", json(nullptr))));
  }
  if (const std::optional<double> f = number_at(record, "model.flops_per_step")) {
    model += fmt::format("; {} FLOP per step", format_count(*f));
  }
  run.fields.emplace_back("model", model);
  run.fields.emplace_back("data", string_at(record, "data.description", "-"));
  const auto count = [](double n) { return fmt::format("{:.0f}", n); };
  if (const std::optional<double> ran = number_at(record, "summary.steps_run")) {
    run.fields.emplace_back("steps", fmt::format("{} run from step {}: {} warm-up, {} measured, {} skipped",
                                                 count(*ran), or_dash(number_at(record, "summary.first_step"), count),
                                                 or_dash(number_at(record, "summary.warmup_steps"), count),
                                                 or_dash(number_at(record, "summary.measured_steps"), count),
                                                 or_dash(number_at(record, "summary.skipped_steps"), count)));
  }
  if (const std::optional<double> train = number_at(record, "summary.train_seconds")) {
    run.fields.emplace_back("wall time",
                            fmt::format("{} training after {} of set-up", humane(*train, Quantity::kSeconds),
                                        or_dash(number_at(record, "summary.setup_seconds"),
                                                [](double v) { return humane(v, Quantity::kSeconds); })));
  }
  if (const json* ck = find_path(record, "checkpoint"); ck != nullptr && ck->is_object()) {
    const std::string written = value_text(ck->value("last_written", json(nullptr)));
    const std::string resumed = value_text(ck->value("resumed_from", json(nullptr)));
    run.fields.emplace_back("checkpoint",
                            fmt::format("{}; {}", written == "-" ? "none written" : "last written " + written,
                                        resumed == "-" ? "not resumed" : "resumed from " + resumed));
    if (const json* warnings = find_path(*ck, "resume_warnings"); warnings != nullptr && warnings->is_array()) {
      for (const json& w : *warnings) run.fields.emplace_back("resume warning", Cell(value_text(w), Emphasis::kWarn));
    }
  }
  // A run that failed midway or was stopped (issue 24) holds the steps it completed; its figures are a
  // partial run's.
  if (const std::string status = string_at(record, "status", "completed"); status == "failed" || status == "stopped") {
    run.fields.emplace_back("status", Cell(fmt::format("{} after {} steps: {}", status,
                                                       or_dash(number_at(record, "summary.steps_run"), count),
                                                       string_at(record, "error", "-")),
                                           Emphasis::kBad));
  }
  if (std::optional<Section> flags = consistency_section(record, heading)) out.push_back(std::move(*flags));
  out.push_back(loss_section(record, heading));
  out.push_back(step_time_section(record, heading));
  for (Section& plan : train_plan_sections(record, heading, used)) out.push_back(std::move(plan));
  out.push_back(memory_section(record, heading));
  out.push_back(links_section(record, heading));
  out.push_back(train_engine_section(record, heading, used));
  // Plan next to measurement in the records before the plan section (an array of {figure, predicted,
  // measured,...}).
  if (const json* pvm = find_path(record, "plan_vs_measured"); pvm != nullptr && pvm->is_array()) {
    Section s = titled(heading, "Plan vs measured");
    s.table = objects_table(*pvm);
    out.push_back(std::move(s));
  }
  out.push_back(other_fields_section(record, used, heading));
  return out;
}

}  // namespace zinf::reports::detail
