// Run conditions: what a record was measured under — the machine's 1-minute load average when the
// command started and when the record was made, the share of CPU time the hypervisor stole in
// between, the cores this process may run on and the CPU frequency governor. Every record's
// envelope carries them ("conditions", record_envelope.h) so that `zinf compare` can tell a change
// of the machine from a change of zinf (compare_conditions.h).
//
//   "conditions": {"load_avg_1m_before": 0.42, "load_avg_1m_after": 1.9, "steal_percent": 0.3,
//                  "cores": 16, "governor": "performance", "interval_seconds": 12.5}
//
// Read from Linux files: /proc/loadavg, the aggregate "cpu" line of /proc/stat (steal is its 8th
// value), sched_getaffinity, /sys/devices/system/cpu/cpuN/cpufreq/scaling_governor. A value that
// cannot be read (a missing file, a kernel without the steal column, a VM without cpufreq) is null,
// "not readable" — never estimated.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace zinf::reports {

// Jiffies of the aggregate "cpu" line of /proc/stat: all of user..steal, and steal alone.
struct CpuTimes {
  std::uint64_t total = 0;
  std::uint64_t steal = 0;
};

// The parts of the conditions that change during a run, read at one moment. A default-constructed
// snapshot is "not taken": every value derived from it is null.
struct ConditionsSnapshot {
  bool taken = false;
  std::optional<double> load_avg_1m;
  std::optional<CpuTimes> cpu;  // nullopt: /proc/stat unreadable or without a steal column
  std::chrono::steady_clock::time_point at{};
};

// Reads /proc/loadavg and /proc/stat now. Never fails (unreadable values are nullopt); thread-safe.
ConditionsSnapshot snapshot_conditions();

// The first field of /proc/loadavg text, or nullopt when it is not a finite number >= 0.
std::optional<double> load_avg_1m_from_loadavg(std::string_view text);

// The aggregate "cpu" line of /proc/stat text, or nullopt when there is none or it has fewer than
// the 8 values user nice system idle iowait irq softirq steal (kernels before 2.6.11).
std::optional<CpuTimes> cpu_times_from_stat(std::string_view text);

// Steal as a percentage of all CPU time between two readings; nullopt when either is missing or
// no time passed between them.
std::optional<double> steal_percent_between(const std::optional<CpuTimes>& before,
                                            const std::optional<CpuTimes>& after);

// The governors of the CPUs read (one entry per readable CPU) as one string: "performance" when all
// agree, otherwise the distinct names sorted and joined with "+" ("performance+powersave");
// nullopt when `governors` is empty.
std::optional<std::string> governor_summary(const std::vector<std::string>& governors);

// The record's "conditions" object: `started` (taken when the command started) against a snapshot
// taken now, the cores of this process's affinity mask and the governors of those cores.
nlohmann::json record_conditions(const ConditionsSnapshot& started);

}  // namespace zinf::reports
