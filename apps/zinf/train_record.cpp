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

reports::TierMemory tier_of(const memory::TierUsage& usage) {
  reports::TierMemory tier;
  tier.current_bytes = usage.current_bytes;
  tier.peak_bytes = usage.peak_bytes;
  if (usage.capacity_bytes != 0) tier.capacity_bytes = usage.capacity_bytes;
  return tier;
}

// Percentile summary of one per-step time series (milliseconds) over the measured steps.
reports::StepTimeSummary ms_summary(const std::vector<double>& seconds) {
  const LatencySummary s = summarize_latencies(seconds);
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  const double p10 = sorted.empty() ? 0.0 : percentile_of_sorted(sorted, 10);
  const double min = sorted.empty() ? 0.0 : sorted.front();
  reports::StepTimeSummary out;
  out.median = s.p50 * 1e3;
  out.p10 = p10 * 1e3;
  out.p90 = s.p90 * 1e3;
  out.min = min * 1e3;
  out.max = s.max * 1e3;
  out.mean = s.mean * 1e3;
  return out;
}

template <typename T>
std::optional<double> finite_or_none(T value) {
  return std::isfinite(value) ? std::optional<double>(value) : std::nullopt;
}

}  // namespace

std::int64_t warmup_steps(std::size_t steps_run) {
  const auto n = static_cast<std::int64_t>(steps_run);
  return std::min<std::int64_t>({3, std::max<std::int64_t>(1, n / 10), n});
}

