// Counter-based normal random numbers: the model's weight initialisation. Element i of a stream is
// a function of (stream, i) alone, so a ZeRO rank initialising its slice, any tile of a parameter,
// and any thread count get the same bits as one thread filling the whole tensor.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zinf::kernels::cpu {

// splitmix64's finaliser: a bijection of 64-bit words with full avalanche. Pure; thread-safe.
std::uint64_t counter_mix(std::uint64_t x);

// out[i] = scale * N(0, 1) for i in [0, n), where the normal is Box-Muller (in double: sqrt(-2 log u1)
// * cos(2 pi u2)) on two uniforms in (0, 1] taken from counter_mix(stream ^ 2k) and
// counter_mix(stream ^ (2k + 1)) with k = first_index + i, rounded to float once at the end.
// Threads: `num_threads` (0: the compute threads, kernels/threads.h) split [0, n) statically; the
// result does not depend on the split. `out` is written only; no other state. The caller owns `out`
// and must not touch it until the call returns.
void counter_normal_fill(float* out, std::size_t n, std::uint64_t stream, std::uint64_t first_index, double scale,
                         int num_threads = 0);

}  // namespace zinf::kernels::cpu
