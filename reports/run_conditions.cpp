#include "reports/run_conditions.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace zinf::reports {
namespace {

using nlohmann::json;

// The whole file, or nullopt when it cannot be opened. /proc and /sys files report a size of 0,
// so the file is streamed rather than sized.
std::optional<std::string> read_file(const std::string& path) {
  std::ifstream file(path);
  if (!file) return std::nullopt;
  std::ostringstream contents;
  contents << file.rdbuf();
  if (file.bad()) return std::nullopt;
  return contents.str();
}

// The CPUs this process may run on, or empty when the kernel will not say. The mask is sized from
// the configured CPU count and grown while the kernel answers EINVAL (more CPUs than the mask).
std::vector<int> affinity_cpus() {
  long configured = sysconf(_SC_NPROCESSORS_CONF);
  if (configured < 1) configured = 1;
  for (int count = static_cast<int>(configured); count <= (1 << 16); count *= 2) {
    cpu_set_t* set = CPU_ALLOC(count);
    if (set == nullptr) return {};
    const std::size_t size = CPU_ALLOC_SIZE(count);
    CPU_ZERO_S(size, set);
    if (sched_getaffinity(0, size, set) == 0) {
      std::vector<int> cpus;
      for (int cpu = 0; cpu < count; ++cpu) {
        if (CPU_ISSET_S(cpu, size, set)) cpus.push_back(cpu);
      }
      CPU_FREE(set);
      return cpus;
    }
    const int error = errno;
    CPU_FREE(set);
    if (error != EINVAL) return {};
  }
  return {};
}

json optional_number(const std::optional<double>& v) {
  if (!v.has_value()) return json(nullptr);
  return json(v.value());
}

}  // namespace

std::optional<double> load_avg_1m_from_loadavg(std::string_view text) {
  const std::size_t end = text.find_first_of(" \t\n");
  const std::string first(text.substr(0, end));
  if (first.empty()) return std::nullopt;
  char* stop = nullptr;
  const double value = std::strtod(first.c_str(), &stop);
  if (stop == nullptr || *stop != '\0' || !std::isfinite(value) || value < 0) return std::nullopt;
  return value;
}

std::optional<CpuTimes> cpu_times_from_stat(std::string_view text) {
  // The aggregate line is "cpu" followed by spaces; per-CPU lines are "cpu0", "cpu1", ...
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.size() < 4 || line.substr(0, 4) != "cpu ") continue;
    line.remove_prefix(4);
    std::vector<std::uint64_t> values;
    while (values.size() < 8) {
      const std::size_t start = line.find_first_not_of(' ');
      if (start == std::string_view::npos) break;
      line.remove_prefix(start);
      std::uint64_t v = 0;
      const auto [next, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
      if (ec != std::errc()) return std::nullopt;
      values.push_back(v);
      line.remove_prefix(static_cast<std::size_t>(next - line.data()));
    }
    if (values.size() < 8) return std::nullopt;
    CpuTimes times;
    // guest and guest_nice (values 9 and 10) are already counted in user and nice.
    for (const std::uint64_t v : values) times.total += v;
    times.steal = values[7];
    return times;
  }
  return std::nullopt;
}

std::optional<double> steal_percent_between(const std::optional<CpuTimes>& before,
                                            const std::optional<CpuTimes>& after) {
  if (!before || !after || after->total <= before->total || after->steal < before->steal) return std::nullopt;
  return 100.0 * static_cast<double>(after->steal - before->steal) / static_cast<double>(after->total - before->total);
}

std::optional<std::string> governor_summary(const std::vector<std::string>& governors) {
  if (governors.empty()) return std::nullopt;
  std::vector<std::string> distinct = governors;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  std::string out;
  for (const std::string& g : distinct) out += (out.empty() ? "" : "+") + g;
  return out;
}

ConditionsSnapshot snapshot_conditions() {
  ConditionsSnapshot s;
  s.taken = true;
  s.at = std::chrono::steady_clock::now();
  if (const std::optional<std::string> loadavg = read_file("/proc/loadavg")) {
    s.load_avg_1m = load_avg_1m_from_loadavg(*loadavg);
  }
  if (const std::optional<std::string> stat = read_file("/proc/stat")) s.cpu = cpu_times_from_stat(*stat);
  return s;
}

json record_conditions(const ConditionsSnapshot& started) {
  const ConditionsSnapshot now = snapshot_conditions();
  const std::vector<int> cpus = affinity_cpus();
  std::vector<std::string> governors;
  for (const int cpu : cpus) {
    const std::optional<std::string> text =
        read_file(fmt::format("/sys/devices/system/cpu/cpu{}/cpufreq/scaling_governor", cpu));
    if (!text) continue;
    std::string name = *text;
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    if (!name.empty()) governors.push_back(std::move(name));
  }
  const std::optional<std::string> governor = governor_summary(governors);
  // json values built one by one (not from optionals in the initializer list): GCC 12 warns that
  // an optional's value "may be used uninitialized" there.
  json before = nullptr;
  json steal = nullptr;
  json interval = nullptr;
  if (started.taken) {
    before = optional_number(started.load_avg_1m);
    steal = optional_number(steal_percent_between(started.cpu, now.cpu));
    interval = std::chrono::duration<double>(now.at - started.at).count();
  }
  return {{"load_avg_1m_before", std::move(before)},
          {"load_avg_1m_after", optional_number(now.load_avg_1m)},
          {"steal_percent", std::move(steal)},
          {"cores", cpus.empty() ? json(nullptr) : json(cpus.size())},
          {"governor", governor ? json(*governor) : json(nullptr)},
          {"interval_seconds", std::move(interval)}};
}

}  // namespace zinf::reports
