#include "apps/zinf/train_record.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "apps/zinf/train_plan.h"
#include "libengine/core/units.h"
#include "probes/latency_stats.h"
#include "reports/record_envelope.h"

namespace zinf::cli {

// The measuring harness (probes/) this file calls.
using probes::LatencySummary;
using probes::percentile_of_sorted;
using probes::spread_of;
using probes::summarize_latencies;

namespace {

using nlohmann::json;

json tier_json(const memory::TierUsage& usage) {
  return {{"current_bytes", usage.current_bytes},
          {"peak_bytes", usage.peak_bytes},
          {"capacity_bytes", usage.capacity_bytes == 0 ? json(nullptr) : json(usage.capacity_bytes)}};
}

// Percentile summary of one per-step time series (milliseconds) over the measured steps.
json ms_summary(const std::vector<double>& seconds) {
  const LatencySummary s = summarize_latencies(seconds);
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  const double p10 = sorted.empty() ? 0.0 : percentile_of_sorted(sorted, 10);
  const double min = sorted.empty() ? 0.0 : sorted.front();
  return {{"median", s.p50 * 1e3}, {"p10", p10 * 1e3},   {"p90", s.p90 * 1e3},
          {"min", min * 1e3},      {"max", s.max * 1e3}, {"mean", s.mean * 1e3}};
}

std::string opt_number(const json& value, const char* format_spec) {
  if (value.is_null()) return "-";
  return fmt::format(fmt::runtime(format_spec), value.get<double>());
}

}  // namespace

std::int64_t warmup_steps(std::size_t steps_run) {
  const auto n = static_cast<std::int64_t>(steps_run);
  return std::min<std::int64_t>({3, std::max<std::int64_t>(1, n / 10), n});
}

json make_train_record(const TrainRun& run) {
  json record = reports::make_record_envelope("train", kTrainRecordVersion, run.started);
  record["status"] = run.status;
  record["error"] = run.error.empty() ? json(nullptr) : json(run.error);
  record["scenario_path"] = run.scenario_path;
  record["scenario"] = run.scenario;
  record["device"] = {{"description", run.device_description}, {"threads", run.threads}};
  record["model"] = {{"shape", run.model_shape}, {"params", run.params}, {"flops_per_step", run.flops_per_step}};
  record["data"] = {
      {"description", run.data_description},
      {"entropy_rate_nats", run.entropy_rate_nats ? json(*run.entropy_rate_nats) : json(nullptr)},
      {"unigram_entropy_nats", run.unigram_entropy_nats ? json(*run.unigram_entropy_nats) : json(nullptr)}};
  record["compute_peak"] = {{"kind", run.peak.kind},
                            {"matrix_size", run.peak.matrix_size},
                            {"flops_per_s", run.peak.flops_per_s},
                            {"probe_seconds", run.peak.seconds},
                            {"probes_flops_per_s", run.peak_probes_flops_per_s}};

  const std::int64_t warmup = warmup_steps(run.steps.size());
  json steps = json::array();
  std::vector<double> step_s, data_s, fb_s, fwd_s, bwd_s, opt_s;
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    const train::StepMetrics& m = run.steps[i];
    const bool is_warmup = static_cast<std::int64_t>(i) < warmup;
    steps.push_back({{"step", m.step},
                     {"loss", std::isfinite(m.loss) ? json(m.loss) : json(nullptr)},
                     {"lr", m.lr},
                     {"grad_norm", std::isfinite(m.grad_norm) ? json(m.grad_norm) : json(nullptr)},
                     {"clip_coef", m.clip_coef},
                     {"loss_scale", m.loss_scale},
                     {"skipped", m.skipped},
                     {"tokens", m.tokens},
                     {"step_ms", m.step_seconds * 1e3},
                     {"data_ms", m.data_seconds * 1e3},
                     {"forward_backward_ms", m.forward_backward_seconds * 1e3},
                     {"forward_ms", m.forward_seconds * 1e3},
                     {"backward_ms", m.backward_seconds * 1e3},
                     {"optimizer_ms", m.optimizer_seconds * 1e3},
                     {"tokens_per_s", m.tokens_per_s()},
                     {"warmup", is_warmup},
                     {"engine", engine_step_json(m)}});
    if (!is_warmup) {
      step_s.push_back(m.step_seconds);
      data_s.push_back(m.data_seconds);
      fb_s.push_back(m.forward_backward_seconds);
      fwd_s.push_back(m.forward_seconds);
      bwd_s.push_back(m.backward_seconds);
      opt_s.push_back(m.optimizer_seconds);
    }
  }
  record["steps"] = std::move(steps);
  json evals = json::array();
  for (const train::EvalMetrics& e : run.evals) {
    evals.push_back({{"step", e.step}, {"loss", e.loss}, {"batches", e.batches}, {"seconds", e.seconds}});
  }
  record["evals"] = std::move(evals);

