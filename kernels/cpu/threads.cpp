#include "kernels/threads.h"

#include <cblas.h>
#include <omp.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <thread>

namespace zinf::kernels::cpu {

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

void set_compute_threads(int n) {
  const int threads = n > 0 ? n : available_cores();
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

int compute_threads() { return omp_get_max_threads(); }

bool address_space_for_threads(int threads) {
  if (threads <= 0) threads = available_cores();
  const std::uint64_t bytes = static_cast<std::uint64_t>(threads) * kAddressSpacePerThreadBytes;
  void* trial = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (trial == MAP_FAILED) return false;
  ::munmap(trial, bytes);
  return true;
}

}  // namespace zinf::kernels::cpu
