#include "reports/record_envelope.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "libengine/core/build_info.h"
#include "libengine/core/check.h"

namespace zinf::reports {
namespace {

constexpr std::string_view kUnknown = "unknown";

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n";
  const std::size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

// Calls `visit(key, value)` for each "key: value" line of a /proc file until it returns true.
template <typename Visit>
void for_each_proc_entry(std::string_view text, Visit visit) {
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    if (visit(trim(line.substr(0, colon)), trim(line.substr(colon + 1)))) return;
  }
}

// The whole file, or "" when it cannot be read. /proc files report a size of 0, so the file is
// streamed rather than sized.
std::string read_file_or_empty(const char* path) {
  std::ifstream file(path);
  if (!file) return {};
  std::ostringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

std::string hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return std::string(kUnknown);
  return name;
}

bool is_valid_kind(std::string_view kind) {
  return !kind.empty() && std::all_of(kind.begin(), kind.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

nlohmann::json generator_description() {
  const BuildInfo& info = build_info();
  nlohmann::json features = nlohmann::json::object();
  for (const BuildFeature& feature : info.features) {
    features[std::string(feature.name)] = {{"enabled", feature.enabled}, {"detail", std::string(feature.detail)}};
  }
  return {{"name", "zinf"},
          {"version", std::string(info.version)},
          {"git_sha", std::string(info.git_sha)},
          {"build_type", std::string(info.build_type)},
          {"compiler", std::string(info.compiler)},
          {"features", std::move(features)}};
}

}  // namespace

std::string format_utc_timestamp(std::chrono::system_clock::time_point time) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm utc{};
  // gmtime_r rather than gmtime: gmtime returns a pointer into storage shared by every thread.
  if (gmtime_r(&seconds, &utc) == nullptr) return std::string(kUnknown);
  char text[sizeof("YYYY-MM-DDTHH:MM:SSZ") + 8] = {};
  const std::size_t length = std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return std::string(text, length);
}

std::string cpu_model_from_cpuinfo(std::string_view cpuinfo_text) {
  std::string model(kUnknown);
  for_each_proc_entry(cpuinfo_text, [&](std::string_view key, std::string_view value) {
    if (key != "model name" || value.empty()) return false;
    model = std::string(value);
    return true;
  });
  return model;
}

std::uint64_t memory_bytes_from_meminfo(std::string_view meminfo_text) {
  std::uint64_t bytes = 0;
  for_each_proc_entry(meminfo_text, [&](std::string_view key, std::string_view value) {
    if (key != "MemTotal") return false;
    std::uint64_t amount = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), amount);
    if (ec != std::errc()) return true;
    // The kernel prints "kB" and means KiB.
    const std::string_view unit =
        trim(std::string_view(end, static_cast<std::size_t>(value.data() + value.size() - end)));
    if (unit == "kB" && amount <= UINT64_MAX / 1024) {
      bytes = amount * 1024;
    } else if (unit.empty()) {
      bytes = amount;
    }
    return true;
  });
  return bytes;
}

nlohmann::json host_description() {
  return {{"hostname", hostname()},
          {"cpu_model", cpu_model_from_cpuinfo(read_file_or_empty("/proc/cpuinfo"))},
          {"logical_cpus", std::thread::hardware_concurrency()},
          {"memory_bytes", memory_bytes_from_meminfo(read_file_or_empty("/proc/meminfo"))}};
}

nlohmann::json make_record_envelope(std::string_view kind, int schema_version, const ConditionsSnapshot& started) {
  ZINF_CHECK(is_valid_kind(kind), "a record kind is a non-empty lower-case name such as \"plan\"");
  ZINF_CHECK(schema_version >= 1, "record schema versions start at 1");
  return {{"schema", fmt::format("zinf.{}/{}", kind, schema_version)},
          {"generator", generator_description()},
          {"created_at", format_utc_timestamp(std::chrono::system_clock::now())},
          {"host", host_description()},
          {"conditions", record_conditions(started)}};
}

}  // namespace zinf::reports
