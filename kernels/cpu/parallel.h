// How the CPU kernels spread work over threads: OpenMP teams with a static split, so a given thread
// count always cuts an array at the same places. Internal to kernels/cpu (and the kernel benchmarks).
//
// Under ThreadSanitizer the fork and the join of every team are announced to TSan: Debian's libgomp
// is not built with TSan, so without this it cannot see that a region's threads start after the
// caller's writes and finish before the caller reads, and reports every array as a race. Fork and
// join use separate sync addresses, so no order between two workers is implied and a real race
// between them is still reported.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstddef>

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace zinf::kernels::cpu::parallel {

// `requested` threads, or omp_get_max_threads() when it is 0 or negative.
inline int resolve_threads(int requested) { return requested > 0 ? requested : omp_get_max_threads(); }

#if defined(__SANITIZE_THREAD__)
// The team's bookkeeping itself (the block of shared variables the compiler passes to the threads,
// written by the caller as libgomp starts them) is left uninstrumented: its order is libgomp's,
// which TSan cannot see. `body` is a separate, instrumented function.
#define ZINF_KERNELS_NO_TSAN __attribute__((no_sanitize("thread"), noinline))
#else
#define ZINF_KERNELS_NO_TSAN
#endif

// Runs body(team_size, index) on every thread of one OpenMP team of up to `threads` threads and
// returns when all are done.
template <typename Body>
ZINF_KERNELS_NO_TSAN void run_team(int threads, const Body& body) {
#if defined(__SANITIZE_THREAD__)
  char fork_sync = 0;
  char join_sync = 0;
  __tsan_release(&fork_sync);
#endif
#pragma omp parallel num_threads(threads)
  {
#if defined(__SANITIZE_THREAD__)
    __tsan_acquire(&fork_sync);
#endif
    body(static_cast<std::size_t>(omp_get_num_threads()), static_cast<std::size_t>(omp_get_thread_num()));
#if defined(__SANITIZE_THREAD__)
    __tsan_release(&join_sync);
#endif
  }
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(&join_sync);
#endif
}

// Calls body(begin, end) on contiguous ranges that cover [0, n) exactly once: one range per thread
// of a team of `threads`, each range starting at a multiple of `align` (so vector tails occur only
// at the end of the array). Runs on the calling thread alone when n < min_parallel or threads <= 1.
// Returns when every range is done.
template <typename Body>
void for_each_range(std::size_t n, std::size_t min_parallel, std::size_t align, int threads, const Body& body) {
  if (n == 0) return;
  if (threads <= 1 || n < min_parallel) {
    body(std::size_t{0}, n);
    return;
  }
  run_team(threads, [&](std::size_t team, std::size_t index) {
    std::size_t per_thread = (n + team - 1) / team;
    per_thread = (per_thread + align - 1) / align * align;
    const std::size_t begin = std::min(n, index * per_thread);
    const std::size_t end = std::min(n, begin + per_thread);
    if (begin < end) body(begin, end);
  });
}

// Calls body(i) for every i in [0, count), block-distributed over a team of `threads` (thread k
// takes one contiguous block of indices, as OpenMP's static schedule does).
template <typename Body>
void for_each_index(std::size_t count, int threads, const Body& body) {
  for_each_range(count, 2, 1, threads, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) body(i);
  });
}

}  // namespace zinf::kernels::cpu::parallel
