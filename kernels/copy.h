// Bulk byte copies and zero fills on the CPU, split over the compute threads.
//
// Dimension legend: B bytes.
//
// On the 2-core VM these were written on, one thread's memcpy moves 6-7 GB/s however large the
// block (it is bound by one core's outstanding cache misses, not by the memory), two threads'
// 12-18 GB/s from 64 KiB up (tests/bench/kernels_bench.cpp, BM_CopyBytes against BM_Memcpy). The CPU
// backend's device copies run on the training thread while the rest of the compute team waits at
// its next parallel region, so an engine step's ~26 MiB of parameter, gradient and staging copies
// cost a core's worth of time unless they are split.
//
// Preconditions (not checked): the ranges hold `bytes` bytes and do not overlap. Any alignment.
// Call from the training thread (the one that runs the compute kernels): a parallel region begun on
// another thread starts a second OpenMP team, and with more OpenMP threads than cores libgomp cuts
// every team's spin-wait short (zero/optimizer_worker.h). Inside a parallel region they run on the
// calling thread alone. Same bytes as memcpy/memset, whatever the thread count.
#pragma once

#include <cstddef>

namespace zinf::kernels::cpu {

// Blocks shorter than this are copied by the calling thread alone: starting the team costs about a
// microsecond, a 128 KiB memcpy 20.
inline constexpr std::size_t kParallelCopyBytes = std::size_t{128} << 10;

void copy_bytes(void* dst /*[B]*/, const void* src /*[B]*/, std::size_t bytes);
void zero_bytes(void* dst /*[B]*/, std::size_t bytes);

}  // namespace zinf::kernels::cpu
