// Per-thread CPU accounting (probes/thread_cpu.h): parsing, roles by name and the per-role sums
// between two snapshots against hand-computed figures; the process's own snapshot holds this thread.
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "probes/thread_cpu.h"
#include "tests/catch.h"

namespace zinf::probes {
namespace {

ThreadSample thread(std::uint64_t tid, const char* name, std::uint64_t run_ns, std::uint64_t wait_ns) {
  ThreadSample s;
  s.tid = tid;
  s.name = name;
  s.run_ns = run_ns;
  s.wait_ns = wait_ns;
  return s;
}

TEST_CASE("thread cpu: a schedstat line is run ns, wait ns and timeslices") {
  const std::optional<ThreadSample> s = parse_schedstat("123456789 2000 17\n");
  REQUIRE(s.has_value());
  CHECK(s->run_ns == 123456789);
  CHECK(s->wait_ns == 2000);
  CHECK_FALSE(parse_schedstat("12 34").has_value());
  CHECK_FALSE(parse_schedstat("").has_value());
  CHECK_FALSE(parse_schedstat("a b c").has_value());
}

TEST_CASE("thread cpu: roles by thread name") {
  CHECK(thread_role("zinf") == ThreadRole::kCompute);  // the training thread and its OpenMP team
  CHECK(thread_role("probes_test") == ThreadRole::kCompute);
  CHECK(thread_role("zinf-swap-io") == ThreadRole::kIo);
  CHECK(thread_role("zinf-posix-io") == ThreadRole::kIo);
  CHECK(thread_role("zinf-optimizer") == ThreadRole::kOtherEngine);
  CHECK(thread_role("zinf-h2d") == ThreadRole::kOtherEngine);
}

TEST_CASE("thread cpu: sums by role over the threads present in both snapshots") {
  const std::vector<ThreadSample> before = {
      thread(1, "zinf", 1'000'000'000, 10'000'000), thread(2, "zinf", 900'000'000, 5'000'000),
      thread(3, "zinf-swap-io", 100'000'000, 1'000'000), thread(4, "zinf-h2d", 0, 0),
      thread(5, "zinf", 7, 7)};  // ends before `after`
  const std::vector<ThreadSample> after = {
      thread(1, "zinf", 3'000'000'000, 30'000'000), thread(2, "zinf", 2'400'000'000, 45'000'000),
      thread(3, "zinf-swap-io", 250'000'000, 21'000'000), thread(4, "zinf-h2d", 5'000'000, 0),
      thread(6, "zinf", 9'000'000'000, 0)};  // new: no start
  const CpuByRole cpu = cpu_between(before, after);
  CHECK(cpu.compute_run == Approx(2.0 + 1.5));
  CHECK(cpu.compute_wait == Approx(0.020 + 0.040));
  CHECK(cpu.io_run == Approx(0.150));
  CHECK(cpu.io_wait == Approx(0.020));
  CHECK(cpu.other_run == Approx(0.005));
  CHECK(cpu.other_wait == 0.0);
}

TEST_CASE("thread cpu: this process's snapshot lists this thread, and its CPU time only grows") {
  const std::vector<ThreadSample> first = sample_threads();
  if (first.empty()) {
    WARN("skipped: no /proc/self/task/*/schedstat on this kernel");
    return;
  }
  volatile double x = 0;
  for (int i = 0; i < 20'000'000; ++i) x = x + 1.0;  // tens of ms: several scheduler ticks
  const std::vector<ThreadSample> second = sample_threads();
  const auto self = static_cast<std::uint64_t>(::gettid());
  const auto find_self = [self](const std::vector<ThreadSample>& samples) -> const ThreadSample* {
    for (const ThreadSample& s : samples) {
      if (s.tid == self) return &s;
    }
    return nullptr;
  };
  const ThreadSample* a = find_self(first);
  const ThreadSample* b = find_self(second);
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(thread_role(a->name) == ThreadRole::kCompute);
  CHECK(b->run_ns > a->run_ns);  // the loop ran on a CPU in between
  CHECK(cpu_between(first, second).compute_run >= static_cast<double>(b->run_ns - a->run_ns) * 1e-9);
}

}  // namespace
}  // namespace zinf::probes
