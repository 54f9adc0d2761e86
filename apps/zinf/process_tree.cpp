// descendants_of and still_running (process_tree.h), from /proc/<pid>/stat.
#include "apps/zinf/process_tree.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include <fmt/format.h>

namespace zinf::cli {
namespace {

// State, parent pid and start time of `pid` from /proc/<pid>/stat; nullopt when it is gone. The
// command name in parentheses may hold spaces and parentheses, so fields are counted after the last ')'.
struct ProcStat {
  char state = 0;
  int ppid = 0;
  unsigned long long start_time = 0;
};
std::optional<ProcStat> read_proc_stat(int pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text;
  if (!in || !std::getline(in, text)) return std::nullopt;
  const std::size_t paren = text.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(paren + 1));
  ProcStat stat;
  std::string skip;
  fields >> stat.state >> stat.ppid;  // fields 3 and 4
  for (int field = 5; field < 22; ++field) fields >> skip;
  fields >> stat.start_time;  // field 22
  if (!fields) return std::nullopt;
  return stat;
}

}  // namespace

std::vector<ProcessId> descendants_of(int pid) {
  std::multimap<int, ProcessId> children;  // parent pid -> child
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const int child = std::stoi(name);
    if (const std::optional<ProcStat> stat = read_proc_stat(child)) {
      children.emplace(stat->ppid, ProcessId{child, stat->start_time});
    }
  }
  std::vector<ProcessId> out;
  std::vector<int> frontier{pid};
  while (!frontier.empty()) {
    const int parent = frontier.back();
    frontier.pop_back();
    const auto [begin, end] = children.equal_range(parent);
    for (auto it = begin; it != end; ++it) {
      out.push_back(it->second);
      frontier.push_back(it->second.pid);
    }
  }
  return out;
}

bool still_running(const ProcessId& process) {
  const std::optional<ProcStat> stat = read_proc_stat(process.pid);
  return stat && stat->start_time == process.start_time && stat->state != 'Z' && stat->state != 'X';
}

}  // namespace zinf::cli