  json summary;
  summary["steps_run"] = run.steps.size();
  summary["first_step"] = run.outcome.first_step;
  summary["warmup_steps"] = warmup;
  summary["measured_steps"] = step_s.size();
  summary["step_ms"] = ms_summary(step_s);
  summary["data_ms_median"] = spread_of(data_s).median * 1e3;
  summary["forward_backward_ms_median"] = spread_of(fb_s).median * 1e3;
  summary["forward_ms_median"] = spread_of(fwd_s).median * 1e3;
  summary["backward_ms_median"] = spread_of(bwd_s).median * 1e3;
  summary["optimizer_ms_median"] = spread_of(opt_s).median * 1e3;
  const double median_step_s = spread_of(step_s).median;
  const double tokens = run.steps.empty() ? 0.0 : static_cast<double>(run.steps.front().tokens);
  const bool measured = median_step_s > 0;
  summary["tokens_per_s"] = measured ? json(tokens / median_step_s) : json(nullptr);
  const double flops_per_s = measured ? run.flops_per_step / median_step_s : 0.0;
  summary["flops_per_s"] = measured ? json(flops_per_s) : json(nullptr);
  summary["mfu"] = measured && run.peak.flops_per_s > 0 ? json(flops_per_s / run.peak.flops_per_s) : json(nullptr);
  json issues = json::array();
  if (summary["mfu"].is_number() && summary["mfu"].get<double>() > 1.0) {
    const std::string why = fmt::format(
        "the measured MFU {:.2f} exceeds 1: the median step ran at {} while the best of {} matmul probes reached {}; "
        "the machine's load changed between the probes and the steps, so neither figure is the machine's peak",
        summary["mfu"].get<double>(), format_flops(flops_per_s),
        std::max<std::size_t>(1, run.peak_probes_flops_per_s.size()), format_flops(run.peak.flops_per_s));
    summary["mfu_inconsistent"] = why;
    issues.push_back(why);
  } else {
    summary["mfu_inconsistent"] = nullptr;
  }
  // Final training loss: the mean of the run's last (up to) 10 steps, which smooths batch-to-batch
  // noise. A resumed run counts the steps before it too (the checkpoint carries their losses), so
  // its figure is the uninterrupted run's, not the mean of the few steps this process ran.
  double tail_sum = 0;
  std::size_t tail_n = 0;
  for (std::size_t i = run.steps.size(); i > 0 && tail_n < train::kRecentLossesKept; --i) {
    if (run.steps[i - 1].skipped || !std::isfinite(run.steps[i - 1].loss)) continue;
    tail_sum += run.steps[i - 1].loss;
    ++tail_n;
  }
  const std::vector<train::StepLoss>& before = run.outcome.losses_before;
  for (std::size_t i = before.size(); i > 0 && tail_n < train::kRecentLossesKept; --i) {
    tail_sum += before[i - 1].loss;
    ++tail_n;
  }
  summary["final_loss"] = tail_n > 0 ? json(tail_sum / static_cast<double>(tail_n)) : json(nullptr);
  summary["final_loss_steps"] = tail_n;
  summary["final_eval_loss"] = run.evals.empty() ? json(nullptr) : json(run.evals.back().loss);
  summary["skipped_steps"] = std::count_if(run.steps.begin(), run.steps.end(), [](const auto& m) { return m.skipped; });
  if (run.entropy_rate_nats && *run.entropy_rate_nats > 0) {
    const json& reached = run.evals.empty() ? summary["final_loss"] : summary["final_eval_loss"];
    summary["loss_vs_entropy_rate"] =
        reached.is_null() ? json(nullptr) : json(reached.get<double>() / *run.entropy_rate_nats - 1.0);
  } else {
    summary["loss_vs_entropy_rate"] = nullptr;
  }
  summary["setup_seconds"] = run.setup_seconds;
  summary["train_seconds"] = run.train_seconds;
  record["summary"] = std::move(summary);
  record["consistency"] = {{"consistent", issues.empty()}, {"issues", std::move(issues)}};