reports::TrainRecord train_record_of(const TrainRun& run) {
  reports::TrainRecord record;
  record.envelope = reports::make_record_envelope("train", kTrainRecordVersion, run.started);
  record.status = run.status;
  if (!run.error.empty()) record.error = run.error;
  record.scenario_path = run.scenario_path;
  record.scenario = run.scenario;
  record.device = {run.device_description, run.threads};
  record.model = {run.model_shape, run.params, run.flops_per_step};
  record.data = {run.data_description, run.entropy_rate_nats, run.unigram_entropy_nats};
  record.compute_peak = {run.peak.kind, run.peak.matrix_size, run.peak.flops_per_s, run.peak.seconds,
                         run.peak_probes_flops_per_s};

  const std::int64_t warmup = warmup_steps(run.steps.size());
  std::vector<double> step_s, data_s, fb_s, fwd_s, bwd_s, opt_s;
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    const train::StepMetrics& m = run.steps[i];
    const bool is_warmup = static_cast<std::int64_t>(i) < warmup;
    reports::TrainStep step;
    step.step = m.step;
    step.loss = finite_or_none(m.loss);
    step.lr = m.lr;
    step.grad_norm = finite_or_none(m.grad_norm);
    step.clip_coef = m.clip_coef;
    step.loss_scale = m.loss_scale;
    step.skipped = m.skipped;
    step.tokens = m.tokens;
    step.step_ms = m.step_seconds * 1e3;
    step.data_ms = m.data_seconds * 1e3;
    step.forward_backward_ms = m.forward_backward_seconds * 1e3;
    step.forward_ms = m.forward_seconds * 1e3;
    step.backward_ms = m.backward_seconds * 1e3;
    step.optimizer_ms = m.optimizer_seconds * 1e3;
    step.tokens_per_s = m.tokens_per_s();
    step.warmup = is_warmup;
    step.engine = engine_step_json(m);
    record.steps.push_back(std::move(step));
    if (!is_warmup) {
      step_s.push_back(m.step_seconds);
      data_s.push_back(m.data_seconds);
      fb_s.push_back(m.forward_backward_seconds);
      fwd_s.push_back(m.forward_seconds);
      bwd_s.push_back(m.backward_seconds);
      opt_s.push_back(m.optimizer_seconds);
    }
  }
  for (const train::EvalMetrics& e : run.evals) record.evals.push_back({e.step, e.loss, e.batches, e.seconds});

  reports::TrainSummary& summary = record.summary;
  summary.steps_run = run.steps.size();
  summary.first_step = run.outcome.first_step;
  summary.warmup_steps = warmup;
  summary.measured_steps = step_s.size();
  summary.step_ms = ms_summary(step_s);
  summary.data_ms_median = spread_of(data_s).median * 1e3;
  summary.forward_backward_ms_median = spread_of(fb_s).median * 1e3;
  summary.forward_ms_median = spread_of(fwd_s).median * 1e3;
  summary.backward_ms_median = spread_of(bwd_s).median * 1e3;
  summary.optimizer_ms_median = spread_of(opt_s).median * 1e3;
  const double median_step_s = spread_of(step_s).median;
  const double tokens = run.steps.empty() ? 0.0 : static_cast<double>(run.steps.front().tokens);
  const bool measured = median_step_s > 0;
  if (measured) summary.tokens_per_s = tokens / median_step_s;
  const double flops_per_s = measured ? run.flops_per_step / median_step_s : 0.0;
  if (measured) summary.flops_per_s = flops_per_s;
  if (measured && run.peak.flops_per_s > 0) summary.mfu = flops_per_s / run.peak.flops_per_s;
  if (summary.mfu && *summary.mfu > 1.0) {
    const std::string why = fmt::format(
        "the measured MFU {:.2f} exceeds 1: the median step ran at {} while the best of {} matmul probes reached {}; "
        "the machine's load changed between the probes and the steps, so neither figure is the machine's peak",
        *summary.mfu, format_flops(flops_per_s), std::max<std::size_t>(1, run.peak_probes_flops_per_s.size()),
        format_flops(run.peak.flops_per_s));
    summary.mfu_inconsistent = why;
    record.consistency.issues.push_back(why);
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
  if (tail_n > 0) summary.final_loss = tail_sum / static_cast<double>(tail_n);
  summary.final_loss_steps = tail_n;
  if (!run.evals.empty()) summary.final_eval_loss = run.evals.back().loss;
  summary.skipped_steps = std::count_if(run.steps.begin(), run.steps.end(), [](const auto& m) { return m.skipped; });
  if (run.entropy_rate_nats && *run.entropy_rate_nats > 0) {
    const std::optional<double>& reached = run.evals.empty() ? summary.final_loss : summary.final_eval_loss;
    if (reached) summary.loss_vs_entropy_rate = *reached / *run.entropy_rate_nats - 1.0;
  }
  summary.setup_seconds = run.setup_seconds;
  summary.train_seconds = run.train_seconds;
  record.consistency.consistent = record.consistency.issues.empty();

  record.engine = make_engine_record(run.engine, run.steps, warmup);
  reports::TrainMemory& memory = record.memory;
  for (const zero::StateBytes& state : run.state_bytes) {
    memory.model_states_bytes[state.state] = state.bytes;
    memory.model_states_total_bytes += state.bytes;
    memory.model_states_tier[state.state] = spec::tier_name(state.tier);
  }
  memory.device = tier_of(run.device_memory);
  static_cast<reports::TierMemory&>(memory.host) = tier_of(run.host_memory);
  memory.host.peak_rss_bytes = run.host_peak_rss_bytes;
  memory.nvme = record.engine.at("nvme");
  memory.activations_bytes = run.activation_bytes;
  if (!run.ranks.is_null()) record.ranks = run.ranks;
  reports::TrainCheckpoint checkpoint;
  if (run.outcome.resumed_from) checkpoint.resumed_from = run.outcome.resumed_from->string();
  if (run.outcome.last_checkpoint) checkpoint.last_written = run.outcome.last_checkpoint->string();
  checkpoint.resume_warnings = run.outcome.resume_warnings;
  record.checkpoint = std::move(checkpoint);
  return record;
}

json make_train_record(const TrainRun& run) { return train_record_of(run); }

