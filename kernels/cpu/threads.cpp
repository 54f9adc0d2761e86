#include "kernels/threads.h"

#include <cblas.h>
#include <omp.h>

#include <thread>

namespace zinf::kernels::cpu {

void set_compute_threads(int n) {
  const int threads = n > 0 ? n : static_cast<int>(std::thread::hardware_concurrency());
  omp_set_num_threads(threads > 0 ? threads : 1);
  openblas_set_num_threads(threads > 0 ? threads : 1);
}

int compute_threads() { return omp_get_max_threads(); }

}  // namespace zinf::kernels::cpu