  json states = json::object();
  std::uint64_t state_total = 0;
  for (const zero::StateBytes& state : run.state_bytes) {
    states[state.state] = state.bytes;
    state_total += state.bytes;
  }
  json state_tiers = json::object();
  for (const zero::StateBytes& state : run.state_bytes) state_tiers[state.state] = spec::tier_name(state.tier);
  record["engine"] = make_engine_record(run.engine, run.steps, warmup);
  json host = tier_json(run.host_memory);
  host["peak_rss_bytes"] = run.host_peak_rss_bytes;
  record["memory"] = {{"device", tier_json(run.device_memory)},   {"host", std::move(host)},
                      {"nvme", record["engine"].at("nvme")},      {"model_states_bytes", states},
                      {"model_states_tier", state_tiers},         {"model_states_total_bytes", state_total},
                      {"activations_bytes", run.activation_bytes}};
  if (!run.ranks.is_null()) record["ranks"] = run.ranks;
  record["checkpoint"] = {
      {"resumed_from", run.outcome.resumed_from ? json(run.outcome.resumed_from->string()) : json(nullptr)},
      {"last_written", run.outcome.last_checkpoint ? json(run.outcome.last_checkpoint->string()) : json(nullptr)},
      // Why newer checkpoints were passed over at the resume, every rank's reasons.
      {"resume_warnings", run.outcome.resume_warnings}};
  return record;
}

