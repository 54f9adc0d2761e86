// Names the calling thread as tools show it (top -H, perf, gdb, /proc/<pid>/task/<tid>/comm), so a
// profile of a training step says which of zinf's threads — a stream's worker, the optimizer thread,
// the swap store's I/O thread, a watchdog — did the work or took the context switch.
#pragma once

#include <string_view>

namespace zinf {

// Sets the calling thread's name to `name`, cut to the 15 bytes Linux keeps. Best effort: a name the
// system refuses leaves the old one (names are for people, nothing depends on them). Thread-safe.
void name_this_thread(std::string_view name);

}  // namespace zinf
