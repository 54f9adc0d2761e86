// thread_cpu: where this process's CPU time goes, per thread, from the kernel's scheduler
// statistics (/proc/self/task/<tid>/schedstat: nanoseconds on a CPU, nanoseconds runnable but
// waiting for one) and each thread's name (/proc/self/task/<tid>/comm). `zinf bench train --zero0`
// takes a snapshot after every step and records, per step, the compute threads' CPU time and their
// run-queue wait (time they were ready to run while every core was busy with something else: the
// I/O thread, the kernel's work for it, other processes), and the same for the swap store's I/O
// thread — so the record can say whether an offloaded step loses its time waiting for parameters
// or to cores shared with the I/O.
//
// Roles by thread name: "zinf-swap-io" and "zinf-posix-io*" are the swap store's I/O; any other
// "zinf-*" name is another engine thread (copy streams, collectives, the optimizer worker, watch
// dogs); every other thread — the training thread and the OpenMP team it leads, which keep the
// process's name — computes. Plain functions; reading /proc is the only side effect.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zinf::probes {

enum class ThreadRole { kCompute, kIo, kOtherEngine };
ThreadRole thread_role(std::string_view name);

struct ThreadSample {
  std::uint64_t tid = 0;
  std::string name;
  std::uint64_t run_ns = 0;   // on a CPU, cumulative
  std::uint64_t wait_ns = 0;  // runnable, waiting for a CPU, cumulative
};

// One schedstat line "<run ns> <wait ns> <timeslices>"; nullopt when malformed.
std::optional<ThreadSample> parse_schedstat(std::string_view line);

// Every thread of this process now; empty where /proc has no schedstat (a kernel without
// CONFIG_SCHED_INFO). A thread that ends while it is read is left out.
std::vector<ThreadSample> sample_threads();

// Seconds by role between two snapshots, over the threads present in both (a thread that started
// or ended in between is not counted: its partial time has no start or end).
struct CpuByRole {
  double compute_run = 0;
  double compute_wait = 0;
  double io_run = 0;
  double io_wait = 0;
  double other_run = 0;
  double other_wait = 0;
};
CpuByRole cpu_between(const std::vector<ThreadSample>& before, const std::vector<ThreadSample>& after);

}  // namespace zinf::probes
