#include "apps/zinf/engine_record.h"

#include <algorithm>

#include <fmt/format.h>

#include "apps/zinf/latency_stats.h"
#include "libengine/core/units.h"

namespace zinf::cli {
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
          {"checkpoint_to_host_bytes", step.checkpoints.to_host_bytes},
          {"checkpoint_to_device_bytes", step.checkpoints.to_device_bytes}};
}

json make_engine_record(const EngineRun& run, const std::vector<train::StepMetrics>& steps, std::int64_t warmup) {
  LinkTotals nvme_read, nvme_write, h2d, d2h;
  double fb_seconds = 0, optimizer_seconds = 0;
  std::uint64_t acquires = 0, hits = 0, sync_reads = 0, mismatches = 0, nvme_peak = 0, nvme_capacity = 0;
  std::vector<double> stall_fraction;
  double checkpoint_to_host = 0, checkpoint_to_device = 0;
  std::size_t measured = 0;
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
    if (steps[i].forward_backward_seconds > 0)
      stall_fraction.push_back(e.stall_seconds / steps[i].forward_backward_seconds);
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
      {"order_mismatches", mismatches}};
  engine["nvme"] = {{"peak_bytes", nvme_peak}, {"capacity_bytes", nvme_capacity}};
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
