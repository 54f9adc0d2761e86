#include "apps/zinf/engine_record.h"

#include <algorithm>

#include <fmt/format.h>

#include "libengine/core/units.h"
#include "probes/latency_stats.h"

namespace zinf::cli {

// The measuring harness (probes/) this file calls.
using probes::SampleSpread;
using probes::spread_of;

namespace {

using nlohmann::json;

struct LinkTotals {
  double forward_backward_bytes = 0;
  double optimizer_bytes = 0;
};

// GB/s over the phase that moved the bytes: the bytes of the measured steps divided by the time
// those steps spent in that phase.
json link_json(const LinkTotals& totals, double fb_seconds, double optimizer_seconds, std::size_t steps) {
  const auto rate = [](double bytes, double seconds) {
    return seconds > 0 && bytes > 0 ? json(bytes / seconds / 1e9) : json(nullptr);
  };
  const double n = steps > 0 ? static_cast<double>(steps) : 1.0;
  return {{"forward_backward_bytes_per_step", totals.forward_backward_bytes / n},
          {"optimizer_bytes_per_step", totals.optimizer_bytes / n},
          {"forward_backward_gbps", rate(totals.forward_backward_bytes, fb_seconds)},
          {"optimizer_gbps", rate(totals.optimizer_bytes, optimizer_seconds)}};
}

void add(LinkTotals& totals, const zero::LinkBytes& link) {
  totals.forward_backward_bytes += static_cast<double>(link.forward_backward);
  totals.optimizer_bytes += static_cast<double>(link.optimizer);
}

std::string gbps_text(const json& value) {
  return value.is_null() ? std::string("-") : fmt::format("{:.2f} GB/s", value.get<double>());
}

// Communication per measured step: medians of the busy, waited and hidden times, and the share of
// the busy time that was hidden over all measured steps (null when nothing was communicated).
json comm_json(const std::vector<double>& busy_ms, const std::vector<double>& wait_ms,
               const std::vector<double>& hidden_ms, double calls, double send_bytes, std::size_t steps) {
  const double n = steps > 0 ? static_cast<double>(steps) : 1.0;
  double busy_total = 0, hidden_total = 0;
  for (std::size_t i = 0; i < busy_ms.size(); ++i) {
    busy_total += busy_ms[i];
    hidden_total += hidden_ms[i];
  }
  const auto median = [](const std::vector<double>& v) {
    return v.empty() ? json(nullptr) : json(spread_of(v).median);
  };
  return {{"calls_per_step", calls / n},
          {"send_bytes_per_step", send_bytes / n},
          {"busy_ms_median", median(busy_ms)},
          {"wait_ms_median", median(wait_ms)},
          {"hidden_ms_median", median(hidden_ms)},
          {"hidden_fraction", busy_total > 0 ? json(hidden_total / busy_total) : json(nullptr)}};
}

}  // namespace

json engine_step_json(const train::StepMetrics& step) {
  const zero::EngineStats& e = step.engine;
  return {{"nvme_read_bytes", e.nvme_read.total()},
          {"nvme_write_bytes", e.nvme_write.total()},
          {"host_to_device_bytes", e.host_to_device.total()},
          {"device_to_host_bytes", e.device_to_host.total()},
          {"stall_ms", e.stall_seconds * 1e3},
          {"acquires", e.acquires},
          {"prefetch_hits", e.prefetch_hits},
          {"optimizer_elements", e.optimizer_elements},
          {"optimizer_elements_overlapped", e.optimizer_elements_overlapped},
          {"optimizer_thread_ms", e.optimizer_worker_seconds * 1e3},
          {"optimizer_thread_overlapped_ms", e.optimizer_overlapped_seconds * 1e3},
          {"comm_busy_ms", e.comm_busy_seconds * 1e3},
          {"comm_wait_ms", e.comm_wait_seconds * 1e3},
          {"comm_calls", e.comm_calls},
          {"comm_send_bytes", e.comm_send_bytes},
          {"checkpoint_to_host_bytes", step.checkpoints.to_host_bytes},
          {"checkpoint_to_device_bytes", step.checkpoints.to_device_bytes}};
}

json make_engine_record(const EngineRun& run, const std::vector<train::StepMetrics>& steps, std::int64_t warmup) {
  LinkTotals nvme_read, nvme_write, h2d, d2h;
  double fb_seconds = 0, optimizer_seconds = 0;
  std::uint64_t acquires = 0, hits = 0, sync_reads = 0, mismatches = 0, nvme_peak = 0, nvme_capacity = 0;
  std::vector<double> stall_fraction;
  std::vector<double> comm_busy_ms, comm_wait_ms, comm_hidden_ms;
  double comm_calls = 0, comm_send_bytes = 0;
  double checkpoint_to_host = 0, checkpoint_to_device = 0, kept_on_host = 0;
  std::size_t measured = 0;
  double optimizer_elements = 0, overlapped_elements = 0, thread_seconds = 0, overlapped_thread_seconds = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const zero::EngineStats& e = steps[i].engine;
    mismatches += e.trace_mismatches;
    nvme_peak = std::max(nvme_peak, e.nvme_peak_bytes);
    nvme_capacity = std::max(nvme_capacity, e.nvme_capacity_bytes);
    if (static_cast<std::int64_t>(i) < warmup) continue;
    ++measured;
    add(nvme_read, e.nvme_read);
    add(nvme_write, e.nvme_write);
    add(h2d, e.host_to_device);
    add(d2h, e.device_to_host);
    checkpoint_to_host += static_cast<double>(steps[i].checkpoints.to_host_bytes);
    checkpoint_to_device += static_cast<double>(steps[i].checkpoints.to_device_bytes);
    fb_seconds += steps[i].forward_backward_seconds;
    optimizer_seconds += steps[i].optimizer_seconds;
    acquires += e.acquires;
    hits += e.prefetch_hits;
    sync_reads += e.sync_nvme_reads;
    kept_on_host += static_cast<double>(e.params_kept_on_host_bytes);
    optimizer_elements += static_cast<double>(e.optimizer_elements);
    overlapped_elements += static_cast<double>(e.optimizer_elements_overlapped);
    thread_seconds += e.optimizer_worker_seconds;
    overlapped_thread_seconds += e.optimizer_overlapped_seconds;
    if (steps[i].forward_backward_seconds > 0)
      stall_fraction.push_back(e.stall_seconds / steps[i].forward_backward_seconds);
    comm_busy_ms.push_back(e.comm_busy_seconds * 1e3);
    comm_wait_ms.push_back(e.comm_wait_seconds * 1e3);
    comm_hidden_ms.push_back(e.comm_hidden_seconds() * 1e3);
    comm_calls += static_cast<double>(e.comm_calls);
    comm_send_bytes += static_cast<double>(e.comm_send_bytes);
  }
  json engine;
  engine["zero"] = run.zero;
  engine["description"] = run.description;
  engine["links"] = {{"nvme_read", link_json(nvme_read, fb_seconds, optimizer_seconds, measured)},
                     {"nvme_write", link_json(nvme_write, fb_seconds, optimizer_seconds, measured)},
                     {"host_to_device", link_json(h2d, fb_seconds, optimizer_seconds, measured)},
                     {"device_to_host", link_json(d2h, fb_seconds, optimizer_seconds, measured)}};
  const SampleSpread stall = spread_of(stall_fraction);
  engine["stall_fraction_of_forward_backward"] = stall_fraction.empty() ? json(nullptr) : json(stall.median);
  engine["prefetch"] = {
      {"acquires", acquires},
      {"hits", hits},
      {"hit_rate", acquires > 0 ? json(static_cast<double>(hits) / static_cast<double>(acquires)) : json(nullptr)},
      {"synchronous_nvme_reads", sync_reads},
      {"params_kept_on_host_bytes_per_step", measured > 0 ? kept_on_host / static_cast<double>(measured) : 0.0},
      {"order_mismatches", mismatches}};
  if (!steps.empty()) {
    // The adaptive look-ahead where the run left it (it only grows, after steps that stalled).
    const zero::EngineStats& last = steps.back().engine;
    engine["prefetch"]["near_window_bytes"] = last.prefetch_near_window_bytes;
    engine["prefetch"]["near_budget_bytes"] = last.prefetch_near_budget_bytes;
    engine["prefetch"]["far_window_bytes"] = last.prefetch_far_window_bytes;
    engine["prefetch"]["far_budget_bytes"] = last.prefetch_far_budget_bytes;
  }
  engine["nvme"] = {{"peak_bytes", nvme_peak}, {"capacity_bytes", nvme_capacity}};
  if (optimizer_elements > 0) {
    // How much of the optimizer's work ran behind the backward pass (zero.overlap_optimizer): the
    // share of the states stepped before the backward pass ended, the optimizer thread's time then,
    // and what was left for the optimizer phase after it.
    const double n = measured > 0 ? static_cast<double>(measured) : 1.0;
    engine["optimizer_overlap"] = {
        {"overlap_optimizer", run.zero.value("overlap_optimizer", false)},
        {"stepped_during_backward_fraction", overlapped_elements / optimizer_elements},
        {"optimizer_thread_ms_per_step", thread_seconds * 1e3 / n},
        {"optimizer_thread_during_backward_ms_per_step", overlapped_thread_seconds * 1e3 / n},
        {"optimizer_phase_ms_per_step", optimizer_seconds * 1e3 / n}};
  }
  engine["comm"] = comm_json(comm_busy_ms, comm_wait_ms, comm_hidden_ms, comm_calls, comm_send_bytes, measured);
  const double n = measured > 0 ? static_cast<double>(measured) : 1.0;
  const auto rate = [&](double bytes) {
    return fb_seconds > 0 && bytes > 0 ? json(bytes / fb_seconds / 1e9) : json(nullptr);
  };
  engine["activation_checkpoints"] = {{"tier", run.host_checkpoints > 0 ? "cpu" : "gpu"},
                                      {"count", run.checkpoints},
                                      {"in_host_memory", run.host_checkpoints},
                                      {"device_slots", run.checkpoint_device_slots},
                                      {"bytes_each", run.checkpoint_bytes},
                                      {"to_host_bytes_per_step", checkpoint_to_host / n},
                                      {"to_device_bytes_per_step", checkpoint_to_device / n},
                                      {"to_host_gbps", rate(checkpoint_to_host)},
                                      {"to_device_gbps", rate(checkpoint_to_device)}};
  engine["tiling"] = run.tiling;
  return engine;
}

