// The processes a process started, as /proc shows them: what the rank spawner (rank_spawner.h)
// uses to make sure nothing of a stopped job keeps running. Linux only (reads /proc).
#pragma once

#include <vector>

namespace zinf::cli {

// A running process: its pid and its start time (clock ticks after boot), which tells it from a
// later process that reuses the pid.
struct ProcessId {
  int pid = 0;
  unsigned long long start_time = 0;
};

// Every process whose parent chain leads to `pid` (children, their children, ...), read from /proc;
// empty where /proc cannot be read. A snapshot: processes may end or start right after.
std::vector<ProcessId> descendants_of(int pid);

// Whether `process` still runs (exists, is not a zombie, and is the same process, not a reuse of
// its pid).
bool still_running(const ProcessId& process);

}  // namespace zinf::cli