Rendered render_train_record(const json& record) {
  Rendered out;
  out.record = record;
  const json& summary = record.at("summary");
  const json& memory = record.at("memory");
  out.document.title = fmt::format("zinf train {}", record.at("scenario").value("name", std::string()));

  reports::Section run;
  run.title = "Run";
  run.fields.emplace_back("scenario", record.at("scenario_path").get<std::string>());
  run.fields.emplace_back("device",
                          fmt::format("{}, {} threads", record.at("device").at("description").get<std::string>(),
                                      record.at("device").at("threads").get<int>()));
  run.fields.emplace_back("model",
                          fmt::format("{} parameters", format_count(record.at("model").at("params").get<double>())));
  run.fields.emplace_back("data", record.at("data").at("description").get<std::string>());
  const std::int64_t first = summary.at("first_step").get<std::int64_t>();
  run.fields.emplace_back(
      "steps", fmt::format("{} run{} ({} warm-up, excluded from medians)", summary.at("steps_run").get<std::size_t>(),
                           first > 0 ? fmt::format(", resumed at step {}", first) : std::string(),
                           summary.at("warmup_steps").get<std::int64_t>()));
  if (const auto checkpoint = record.find("checkpoint"); checkpoint != record.end()) {
    for (const json& warning : checkpoint->value("resume_warnings", json::array())) {
      run.fields.emplace_back("checkpoint passed over", warning.get<std::string>());
    }
  }
  out.document.sections.push_back(std::move(run));

  reports::Section result;
  result.title = "Result";
  const std::size_t loss_steps = summary.value("final_loss_steps", std::size_t{10});
  result.fields.emplace_back(
      "final loss",
      reports::Cell(summary.at("final_loss").is_null()
                        ? std::string("-")
                        : fmt::format("{:.4f} nats/token (mean of the last {} step{})",
                                      summary.at("final_loss").get<double>(), loss_steps, loss_steps == 1 ? "" : "s"),
                    reports::Emphasis::kStrong));
  if (!summary.at("final_eval_loss").is_null()) {
    result.fields.emplace_back("held-out loss", opt_number(summary.at("final_eval_loss"), "{:.4f} nats/token"));
  }
  const json& entropy = record.at("data").at("entropy_rate_nats");
  if (!entropy.is_null()) {
    const json& gap = summary.at("loss_vs_entropy_rate");
    result.fields.emplace_back("entropy rate",
                               fmt::format("{:.4f} nats/token (the best any model can do)", entropy.get<double>()));
    if (!gap.is_null()) {
      const double pct = gap.get<double>() * 100.0;
      result.fields.emplace_back(
          "loss above entropy rate",
          reports::Cell(fmt::format("{:+.1f}%", pct),
                        std::abs(pct) <= 5.0 ? reports::Emphasis::kGood : reports::Emphasis::kWarn));
    }
  }
  if (summary.at("skipped_steps").get<std::int64_t>() > 0) {
    result.fields.emplace_back(
        "skipped steps", fmt::format("{} (fp16 inf/NaN gradients)", summary.at("skipped_steps").get<std::int64_t>()));
  }
  const json& step_ms = summary.at("step_ms");
  result.fields.emplace_back("throughput",
                             reports::Cell(summary.at("tokens_per_s").is_null()
                                               ? std::string("-")
                                               : format_count(summary.at("tokens_per_s").get<double>()) + " tokens/s",
                                           reports::Emphasis::kStrong));
  result.fields.emplace_back(
      "step time",
      fmt::format(
          "{:.1f} ms median (p10 {:.1f}, p90 {:.1f}): forward {:.1f} + backward {:.1f}, optimizer {:.1f}, data {:.2f}",
          step_ms.at("median").get<double>(), step_ms.at("p10").get<double>(), step_ms.at("p90").get<double>(),
          summary.at("forward_ms_median").get<double>(), summary.at("backward_ms_median").get<double>(),
          summary.at("optimizer_ms_median").get<double>(), summary.at("data_ms_median").get<double>()));
  const json& mfu_issue = summary.value("mfu_inconsistent", json(nullptr));
  if (mfu_issue.is_string()) {
    result.fields.emplace_back(
        "compute",
        reports::Cell(fmt::format("{}; MFU not reported: {}", format_flops(summary.at("flops_per_s").get<double>()),
                                  mfu_issue.get<std::string>()),
                      reports::Emphasis::kBad));
  } else if (!summary.at("flops_per_s").is_null()) {
    result.fields.emplace_back(
        "compute",
        fmt::format("{}, MFU {:.1f}% of the measured {} {} peak", format_flops(summary.at("flops_per_s").get<double>()),
                    summary.at("mfu").is_null() ? 0.0 : summary.at("mfu").get<double>() * 100.0,
                    format_flops(record.at("compute_peak").at("flops_per_s").get<double>()),
                    record.at("compute_peak").at("kind").get<std::string>()));
  }
  out.document.sections.push_back(std::move(result));

  reports::Section mem;
  mem.title = "Memory";
  mem.table.columns = {{"tier"}, {"peak", reports::Align::kRight}, {"budget", reports::Align::kRight}, {"holds"}};
  const json& device = memory.at("device");
  // Bytes of the model states that live on one tier ("gpu" is the device tier's name).
  const auto states_on = [&](const std::string& tier) {
    double bytes = 0;
    for (const auto& [state, value] : memory.at("model_states_bytes").items()) {
      if (memory.at("model_states_tier").value(state, std::string("gpu")) == tier) bytes += value.get<double>();
    }
    return bytes;
  };
  mem.table.rows.push_back({"device", format_bytes(device.at("peak_bytes").get<double>()),
                            device.at("capacity_bytes").is_null()
                                ? std::string("none")
                                : format_bytes(device.at("capacity_bytes").get<double>()),
                            fmt::format("model states {} + activations {}", format_bytes(states_on("gpu")),
                                        format_bytes(memory.at("activations_bytes").get<double>()))});
  const json& host = memory.at("host");
  mem.table.rows.push_back(
      {"host", format_bytes(host.at("peak_bytes").get<double>()),
       host.at("capacity_bytes").is_null() ? std::string("none")
                                           : format_bytes(host.at("capacity_bytes").get<double>()),
       fmt::format("model states {}; process peak RSS {} (includes the device arena on the CPU "
                   "backend)",
                   format_bytes(states_on("cpu")), format_bytes(host.at("peak_rss_bytes").get<double>()))});
  const json& nvme = memory.at("nvme");
  const double nvme_peak = nvme.at("peak_bytes").get<double>();
  mem.table.rows.push_back(
      {"nvme", format_bytes(nvme_peak),
       nvme_peak > 0 ? format_bytes(nvme.at("capacity_bytes").get<double>()) : std::string("none"),
       nvme_peak > 0 ? fmt::format("model states {} (swap files, removed at exit)", format_bytes(states_on("nvme")))
                     : std::string("not used")});
  out.document.sections.push_back(std::move(mem));
  out.document.sections.push_back(render_engine_section(record.at("engine")));
  if (const auto plan = record.find("plan"); plan != record.end()) {
    out.document.sections.push_back(render_plan_section(*plan));
  }
  if (const auto ranks = record.find("ranks"); ranks != record.end()) {
    reports::Section section;
    section.title =
        fmt::format("Ranks ({} over {})", ranks->at("world_size").get<int>(), ranks->at("backend").get<std::string>());
    section.table.columns = {{"rank", reports::Align::kRight},        {"step ms", reports::Align::kRight},
                             {"fwd+bwd ms", reports::Align::kRight},  {"optimizer ms", reports::Align::kRight},
                             {"device peak", reports::Align::kRight}, {"host peak", reports::Align::kRight},
                             {"peak RSS", reports::Align::kRight}};
    // Communication per rank, where the record has it (records before it was measured do not).
    const bool comm_columns =
        !ranks->at("per_rank").empty() && ranks->at("per_rank").front().contains("comm_busy_ms_median");
    if (comm_columns) {
      section.table.columns.push_back({"comm ms", reports::Align::kRight});
      section.table.columns.push_back({"waited ms", reports::Align::kRight});
    }
    for (const json& r : ranks->at("per_rank")) {
      section.table.rows.push_back(
          {std::to_string(r.at("rank").get<int>()), fmt::format("{:.1f}", r.at("step_ms_median").get<double>()),
           fmt::format("{:.1f}", r.at("forward_backward_ms_median").get<double>()),
           fmt::format("{:.1f}", r.at("optimizer_ms_median").get<double>()),
           format_bytes(r.at("device_peak_bytes").get<double>()), format_bytes(r.at("host_peak_bytes").get<double>()),
           format_bytes(r.at("peak_rss_bytes").get<double>())});
      if (comm_columns) {
        section.table.rows.back().push_back(fmt::format("{:.1f}", r.at("comm_busy_ms_median").get<double>()));
        section.table.rows.back().push_back(fmt::format("{:.1f}", r.at("comm_wait_ms_median").get<double>()));
      }
    }
    out.document.sections.push_back(std::move(section));
  }

  // CSV: one row per step, base units.
  out.csv.columns = {{"step"}, {"loss"}, {"lr"}, {"grad_norm"}, {"step_ms"}, {"tokens_per_s"}, {"skipped"}, {"warmup"}};
  for (const json& s : record.at("steps")) {
    out.csv.rows.push_back(
        {std::to_string(s.at("step").get<std::int64_t>()),
         s.at("loss").is_null() ? std::string("nan") : fmt::format("{:.6f}", s.at("loss").get<double>()),
         fmt::format("{:.6g}", s.at("lr").get<double>()),
         s.at("grad_norm").is_null() ? std::string("nan") : fmt::format("{:.6g}", s.at("grad_norm").get<double>()),
         fmt::format("{:.3f}", s.at("step_ms").get<double>()),
         fmt::format("{:.1f}", s.at("tokens_per_s").get<double>()), s.at("skipped").get<bool>() ? "true" : "false",
         s.at("warmup").get<bool>() ? "true" : "false"});
  }
  return out;
}

}  // namespace zinf::cli