reports::Section render_engine_section(const json& engine) {
  reports::Section section;
  section.title = "Engine";
  section.fields.emplace_back("placement", engine.at("description").get<std::string>());
  const json& prefetch = engine.at("prefetch");
  if (prefetch.at("acquires").get<std::uint64_t>() > 0) {
    const json& stall = engine.at("stall_fraction_of_forward_backward");
    section.fields.emplace_back(
        "prefetch",
        fmt::format("{:.1f}% of {} acquires hit, stall {} of forward+backward, {} order mismatches",
                    prefetch.at("hit_rate").get<double>() * 100.0, prefetch.at("acquires").get<std::uint64_t>(),
                    stall.is_null() ? std::string("-") : fmt::format("{:.1f}%", stall.get<double>() * 100.0),
                    prefetch.at("order_mismatches").get<std::uint64_t>()));
    if (prefetch.contains("near_window_bytes")) {
      const auto bytes = [&](const char* key) { return format_bytes(prefetch.at(key).get<double>()); };
      std::string depth =
          fmt::format("{} of {} ahead to the device", bytes("near_window_bytes"), bytes("near_budget_bytes"));
      if (prefetch.at("far_budget_bytes").get<std::uint64_t>() > 0) {
        depth += fmt::format(", {} of {} of NVMe reads", bytes("far_window_bytes"), bytes("far_budget_bytes"));
      }
      depth += " (settled at)";
      if (prefetch.value("params_kept_on_host_bytes_per_step", 0.0) > 0) {
        depth += fmt::format("; {}/step of new parameters kept on the host, not read back",
                             bytes("params_kept_on_host_bytes_per_step"));
      }
      section.fields.emplace_back("look-ahead", depth);
    }
  }
  if (engine.contains("optimizer_overlap")) {
    const json& overlap = engine.at("optimizer_overlap");
    section.fields.emplace_back(
        "optimizer",
        overlap.at("overlap_optimizer").get<bool>()
            ? fmt::format("{:.1f}% of the states stepped during the backward pass ({:.1f} of {:.1f} ms of CPU Adam "
                          "per step); optimizer phase {:.1f} ms per step",
                          overlap.at("stepped_during_backward_fraction").get<double>() * 100.0,
                          overlap.at("optimizer_thread_during_backward_ms_per_step").get<double>(),
                          overlap.at("optimizer_thread_ms_per_step").get<double>(),
                          overlap.at("optimizer_phase_ms_per_step").get<double>())
            : fmt::format("stepped after the backward pass (overlap_optimizer false); optimizer phase {:.1f} ms per "
                          "step",
                          overlap.at("optimizer_phase_ms_per_step").get<double>()));
  }
  if (const auto comm = engine.find("comm");
      comm != engine.end() && comm->at("calls_per_step").get<double>() > 0 && !comm->at("busy_ms_median").is_null()) {
    const json& hidden = comm->at("hidden_fraction");
    section.fields.emplace_back(
        "communication",
        fmt::format("{:.1f} ms/step busy ({:.0f} calls, {} sent), compute waited {:.1f} ms, {} hidden",
                    comm->at("busy_ms_median").get<double>(), comm->at("calls_per_step").get<double>(),
                    format_bytes(comm->at("send_bytes_per_step").get<double>()),
                    comm->at("wait_ms_median").get<double>(),
                    hidden.is_null() ? std::string("-") : fmt::format("{:.0f}%", hidden.get<double>() * 100.0)));
  }
  if (engine.at("tiling").is_object())
    section.fields.emplace_back("tiling", engine.at("tiling").at("choice").get<std::string>());
  const json& checkpoints = engine.at("activation_checkpoints");
  if (checkpoints.at("in_host_memory").get<std::int64_t>() > 0) {
    section.fields.emplace_back(
        "activation checkpoints",
        fmt::format("{} of {} in host memory ({} each, {} device slots); {} out and {} back per step",
                    checkpoints.at("in_host_memory").get<std::int64_t>(), checkpoints.at("count").get<std::int64_t>(),
                    format_bytes(checkpoints.at("bytes_each").get<double>()),
                    checkpoints.at("device_slots").get<std::int64_t>(),
                    format_bytes(checkpoints.at("to_host_bytes_per_step").get<double>()),
                    format_bytes(checkpoints.at("to_device_bytes_per_step").get<double>())));
  }
  section.table.columns = {{"link"},
                           {"fwd+bwd / step", reports::Align::kRight},
                           {"over fwd+bwd time", reports::Align::kRight},
                           {"optimizer / step", reports::Align::kRight},
                           {"over optimizer time", reports::Align::kRight}};
  for (const char* name : {"nvme_read", "nvme_write", "host_to_device", "device_to_host"}) {
    const json& link = engine.at("links").at(name);
    const double fb = link.at("forward_backward_bytes_per_step").get<double>();
    const double opt = link.at("optimizer_bytes_per_step").get<double>();
    if (fb == 0 && opt == 0) continue;
    section.table.rows.push_back({name, format_bytes(fb), gbps_text(link.at("forward_backward_gbps")),
                                  format_bytes(opt), gbps_text(link.at("optimizer_gbps"))});
  }
  if (section.table.rows.empty()) section.table.columns.clear();
  return section;
}

}  // namespace zinf::cli
