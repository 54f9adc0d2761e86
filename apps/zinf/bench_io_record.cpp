#include "apps/zinf/bench_io_record.h"

#include <fmt/format.h>

#include <string>

#include "libengine/core/units.h"
#include "reports/record_fields.h"

namespace zinf::cli {
namespace {

using nlohmann::json;
using reports::Align;
using reports::Cell;
using reports::Emphasis;
using reports::number_at;
using reports::string_at;

std::string gbps_text(const std::optional<double>& gbps) { return gbps ? fmt::format("{:.2f}", *gbps) : "-"; }
std::string ms_text(const std::optional<double>& seconds) {
  if (!seconds) return "-";
  const double ms = *seconds * 1e3;
  return ms >= 100 ? fmt::format("{:.0f}", ms) : ms >= 10 ? fmt::format("{:.1f}", ms) : fmt::format("{:.2f}", ms);
}
std::string bytes_text(const std::optional<double>& bytes) { return bytes ? format_bytes(*bytes) : "-"; }
std::string runs_text(std::uint64_t runs) { return fmt::format("{} run{}", runs, runs == 1 ? "" : "s"); }
std::uint64_t count_at(const json& record, std::string_view path) {
  return static_cast<std::uint64_t>(number_at(record, path).value_or(0));
}
bool is_random(const std::string& test) { return test.rfind("rand-", 0) == 0; }

reports::Section setup_section(const json& record) {
  reports::Section setup{"Setup", {}, {}, {}, {}};
  setup.fields.emplace_back("store", string_at(record, "store.description", "-"));
  const json* paths = reports::find_path(record, "store.paths");
  for (std::size_t i = 0; paths != nullptr && paths->is_array() && i < paths->size(); ++i) {
    const json& p = (*paths)[i];
    const bool direct = p.value("direct", false);
    const std::string mode =
        direct ? fmt::format("O_DIRECT, alignment {} B memory / {} B offset", count_at(p, "memory_alignment_bytes"),
                             count_at(p, "offset_alignment_bytes"))
               : fmt::format("buffered: {}", string_at(p, "why_buffered", "-"));
    setup.fields.emplace_back(fmt::format("path {}", i + 1),
                              Cell(fmt::format("{} ({}; swap file {})", string_at(p, "directory", "-"), mode,
                                               bytes_text(number_at(p, "file_bytes"))),
                                   direct ? Emphasis::kNone : Emphasis::kWarn));
  }
  const std::uint64_t count = count_at(record, "layout.tensor_count");
  const std::optional<double> tensor = number_at(record, "layout.tensor_bytes");
  const std::optional<double> last = number_at(record, "layout.last_tensor_bytes");
  const std::string tensors = last == tensor
                                  ? fmt::format("{} x {}", count, bytes_text(tensor))
                                  : fmt::format("{} x {} + 1 x {}", count - 1, bytes_text(tensor), bytes_text(last));
  setup.fields.emplace_back(
      "tensors",
      fmt::format("{} = {} per run; {} in flight ({} of buffers, {} with staging); {} of each test", tensors,
                  bytes_text(number_at(record, "input.size_bytes")), count_at(record, "layout.window_tensors"),
                  bytes_text(number_at(record, "layout.ring_bytes")),
                  bytes_text(number_at(record, "layout.memory_bytes")), runs_text(count_at(record, "input.repeat"))));
  if (const json* fio = reports::find_path(record, "fio"); fio != nullptr && fio->is_object()) {
    setup.fields.emplace_back(
        "fio", fmt::format("{} ({}), {}, --direct={}, --iomem={}, on the store's swap files",
                           string_at(*fio, "program"), string_at(*fio, "version"), string_at(*fio, "ioengine"),
                           fio->value("direct", false) ? 1 : 0, string_at(*fio, "iomem")));
  }
  if (const json* warnings = reports::find_path(record, "store.warnings");
      warnings != nullptr && warnings->is_array()) {
    for (const json& w : *warnings) setup.notes.push_back("warning: " + reports::value_text(w));
  }
  return setup;
}

reports::Section results_section(const json& record) {
  reports::Section results{"Results", {}, {}, {}, {}};
  results.table.columns = {{"test"},
                           {"GB/s", Align::kRight},
                           {"min..max", Align::kRight},
                           {"p50", Align::kRight},
                           {"p99", Align::kRight},
                           {"max", Align::kRight},
                           {"fio GB/s", Align::kRight},
                           {"zinf/fio", Align::kRight},
                           {"range", Align::kRight},
                           {"verified", Align::kRight}};
  results.table.rows.push_back({Cell("", Emphasis::kMuted), Cell("1e9 B/s", Emphasis::kMuted),
                                Cell("1e9 B/s", Emphasis::kMuted), Cell("ms", Emphasis::kMuted),
                                Cell("ms", Emphasis::kMuted), Cell("ms", Emphasis::kMuted),
                                Cell("1e9 B/s", Emphasis::kMuted), Cell("ratio", Emphasis::kMuted),
                                Cell("min..max", Emphasis::kMuted), Cell("", Emphasis::kMuted)});
  const double target = number_at(record, "fio.target_ratio").value_or(0.9);
  bool any_wide = false;
  const json* tests = reports::find_path(record, "tests");
  for (std::size_t t = 0; tests != nullptr && tests->is_array() && t < tests->size(); ++t) {
    const json& test = (*tests)[t];
    const std::string name = string_at(test, "name", "?");
    const std::optional<double> ratio = number_at(test, "zinf_over_fio");
    Cell ratio_cell("-", Emphasis::kMuted);
    Cell range_cell("-", Emphasis::kMuted);
    if (ratio) {
      const bool wide = reports::find_path(test, "zinf_over_fio_spread.too_wide") != nullptr &&
                        test.at("zinf_over_fio_spread").value("too_wide", false);
      any_wide = any_wide || wide;
      const Emphasis e = wide || is_random(name) ? Emphasis::kNone
                         : *ratio >= target      ? Emphasis::kGood
                                                 : Emphasis::kWarn;
      ratio_cell = Cell(fmt::format("{:.2f}{}", *ratio, wide ? " (spread too wide)" : ""), wide ? Emphasis::kWarn : e);
      const std::optional<double> low = number_at(test, "zinf_over_fio_spread.low");
      const std::optional<double> high = number_at(test, "zinf_over_fio_spread.high");
      if (low && high) range_cell = Cell(fmt::format("{:.2f}..{:.2f}", *low, *high));
    }
    Cell verified("-", Emphasis::kMuted);
    if (const json* v = reports::find_path(test, "verified"); v != nullptr && v->is_boolean()) {
      verified = v->get<bool>() ? Cell("yes", Emphasis::kGood) : Cell("NO", Emphasis::kBad);
    }
    results.table.rows.push_back(
        {Cell(name, Emphasis::kStrong), Cell(gbps_text(number_at(test, "gbps.median")), Emphasis::kStrong),
         fmt::format("{}..{}", gbps_text(number_at(test, "gbps.min")), gbps_text(number_at(test, "gbps.max"))),
         ms_text(number_at(test, "latency_seconds.p50")), ms_text(number_at(test, "latency_seconds.p99")),
         ms_text(number_at(test, "latency_seconds.max")),
         reports::find_path(test, "fio.gbps.median") != nullptr ? Cell(gbps_text(number_at(test, "fio.gbps.median")))
                                                                : Cell("-", Emphasis::kMuted),
         ratio_cell, range_cell, verified});
    const json* first = reports::find_path(test, "samples");
    if (first != nullptr && first->is_array() && !first->empty() && first->front().value("allocates_extents", false)) {
      results.notes.push_back(fmt::format(
          "{} run 1 wrote fresh extents (the first write of those blocks); later write runs rewrite them.", name));
    }
  }
  results.notes.insert(
      results.notes.begin(),
      fmt::format(
          "GB/s is 1e9 bytes per second, the median of {} (min..max beside it). Latency is per tensor, from "
          "issuing its read or write to wait() returning, over every run; with {} tensors in flight it includes "
          "queueing.",
          runs_text(count_at(record, "input.repeat")), count_at(record, "layout.window_tensors")));
  if (reports::find_path(record, "layout.prefilled") != nullptr && record.at("layout").value("prefilled", false)) {
    results.notes.push_back("The first test reads, so an untimed write pass made the extents before it.");
  }
  if (const std::uint64_t rewrites = count_at(record, "layout.untimed_rewrites"); rewrites > 0) {
    results.notes.push_back(fmt::format(
        "fio's write runs overwrite zinf's extents, so zinf rewrote them (untimed, {} times) before reading them back.",
        rewrites));
  }
  if (const json* v = reports::find_path(record, "verified"); v != nullptr && v->is_boolean() && v->get<bool>()) {
    results.notes.push_back(
        fmt::format("verified: every tensor read back carried the stamps (one per {}) of the last write pass.",
                    bytes_text(number_at(record, "layout.stamp_stride_bytes"))));
  }
  if (const json* fio = reports::find_path(record, "fio"); fio != nullptr && fio->is_object()) {
    results.notes.push_back(fmt::format(
        "zinf/fio is the ratio of the medians, its range pairs the extreme runs (min zinf / max fio .. max zinf / min "
        "fio); the target is >= {:.1f} for sequential read and write.",
        target));
    if (any_wide) {
      results.notes.push_back(
          "spread too wide: one side's runs differ by more than 20% of their median, so the ratio cannot be judged; "
          "rerun on a quieter machine or with more --repeat.");
    }
    if (const json* notes = reports::find_path(*fio, "notes"); notes != nullptr && notes->is_array()) {
      for (const json& n : *notes) results.notes.push_back(reports::value_text(n));
    }
  }
  return results;
}

reports::Section counters_section(const json& record) {
  const auto count = [&](std::string_view key) { return count_at(record, fmt::format("store.stats.{}", key)); };
  const auto flagged = [&](std::string_view key, Emphasis when_nonzero) {
    const std::uint64_t v = count(key);
    return Cell(std::to_string(v), v > 0 ? when_nonzero : Emphasis::kNone);
  };
  reports::Section counters{"Store counters", {}, {}, {}, {}};
  counters.fields = {
      {"bytes written / read", fmt::format("{} / {}", bytes_text(number_at(record, "store.stats.bytes_written")),
                                           bytes_text(number_at(record, "store.stats.bytes_read")))},
      {"chunk ops completed", std::to_string(count("ops_completed"))},
      {"short transfers resubmitted", flagged("short_resubmits", Emphasis::kWarn)},
      {"EAGAIN retries", flagged("eagain_retries", Emphasis::kWarn)},
      {"staged chunks", std::to_string(count("staged_ops"))},
      {"staging",
       fmt::format("{} buffers, {}; peak {} in use", count("staging_buffers"),
                   bytes_text(number_at(record, "store.stats.staging_bytes")), count("staging_peak_in_use"))},
      {"checksum failures", flagged("checksum_failures", Emphasis::kBad)},
      {"failed tickets", flagged("failed_tickets", Emphasis::kBad)},
      {"swap space used / capacity", fmt::format("{} / {}", bytes_text(number_at(record, "store.stats.used_bytes")),
                                                 bytes_text(number_at(record, "store.stats.capacity_bytes")))},
  };
  return counters;
}

}  // namespace

Rendered render_bench_io_record(const json& record) {
  Rendered out;
  out.document.title = "zinf bench io";
  out.document.sections.push_back(setup_section(record));
  out.document.sections.push_back(results_section(record));
  out.document.sections.push_back(counters_section(record));

  // CSV: one row per test, flattened from the record, base units.
  out.csv.columns = {{"test"},
                     {"gbps_median"},
                     {"gbps_min"},
                     {"gbps_max"},
                     {"runs"},
                     {"latency_p50_s"},
                     {"latency_p90_s"},
                     {"latency_p99_s"},
                     {"latency_max_s"},
                     {"fio_gbps_median"},
                     {"zinf_over_fio"},
                     {"zinf_over_fio_low"},
                     {"zinf_over_fio_high"},
                     {"spread_too_wide"},
                     {"verified"},
                     {"size_bytes"},
                     {"tensor_bytes"},
                     {"block_bytes"},
                     {"queue_depth"},
                     {"engine"},
                     {"checksum"},
                     {"paths"}};
  std::string joined_paths;
  if (const json* paths = reports::find_path(record, "input.paths"); paths != nullptr && paths->is_array()) {
    for (const json& p : *paths) joined_paths += (joined_paths.empty() ? "" : ";") + reports::value_text(p);
  }
  const auto number = [](const json& value, std::string_view path) {
    const std::optional<double> v = number_at(value, path);
    return v ? fmt::format("{}", *v) : std::string();
  };
  const auto integer = [&](std::string_view path) { return std::to_string(count_at(record, path)); };
  const json* tests = reports::find_path(record, "tests");
  for (std::size_t t = 0; tests != nullptr && tests->is_array() && t < tests->size(); ++t) {
    const json& test = (*tests)[t];
    const json* wide = reports::find_path(test, "zinf_over_fio_spread.too_wide");
    const json* verified = reports::find_path(test, "verified");
    const json* samples = reports::find_path(test, "samples");
    out.csv.rows.push_back(
        {string_at(test, "name"),
         number(test, "gbps.median"),
         number(test, "gbps.min"),
         number(test, "gbps.max"),
         std::to_string(samples != nullptr && samples->is_array() ? samples->size() : 0),
         number(test, "latency_seconds.p50"),
         number(test, "latency_seconds.p90"),
         number(test, "latency_seconds.p99"),
         number(test, "latency_seconds.max"),
         number(test, "fio.gbps.median"),
         number(test, "zinf_over_fio"),
         number(test, "zinf_over_fio_spread.low"),
         number(test, "zinf_over_fio_spread.high"),
         wide != nullptr && wide->is_boolean() ? (wide->get<bool>() ? "true" : "false") : "",
         verified != nullptr && verified->is_boolean() ? (verified->get<bool>() ? "true" : "false") : "",
         integer("input.size_bytes"),
         integer("input.tensor_bytes"),
         integer("input.block_bytes"),
         integer("input.queue_depth"),
         string_at(record, "store.engine"),
         string_at(record, "input.checksum"),
         joined_paths});
  }
  return out;
}

}  // namespace zinf::cli