Result<Rendered> render_train_record(const json& json_record) {
  ZINF_ASSIGN_OR_RETURN(const reports::TrainRecord record, reports::read_train_record(json_record));
  Rendered out;
  out.record = json_record;
  const reports::TrainSummary& summary = record.summary;
  const reports::TrainMemory& memory = record.memory;
  out.document.title = fmt::format("zinf train {}", record.scenario.value("name", std::string()));

  reports::Section run;
  run.title = "Run";
  run.fields.emplace_back("scenario", record.scenario_path);
  run.fields.emplace_back("device", fmt::format("{}, {} threads", record.device.description, record.device.threads));
  run.fields.emplace_back("model",
                          fmt::format("{} parameters", format_count(static_cast<double>(record.model.params))));
  run.fields.emplace_back("data", record.data.description);
  const std::int64_t first = summary.first_step;
  run.fields.emplace_back("steps", fmt::format("{} run{} ({} warm-up, excluded from medians)", summary.steps_run,
                                               first > 0 ? fmt::format(", resumed at step {}", first) : std::string(),
                                               summary.warmup_steps));
  if (record.checkpoint) {
    for (const std::string& warning : record.checkpoint->resume_warnings) {
      run.fields.emplace_back("checkpoint passed over", warning);
    }
  }
  out.document.sections.push_back(std::move(run));

  reports::Section result;
  result.title = "Result";
  const std::uint64_t loss_steps = summary.final_loss_steps;
  result.fields.emplace_back(
      "final loss",
      reports::Cell(!summary.final_loss ? std::string("-")
                                        : fmt::format("{:.4f} nats/token (mean of the last {} step{})",
                                                      *summary.final_loss, loss_steps, loss_steps == 1 ? "" : "s"),
                    reports::Emphasis::kStrong));
  if (summary.final_eval_loss) {
    result.fields.emplace_back("held-out loss", fmt::format("{:.4f} nats/token", *summary.final_eval_loss));
  }
  if (record.data.entropy_rate_nats) {
    result.fields.emplace_back(
        "entropy rate", fmt::format("{:.4f} nats/token (the best any model can do)", *record.data.entropy_rate_nats));
    if (summary.loss_vs_entropy_rate) {
      const double pct = *summary.loss_vs_entropy_rate * 100.0;
      result.fields.emplace_back(
          "loss above entropy rate",
          reports::Cell(fmt::format("{:+.1f}%", pct),
                        std::abs(pct) <= 5.0 ? reports::Emphasis::kGood : reports::Emphasis::kWarn));
    }
  }
  if (summary.skipped_steps > 0) {
    result.fields.emplace_back("skipped steps", fmt::format("{} (fp16 inf/NaN gradients)", summary.skipped_steps));
  }
  const reports::StepTimeSummary& step_ms = summary.step_ms;
  result.fields.emplace_back(
      "throughput",
      reports::Cell(!summary.tokens_per_s ? std::string("-") : format_count(*summary.tokens_per_s) + " tokens/s",
                    reports::Emphasis::kStrong));
  result.fields.emplace_back(
      "step time",
      fmt::format(
          "{:.1f} ms median (p10 {:.1f}, p90 {:.1f}): forward {:.1f} + backward {:.1f}, optimizer {:.1f}, data {:.2f}",
          step_ms.median, step_ms.p10, step_ms.p90, summary.forward_ms_median, summary.backward_ms_median,
          summary.optimizer_ms_median, summary.data_ms_median));
  if (summary.mfu_inconsistent) {
    result.fields.emplace_back(
        "compute", reports::Cell(fmt::format("{}; MFU not reported: {}", format_flops(summary.flops_per_s.value_or(0)),
                                             *summary.mfu_inconsistent),
                                 reports::Emphasis::kBad));
  } else if (summary.flops_per_s) {
    result.fields.emplace_back(
        "compute", fmt::format("{}, MFU {:.1f}% of the measured {} {} peak", format_flops(*summary.flops_per_s),
                               summary.mfu.value_or(0.0) * 100.0, format_flops(record.compute_peak.flops_per_s),
                               record.compute_peak.kind));
  }
  out.document.sections.push_back(std::move(result));

  reports::Section mem;
  mem.title = "Memory";
  mem.table.columns = {{"tier"}, {"peak", reports::Align::kRight}, {"budget", reports::Align::kRight}, {"holds"}};
  // Bytes of the model states that live on one tier ("gpu" is the device tier's name).
  const auto states_on = [&](const std::string& tier) {
    double bytes = 0;
    for (const auto& [state, value] : memory.model_states_bytes) {
      const auto on = memory.model_states_tier.find(state);
      if ((on == memory.model_states_tier.end() ? std::string("gpu") : on->second) == tier) {
        bytes += static_cast<double>(value);
      }
    }
    return bytes;
  };
  const auto budget = [](const reports::TierMemory& tier) {
    return tier.capacity_bytes ? format_bytes(static_cast<double>(*tier.capacity_bytes)) : std::string("none");
  };
  mem.table.rows.push_back({"device", format_bytes(static_cast<double>(memory.device.peak_bytes)),
                            budget(memory.device),
                            fmt::format("model states {} + activations {}", format_bytes(states_on("gpu")),
                                        format_bytes(static_cast<double>(memory.activations_bytes)))});
  mem.table.rows.push_back(
      {"host", format_bytes(static_cast<double>(memory.host.peak_bytes)), budget(memory.host),
       fmt::format("model states {}; process peak RSS {} (includes the device arena on the CPU "
                   "backend)",
                   format_bytes(states_on("cpu")), format_bytes(static_cast<double>(memory.host.peak_rss_bytes)))});
  const json& nvme = memory.nvme;
  const double nvme_peak = nvme.at("peak_bytes").get<double>();
  mem.table.rows.push_back(
      {"nvme", format_bytes(nvme_peak),
       nvme_peak > 0 ? format_bytes(nvme.at("capacity_bytes").get<double>()) : std::string("none"),
       nvme_peak > 0 ? fmt::format("model states {} (swap files, removed at exit)", format_bytes(states_on("nvme")))
                     : std::string("not used")});
  out.document.sections.push_back(std::move(mem));
  out.document.sections.push_back(render_engine_section(record.engine));
  if (record.plan) out.document.sections.push_back(render_plan_section(*record.plan));
  if (record.ranks) {
    const json& ranks = *record.ranks;
    reports::Section section;
    section.title =
        fmt::format("Ranks ({} over {})", ranks.at("world_size").get<int>(), ranks.at("backend").get<std::string>());
    section.table.columns = {{"rank", reports::Align::kRight},        {"step ms", reports::Align::kRight},
                             {"fwd+bwd ms", reports::Align::kRight},  {"optimizer ms", reports::Align::kRight},
                             {"device peak", reports::Align::kRight}, {"host peak", reports::Align::kRight},
                             {"peak RSS", reports::Align::kRight}};
    // Communication per rank, where the record has it (records before it was measured do not).
    const bool comm_columns =
        !ranks.at("per_rank").empty() && ranks.at("per_rank").front().contains("comm_busy_ms_median");
    if (comm_columns) {
      section.table.columns.push_back({"comm ms", reports::Align::kRight});
      section.table.columns.push_back({"waited ms", reports::Align::kRight});
    }
    for (const json& r : ranks.at("per_rank")) {
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
  for (const reports::TrainStep& s : record.steps) {
    out.csv.rows.push_back({std::to_string(s.step), s.loss ? fmt::format("{:.6f}", *s.loss) : std::string("nan"),
                            fmt::format("{:.6g}", s.lr),
                            s.grad_norm ? fmt::format("{:.6g}", *s.grad_norm) : std::string("nan"),
                            fmt::format("{:.3f}", s.step_ms), fmt::format("{:.1f}", s.tokens_per_s),
                            s.skipped ? "true" : "false", s.warmup ? "true" : "false"});
  }
  return out;
}

}  // namespace zinf::cli
