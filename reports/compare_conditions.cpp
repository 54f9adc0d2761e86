#include "reports/compare_conditions.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "reports/chart.h"

namespace zinf::reports {
namespace {

using nlohmann::json;

std::optional<double> number(const json& conditions, const char* key) {
  if (!conditions.is_object()) return std::nullopt;
  const auto it = conditions.find(key);
  if (it == conditions.end() || !it->is_number()) return std::nullopt;
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < 0) return std::nullopt;
  return v;
}

std::optional<std::string> text(const json& conditions, const char* key) {
  if (!conditions.is_object()) return std::nullopt;
  const auto it = conditions.find(key);
  if (it == conditions.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

std::string pct(double fraction) { return fmt::format("{:.1f}%", fraction * 100.0); }

}  // namespace

ConditionsComparison compare_conditions(const json& base, const json& candidate, double threshold) {
  ConditionsComparison out;
  out.base = base.is_object() && base.contains("conditions") ? base.at("conditions") : json(nullptr);
  out.candidate =
      candidate.is_object() && candidate.contains("conditions") ? candidate.at("conditions") : json(nullptr);
  const bool base_known = out.base.is_object();
  const bool new_known = out.candidate.is_object();
  if (!base_known || !new_known) {
    out.unknowns.push_back(fmt::format(
        "the {} record{} no run conditions (written before zinf recorded them): a change may be the machine's, not "
        "zinf's",
        !base_known && !new_known ? "base and the new"
        : !base_known             ? "base"
                                  : "new",
        !base_known && !new_known ? "s have" : " has"));
    return out;
  }
  std::vector<std::string> unreadable;
  const auto note_unreadable = [&](const char* what, bool base_has, bool new_has) {
    if (base_has && new_has) return;
    unreadable.push_back(fmt::format("{} ({})", what,
                                     !base_has && !new_has ? "neither side"
                                     : !base_has           ? "base side"
                                                           : "new side"));
  };
  const std::optional<double> base_cores = number(out.base, "cores");
  const std::optional<double> new_cores = number(out.candidate, "cores");
  note_unreadable("cores", base_cores.has_value(), new_cores.has_value());
  if (base_cores && new_cores && *base_cores != *new_cores) {
    out.differences.push_back(
        fmt::format("the runs had {} and {} cores: a different machine share", *base_cores, *new_cores));
  }
  const std::optional<std::string> base_governor = text(out.base, "governor");
  const std::optional<std::string> new_governor = text(out.candidate, "governor");
  note_unreadable("frequency governor", base_governor.has_value(), new_governor.has_value());
  if (base_governor && new_governor && *base_governor != *new_governor) {
    out.differences.push_back(fmt::format("the CPU frequency governor was {} and then {}: clock speeds may differ",
                                          *base_governor, *new_governor));
  }
  const auto consider = [&](double change) {
    out.explainable_change = std::max(out.explainable_change.value_or(0.0), change);
  };
  for (const auto& [key, moment] : {std::pair<const char*, const char*>{"load_avg_1m_before", "at the start"},
                                    std::pair<const char*, const char*>{"load_avg_1m_after", "at the record"}}) {
    const std::optional<double> lb = number(out.base, key);
    const std::optional<double> ln = number(out.candidate, key);
    note_unreadable(key, lb.has_value(), ln.has_value());
    if (!lb || !ln || !base_cores || !new_cores || *base_cores <= 0 || *new_cores <= 0) continue;
    const double per_core_base = *lb / *base_cores;
    const double per_core_new = *ln / *new_cores;
    const double change = std::abs((1.0 + per_core_new) / (1.0 + per_core_base) - 1.0);
    consider(change);
    if (change > threshold) {
      out.differences.push_back(
          fmt::format("load per core {} was {} on the base side and {} on the new side: the CPU share zinf got may "
                      "differ by {}, beyond the {} threshold",
                      moment, format_figure(per_core_base), format_figure(per_core_new), pct(change), pct(threshold)));
    }
  }
  const std::optional<double> sb = number(out.base, "steal_percent");
  const std::optional<double> sn = number(out.candidate, "steal_percent");
  note_unreadable("steal", sb.has_value(), sn.has_value());
  if (sb && sn) {
    const double change = std::abs(*sn - *sb) / 100.0;
    consider(change);
    if (change > threshold) {
      out.differences.push_back(fmt::format(
          "the hypervisor stole {:.1f}% of the CPU time on the base side and {:.1f}% on the new side", *sb, *sn));
    }
  }
  if (!unreadable.empty()) {
    std::string list;
    for (const std::string& u : unreadable) list += (list.empty() ? "" : ", ") + u;
    out.unknowns.push_back("not readable, so not judged: " + list);
  }
  return out;
}

std::string conditions_line(const json& conditions) {
  if (!conditions.is_object()) return "unknown (the record predates run conditions)";
  const auto figure = [&](const char* key, const char* format_spec) {
    const std::optional<double> v = number(conditions, key);
    return v ? fmt::format(fmt::runtime(format_spec), *v) : std::string("not readable");
  };
  return fmt::format("load {} at the start, {} at the record (1-min average) on {} cores, steal {}, governor {}",
                     figure("load_avg_1m_before", "{:.2f}"), figure("load_avg_1m_after", "{:.2f}"),
                     figure("cores", "{:.0f}"), figure("steal_percent", "{:.1f}%"),
                     text(conditions, "governor").value_or("not readable"));
}

}  // namespace zinf::reports
