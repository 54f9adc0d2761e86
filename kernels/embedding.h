// Token + position embedding of GPT-2's input, forward and backward, on raw fp32 tables. CPU
// variants only.
//
// Dimension legend: B batch, T sequence length (positions 0..T-1), C channels, V vocabulary size,
// maxT the position table's length (T <= maxT).
//
// Forward:  out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]
// Backward: dwte[tokens[b, t], :] += dout[b, t, :] and dwpe[t, :] += dout[b, t, :] for every (b, t)
// Both gradients are accumulated (+=). Several positions can hold the same token, so the backward
// pass splits the CHANNELS over threads, never the positions: each thread owns a range of columns
// of dwte and dwpe and adds every (b, t) into them in order b-major, t-minor. No two threads write
// the same element and the sums are the same for any thread count and any variant.
//
// Threads: `num_threads` OpenMP threads (0 means omp_get_max_threads()); small problems run on
// the calling thread. The forward pass splits the B*T positions.
//
// Row-range variants (memory-centric tiling of the token table over the vocabulary): `wte`/`dwte`
// hold only rows [row_begin, row_begin + rows) of the table. The forward pass writes out[b, t, :]
// for exactly the positions whose token lies in that range (the others are left as they are), so
// calls over tiles that cover [0, V) write every position once, with the same single addition as
// the whole-table call. The backward pass adds those positions' rows into dwte in the same order,
// and dwpe (every position) only when dwpe is not null — the same bits as the whole-table call.
//
// Preconditions (not checked): 0 <= tokens[i] < V; T <= maxT; outputs overlap no input.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cuda_launch.h"

namespace zinf::kernels::cpu {

void embedding_forward(float* out /*[B,T,C]*/, const std::int32_t* tokens /*[B,T]*/, const float* wte /*[V,C]*/,
                       const float* wpe /*[maxT,C]*/, std::size_t batch, std::size_t seq_len, std::size_t channels,
                       int num_threads = 0);

void embedding_backward(float* dwte /*[V,C]*/, float* dwpe /*[maxT,C]*/, const float* dout /*[B,T,C]*/,
                        const std::int32_t* tokens /*[B,T]*/, std::size_t batch, std::size_t seq_len,
                        std::size_t channels, int num_threads = 0);

void embedding_forward_rows(float* out /*[B,T,C]*/, const std::int32_t* tokens /*[B,T]*/,
                            const float* wte_rows /*[rows,C]*/, std::size_t row_begin, std::size_t rows,
                            const float* wpe /*[maxT,C]*/, std::size_t batch, std::size_t seq_len, std::size_t channels,
                            int num_threads = 0);
void embedding_backward_rows(float* dwte_rows /*[rows,C]*/, std::size_t row_begin, std::size_t rows,
                             float* dwpe /*[maxT,C] or null*/, const float* dout /*[B,T,C]*/,
                             const std::int32_t* tokens /*[B,T]*/, std::size_t batch, std::size_t seq_len,
                             std::size_t channels, int num_threads = 0);

// One instruction-set variant on purpose, for tests and benchmarks. Precondition: isa_supported(isa).
void embedding_forward(Isa isa, float* out /*[B,T,C]*/, const std::int32_t* tokens /*[B,T]*/,
                       const float* wte /*[V,C]*/, const float* wpe /*[maxT,C]*/, std::size_t batch,
                       std::size_t seq_len, std::size_t channels, int num_threads);
void embedding_backward(Isa isa, float* dwte /*[V,C]*/, float* dwpe /*[maxT,C]*/, const float* dout /*[B,T,C]*/,
                        const std::int32_t* tokens /*[B,T]*/, std::size_t batch, std::size_t seq_len,
                        std::size_t channels, int num_threads);

}  // namespace zinf::kernels::cpu

namespace zinf::kernels::cuda {
// Same formulas; out, dout, wte, wpe in `elem`; the gradients dwte, dwpe fp32 (+=). The backward is
// deterministic, without floating-point atomics: positions are grouped by token id (a stable sort
// in `scratch`) and each token's rows are added in position order; dwpe sums over the batch in order.
std::size_t embedding_backward_scratch_bytes(std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                                             std::int64_t vocab);
LaunchStatus embedding_forward(Elem elem, void* out /*[B,T,C]*/, const std::int32_t* tokens /*[B,T]*/,
                               const void* wte /*[V,C]*/, const void* wpe /*[maxT,C]*/, std::int64_t batch,
                               std::int64_t seq_len, std::int64_t channels, Stream stream);
LaunchStatus embedding_backward(Elem elem, float* dwte /*[V,C]*/, float* dwpe /*[maxT,C]*/,
                                const void* dout /*[B,T,C]*/, const std::int32_t* tokens /*[B,T]*/, std::int64_t batch,
                                std::int64_t seq_len, std::int64_t channels, std::int64_t vocab, void* scratch,
                                std::size_t scratch_bytes, Stream stream);
// Row-range variants (see above); `vocab` is the whole table's V (the sort's key range).
LaunchStatus embedding_forward_rows(Elem elem, void* out /*[B,T,C]*/, const std::int32_t* tokens /*[B,T]*/,
                                    const void* wte_rows /*[rows,C]*/, std::int64_t row_begin, std::int64_t rows,
                                    const void* wpe /*[maxT,C]*/, std::int64_t batch, std::int64_t seq_len,
                                    std::int64_t channels, Stream stream);
LaunchStatus embedding_backward_rows(Elem elem, float* dwte_rows /*[rows,C]*/, std::int64_t row_begin,
                                     std::int64_t rows, float* dwpe /*[maxT,C] or null*/, const void* dout /*[B,T,C]*/,
                                     const std::int32_t* tokens /*[B,T]*/, std::int64_t batch, std::int64_t seq_len,
                                     std::int64_t channels, std::int64_t vocab, void* scratch,
                                     std::size_t scratch_bytes, Stream stream);
}  // namespace zinf::kernels::cuda
