// Run conditions: parsing /proc/loadavg and /proc/stat text against hand-written lines, and the
// "conditions" object against what this test reads from the same files itself.
#include "reports/run_conditions.h"

#include <sched.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/catch.h"

namespace zinf::reports {
namespace {

TEST_CASE("conditions: the 1-minute load average from /proc/loadavg text", "[conditions]") {
  CHECK(load_avg_1m_from_loadavg("0.52 0.61 0.70 2/345 6789\n").value_or(-1) == Approx(0.52));
  CHECK(load_avg_1m_from_loadavg("12.00 1.0 1.0 1/1 1").value_or(-1) == Approx(12.0));
  CHECK_FALSE(load_avg_1m_from_loadavg("").has_value());
  CHECK_FALSE(load_avg_1m_from_loadavg("x 0.1 0.1").has_value());
  CHECK_FALSE(load_avg_1m_from_loadavg("-1 0 0").has_value());
}

TEST_CASE("conditions: CPU times and steal from /proc/stat text", "[conditions]") {
  const std::string stat =
      "cpu  100 10 50 800 20 0 5 15 7 0\n"
      "cpu0 50 5 25 400 10 0 2 8 3 0\n"
      "intr 12345\n";
  const std::optional<CpuTimes> t = cpu_times_from_stat(stat);
  REQUIRE(t.has_value());
  CHECK(t->total == 1000);  // user..steal; guest is inside user already
  CHECK(t->steal == 15);
  // A kernel without the steal column (before 2.6.11) has no steal to report.
  CHECK_FALSE(cpu_times_from_stat("cpu  100 10 50 800 20 0 5\n").has_value());
  CHECK_FALSE(cpu_times_from_stat("cpu0 1 2 3 4 5 6 7 8\n").has_value());
  CHECK_FALSE(cpu_times_from_stat("").has_value());

  const CpuTimes later{1400, 55};
  CHECK(steal_percent_between(t, later).value_or(-1) == Approx(10.0));  // 40 of 400 jiffies
  CHECK_FALSE(steal_percent_between(t, t).has_value());                 // no time passed
  CHECK_FALSE(steal_percent_between(std::nullopt, later).has_value());
}

TEST_CASE("conditions: governors agree or are listed", "[conditions]") {
  CHECK_FALSE(governor_summary({}).has_value());
  CHECK(governor_summary({"performance", "performance"}) == "performance");
  CHECK(governor_summary({"powersave", "performance", "powersave"}) == "performance+powersave");
}

TEST_CASE("conditions: the record's object from this machine's files", "[conditions]") {
  const ConditionsSnapshot started = snapshot_conditions();
  const nlohmann::json c = record_conditions(started);
  for (const char* key :
       {"load_avg_1m_before", "load_avg_1m_after", "steal_percent", "cores", "governor", "interval_seconds"}) {
    CHECK(c.contains(key));
  }
  // Readable here: the values are the files', read independently.
  const bool loadavg = std::ifstream("/proc/loadavg").good();
  CHECK(c.at("load_avg_1m_before").is_number() == loadavg);
  CHECK(c.at("load_avg_1m_after").is_number() == loadavg);
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
  CHECK(c.at("cores") == CPU_COUNT(&set));
  int first_cpu = 0;
  while (!CPU_ISSET(first_cpu, &set)) ++first_cpu;
  const bool governor =
      std::filesystem::exists("/sys/devices/system/cpu/cpu" + std::to_string(first_cpu) + "/cpufreq/scaling_governor");
  if (!governor) CHECK(c.at("governor").is_null());  // not readable: null, never a guess
  if (governor) CHECK(c.at("governor").is_string());
  CHECK(c.at("interval_seconds").get<double>() >= 0);

  // No start snapshot: what spans the run is null, not estimated.
  const nlohmann::json unstarted = record_conditions(ConditionsSnapshot{});
  CHECK(unstarted.at("load_avg_1m_before").is_null());
  CHECK(unstarted.at("steal_percent").is_null());
  CHECK(unstarted.at("interval_seconds").is_null());
}

}  // namespace
}  // namespace zinf::reports
