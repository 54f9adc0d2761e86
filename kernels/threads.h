// Compute threads: how many threads the CPU kernels (OpenMP teams) and OpenBLAS's GEMMs use.
// One knob for both, because a training step alternates between them and two pools sized
// differently leave cores idle or oversubscribed. Process-wide (OpenMP and OpenBLAS keep it
// globally); the CLI sets it once from the scenario's "threads" before any compute runs.
#pragma once

#include <cstdint>

namespace zinf::kernels::cpu {

// n >= 1 threads for both; n <= 0 means one per available core (available_cores()), never more.
void set_compute_threads(int n);
// The count the kernels use now.
int compute_threads();
// Logical CPUs this process may run on (its affinity mask, which taskset, cgroup cpusets and
// container runtimes narrow), at least 1.
int available_cores();

// Address space one compute thread costs before any work: OpenBLAS maps a GEMM buffer per thread
// when the thread count is set (BUFFER_SIZE, 128 MiB on x86-64 in Debian's 0.3.21; seen as the
// 134217728-byte mmap in blas_memory_alloc) and the thread gets a stack (8 MiB by default).
inline constexpr std::uint64_t kAddressSpacePerThreadBytes = (std::uint64_t{128} + 8) << 20;

// Whether the address space that `threads` compute threads need (kAddressSpacePerThreadBytes each)
// can be mapped now: a trial PROT_NONE mapping that commits no memory and is released at once.
// Checked before set_compute_threads because OpenBLAS, when its buffer mmap fails (ulimit -v),
// retries forever at 100% CPU instead of failing. Thread-safe.
bool address_space_for_threads(int threads);

}  // namespace zinf::kernels::cpu
