#include "probes/thread_cpu.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <unordered_map>

namespace zinf::probes {
namespace {

bool has_prefix(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

std::optional<std::uint64_t> next_schedstat_number(std::string_view& text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end == text.data()) return std::nullopt;
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  return value;
}

}  // namespace

ThreadRole thread_role(std::string_view name) {
  if (has_prefix(name, "zinf-swap-io") || has_prefix(name, "zinf-posix-io")) return ThreadRole::kIo;
  if (has_prefix(name, "zinf-")) return ThreadRole::kOtherEngine;
  return ThreadRole::kCompute;
}

std::optional<ThreadSample> parse_schedstat(std::string_view line) {
  const std::optional<std::uint64_t> run = next_schedstat_number(line);
  const std::optional<std::uint64_t> wait = next_schedstat_number(line);
  const std::optional<std::uint64_t> slices = next_schedstat_number(line);
  if (!run || !wait || !slices) return std::nullopt;
  ThreadSample sample;
  sample.run_ns = *run;
  sample.wait_ns = *wait;
  return sample;
}

std::vector<ThreadSample> sample_threads() {
  std::vector<ThreadSample> samples;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task", error)) {
    std::uint64_t tid = 0;
    const std::string id = entry.path().filename().string();
    if (std::from_chars(id.data(), id.data() + id.size(), tid).ec != std::errc()) continue;
    std::ifstream stat(entry.path() / "schedstat");
    std::string line;
    if (!std::getline(stat, line)) continue;  // ended meanwhile, or no schedstat
    std::optional<ThreadSample> sample = parse_schedstat(line);
    if (!sample) continue;
    std::ifstream comm(entry.path() / "comm");
    std::getline(comm, sample->name);
    sample->tid = tid;
    samples.push_back(std::move(*sample));
  }
  return samples;
}

CpuByRole cpu_between(const std::vector<ThreadSample>& before, const std::vector<ThreadSample>& after) {
  std::unordered_map<std::uint64_t, const ThreadSample*> earlier;
  for (const ThreadSample& s : before) earlier.emplace(s.tid, &s);
  CpuByRole cpu;
  for (const ThreadSample& s : after) {
    const auto it = earlier.find(s.tid);
    if (it == earlier.end() || s.run_ns < it->second->run_ns || s.wait_ns < it->second->wait_ns) continue;
    const double run = static_cast<double>(s.run_ns - it->second->run_ns) * 1e-9;
    const double wait = static_cast<double>(s.wait_ns - it->second->wait_ns) * 1e-9;
    switch (thread_role(s.name)) {
      case ThreadRole::kCompute:
        cpu.compute_run += run;
        cpu.compute_wait += wait;
        break;
      case ThreadRole::kIo:
        cpu.io_run += run;
        cpu.io_wait += wait;
        break;
      case ThreadRole::kOtherEngine:
        cpu.other_run += run;
        cpu.other_wait += wait;
        break;
    }
  }
  return cpu;
}

}  // namespace zinf::probes
