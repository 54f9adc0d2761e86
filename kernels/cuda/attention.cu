// CUDA causal multi-head self-attention, forward and backward (kernels/attention.h has the formulas
// and the contract), flash-attention style: per (batch, head) the sequence is cut into query blocks
// and key tiles staged in shared memory; the forward keeps an fp32 online softmax per query row
// (running maximum and sum, the partial output rescaled whenever the maximum grows) and saves only
// lse; the backward recomputes P = exp(scale * q.k - lse) per tile. No [T, T] matrix ever reaches
// global memory, and tiles wholly above the diagonal are skipped.
//
// qkv is the packed [B, T, (NH + 2 NKV) hs] row of the fused projection (kernels/attention.h):
// grouped K/V heads are read in place, query head h taking K/V head h / (NH / NKV); NKV = NH is
// plain multi-head attention. The forward and dQ passes run one block per (batch, query head,
// block) and simply point at the shared K/V head. The dK/dV pass runs one block per (batch, K/V
// head, key block), which loops over the query heads of its group (in increasing order) and adds
// their contributions in the same fp32 accumulators: K and V are loaded once per group, dK and dV
// rounded to the element type once, and no block shares an output element with another.
//
// Two paths, chosen per call:
// - Tensor cores: bf16/fp16 with hs 32, 64 or 128 and 16-byte aligned arrays. mma.sync m16n8k16
//   (16-bit inputs, fp32 accumulation) fed by ldmatrix from shared tiles whose rows are padded by 8
//   elements (16 bytes), so the 8 row addresses of one ldmatrix phase fall in distinct bank groups.
//   Tiles arrive by cp.async, double-buffered: the next tile loads while the current one computes.
//   Each warp owns 16 rows of the block (queries, or keys in the dK/dV pass); scores stay in
//   registers, and the m16n8 accumulator layout is reused as the A operand of the next product (P
//   or dS rounded to the element type), as in FlashAttention-2.
//     forward   grid (B*NH, ceil(T/128)), 256 threads, two blocks per SM: 128 queries (8 warps) x
//               key tiles of 64 (hs 32) or 32 (hs 64, 128); Q, two K and two V tiles in shared
//               memory (30, 36, 68 KiB at hs 32, 64, 128).
//     dK, dV    grid (B*NKV, ceil(T/64)), 128 threads: 64 keys (4 warps) kept in shared memory, a
//               loop over the group's query heads and, per head, the query tiles at or after the
//               keys (64 queries, 16 at hs 128), Q, dO, lse and D double-buffered across both loops
//               (31, 55, 51 KiB). S^T = K Q^T and dP^T = V dO^T are computed
//               transposed so that P^T and dS^T come out in the A layout of dV += P^T dO and
//               dK += dS^T Q.
//     dQ        grid (B*NH, ceil(T/64)), 128 threads: 64 queries (4 warps), a loop over 64-key tiles
//               at or before them (30, 54, 102 KiB); dQ += dS K.
//   Tile sizes are set so that no kernel spills registers (ptxas -v).
// - General: fp32 (any hs), and bf16/fp16 with other head sizes or unaligned arrays. fp32 FMA in
//   shared memory, 128 threads on 32 x 32 tiles (each thread 2 rows x 4 columns of scores), the
//   head dimension reduced in 32-column chunks and the output produced in 64-column chunks, one
//   chunk per block (grid z = ceil(hs/64); wider heads recompute the scores per chunk, which keeps
//   any hs within a fixed 20-41 KiB of shared memory). Correctly rounded division and the accurate
//   expf/logf, so fp32 results differ from the CPU's only by summation order (~1e-6 relative).
// The backward first computes D[t] = dot(dout[t], out[t]) (fp32, [B, NH, T], in the caller's
// scratch), then dK/dV by key block and dQ by query block: every dqkv element is read, added to
// and written by exactly one thread, no atomics, every sum in a fixed order, so the results are
// the same bits from run to run. Grids list the heaviest causal blocks first (late query blocks in
// the forward and dQ pass, early key blocks in the dK/dV pass). Not here: dropout, masks other
// than causal, attention bias.
//
// Files: attention_shared.cuh (shape, constants, launchers), attention_mma.cuh (PTX wrappers),
// attention_tensor_core.cu and attention_general.cu (the kernels); this file holds the entry points.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/attention.h"
#include "kernels/cuda/attention_shared.cuh"
#include "kernels/cuda/elem.cuh"

namespace zinf::kernels::cuda {

using attention_impl::delta_bytes;
using attention_impl::make_problem;
using attention_impl::Problem;
using attention_impl::tensor_core_head_size;
using detail::aligned16;

std::size_t attention_backward_scratch_bytes(std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                                             std::int64_t heads) {
  Problem p;
  if (!make_problem(batch, seq_len, channels, heads, heads, &p)) return 0;
  return delta_bytes(p);
}

LaunchStatus attention_forward(Elem elem, void* out, float* lse, const void* qkv, std::int64_t batch,
                               std::int64_t seq_len, std::int64_t channels, std::int64_t heads, std::int64_t kv_heads,
                               Stream stream) {
  Problem p;
  if (!make_problem(batch, seq_len, channels, heads, kv_heads, &p) || out == nullptr || qkv == nullptr) {
    return detail::invalid_argument();
  }
  const cudaStream_t s = detail::native(stream);
  return detail::dispatch_elem(elem, [&](auto zero) -> LaunchStatus {
    using T = decltype(zero);
    T* const o = static_cast<T*>(out);
    const T* const x = static_cast<const T*>(qkv);
    if constexpr (!std::is_same_v<T, float>) {
      if (tensor_core_head_size(p.head_size) && aligned16(o) && aligned16(x)) {
        return attention_impl::launch_tc_forward<T>(o, lse, x, p, s);
      }
    }
    return attention_impl::launch_general_forward<T>(o, lse, x, p, s);
  });
}

LaunchStatus attention_backward(Elem elem, void* dqkv, const void* dout, const void* qkv, const void* out,
                                const float* lse, std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                                std::int64_t heads, std::int64_t kv_heads, void* scratch, std::size_t scratch_bytes,
                                Stream stream) {
  Problem p;
  if (!make_problem(batch, seq_len, channels, heads, kv_heads, &p) || dqkv == nullptr || dout == nullptr ||
      qkv == nullptr || out == nullptr || lse == nullptr || scratch == nullptr || scratch_bytes < delta_bytes(p) ||
      reinterpret_cast<std::uintptr_t>(scratch) % alignof(float) != 0) {
    return detail::invalid_argument();
  }
  const cudaStream_t s = detail::native(stream);
  float* const delta = static_cast<float*>(scratch);
  return detail::dispatch_elem(elem, [&](auto zero) -> LaunchStatus {
    using T = decltype(zero);
    T* const dx = static_cast<T*>(dqkv);
    const T* const dy = static_cast<const T*>(dout);
    const T* const x = static_cast<const T*>(qkv);
    const T* const y = static_cast<const T*>(out);
    if (const LaunchStatus status = attention_impl::launch_delta<T>(delta, dy, y, p, s); status != 0) return status;
    if constexpr (!std::is_same_v<T, float>) {
      if (tensor_core_head_size(p.head_size) && aligned16(dx) && aligned16(dy) && aligned16(x)) {
        return attention_impl::launch_tc_backward<T>(dx, dy, x, lse, delta, p, s);
      }
    }
    return attention_impl::launch_general_backward<T>(dx, dy, x, lse, delta, p, s);
  });
}

}  // namespace zinf::kernels::cuda
