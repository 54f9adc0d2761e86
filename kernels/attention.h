// Causal multi-head self-attention (GPT-2's attention core, after the fused QKV projection and
// before the output projection), with grouped K/V heads (GQA/MQA), forward and
// backward, on raw fp32 arrays. CPU variants, and the CUDA ones at the end.
// Memory-efficient and blocked like flash attention: per (batch, head) the sequence is cut into
// blocks of 64 query rows and 64 keys; the forward pass keeps an online softmax per query row over
// the key blocks and saves only its log-sum-exp, and the backward pass recomputes the probabilities
// of each (query block, key block) tile from q, k and that statistic. No [T,T] matrix is ever
// stored: scratch is O(T * hs) per thread. Blocks wholly above the diagonal are skipped.
//
// Dimension legend: B batch, T sequence, C channels, NH heads, hs = C / NH head size, NKV key/value
// heads (NH a multiple of NKV, G = NH / NKV query heads per K/V head), W = (NH + 2 NKV) hs.
//
// Layout: qkv[b, t, :] is the fused projection's packed row of W floats: q heads (NH hs),
// then k heads (NKV hs), then v heads (NKV hs). Query head h owns columns h*hs .. h*hs + hs - 1 of
// q and of out, and reads K/V head g = h / G (HF transformers' repeat_kv). NKV = NH is llm.c's
// [q | k | v] layout with W = 3C. The CUDA functions take the same layout.
// Forward, per (b, h) and query position t, with scale = 1/sqrt(hs):
//   s[t, t'] = scale * dot(q[t], k[t'])            for t' <= t (causal: later keys are masked out)
//   lse[t]   = log(sum_{t' <= t} exp(s[t, t']))
//   out[t]   = sum_{t' <= t} exp(s[t, t'] - lse[t]) * v[t']
// computed in one sweep over the key blocks with a running maximum and sum per row (the sum and the
// partial output rescaled whenever the maximum grows), so no exp() overflows.
// Backward, with P[t, t'] = exp(s[t, t'] - lse[t]) recomputed and D[t] = dot(dout[t], out[t]):
//   dS[t, t'] = P[t, t'] * (dot(dout[t], v[t']) - D[t])
//   dq[t]  += scale * sum_{t'} dS[t, t'] * k[t']
//   dk[t'] += scale * sum_{t} dS[t, t'] * q[t]
//   dv[t'] += sum_{t} P[t, t'] * dout[t]
// With groups, K/V head g's dk and dv are first computed per query head of its group and then
// summed in fp32 head by head in increasing order (the order of gqa_reduce in kernels/gqa.h, so the
// bits equal those of expanding K/V, attending and reducing). dqkv is accumulated (+=): callers
// zero it first when they want plain values.
//
// Threads (`num_threads`; 0 means omp_get_max_threads()): the forward pass splits (pair, query
// block) items into contiguous runs of equal estimated cost, one per OpenMP thread; the backward
// pass gives each thread whole (batch, K/V head) pairs with their group, or, when there are too few
// to keep the threads busy, (K/V pair, key block) items for dk/dv and (pair, query block) items for
// dq. A thread packs (transposes) a K/V head's keys and values once and reuses them for every query
// head of its group that it runs. Small
// problems run on the calling thread. No two threads write the same element.
// Determinism: every output element is computed by the same fp32 operations in the same order
// whatever the thread count and whichever variant (scalar, AVX2, AVX-512) runs: sums over keys or
// queries are chains of fused multiply-adds in increasing index order (the scalar variant uses
// std::fma), elementwise sums use 16 fixed lanes, and the block and micro-tile row sizes do not
// depend on the ISA. So results are bit-identical run to run, for any thread count and on every
// ISA (an input containing NaN or inf gives non-finite results whose bits are not pinned down).
//
// Preconditions (not checked): B*T*W elements behind qkv/dqkv, B*T*C behind out/dout, B*NH*T
// behind lse; outputs overlap no input; T >= 1, NH >= 1, C a positive multiple of NH, NKV >= 1 and
// NH a multiple of NKV.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cuda_launch.h"

namespace zinf::kernels::cpu {

// Rotary position embedding fused into the attention (CPU): the query and key heads of qkv are the
// projection's output, NOT rotated, and the kernel rotates each q row as it loads a query block and
// each k row as it packs a K/V head's keys, with kernels/rope.h's formulas and tables (cos, sin
// [P, rd/2]; head row t at position pos_offset + t; the first rd dimensions of each head turn, the
// rest pass through). The forward equals rope_forward over the q and k heads in place followed by
// the attention, bit for bit, and leaves qkv unrotated. The backward takes that unrotated qkv,
// rotates q and k again as it loads them, and turns the q and k heads' gradients back (rope_backward's
// rotation) on their way into dqkv: dqkv += R(-theta) g where the separate path computes
// dqkv += g then rotates dqkv in place, so from a zeroed dqkv both give the same bits.
// rotary_dim 0 (the default): no rotation. Preconditions (not checked): rd even, 2 <= rd <= hs when
// set; P >= pos_offset + T rows behind cos and sin.
struct AttentionRope {
  const float* cos = nullptr;  // [P, rd/2]
  const float* sin = nullptr;  // [P, rd/2]
  std::size_t rotary_dim = 0;  // rd; 0: no rotation
  std::size_t pos_offset = 0;
  bool active() const { return rotary_dim > 0; }
};

// lse may be nullptr (inference: nothing saved).
void attention_forward(float* out /*[B,T,C]*/, float* lse /*[B,NH,T]*/, const float* qkv /*[B,T,W]*/, std::size_t batch,
                       std::size_t seq_len, std::size_t channels, std::size_t heads, std::size_t kv_heads,
                       int num_threads = 0);

// out and lse are the ones the forward pass produced for this `qkv`.
void attention_backward(float* dqkv /*[B,T,W]*/, const float* dout /*[B,T,C]*/, const float* qkv /*[B,T,W]*/,
                        const float* out /*[B,T,C]*/, const float* lse /*[B,NH,T]*/, std::size_t batch,
                        std::size_t seq_len, std::size_t channels, std::size_t heads, std::size_t kv_heads,
                        int num_threads = 0);

// One instruction-set variant on purpose, for tests and benchmarks; the functions above call these
// with best_isa(). Precondition: isa_supported(isa). Every variant gives the same bits.
// Thread-safe: concurrent calls share nothing but read-only inputs (each thread's scratch is its own).
void attention_forward(Isa isa, float* out /*[B,T,C]*/, float* lse /*[B,NH,T]*/, const float* qkv /*[B,T,W]*/,
                       std::size_t batch, std::size_t seq_len, std::size_t channels, std::size_t heads,
                       std::size_t kv_heads, int num_threads);
void attention_backward(Isa isa, float* dqkv /*[B,T,W]*/, const float* dout /*[B,T,C]*/, const float* qkv /*[B,T,W]*/,
                        const float* out /*[B,T,C]*/, const float* lse /*[B,NH,T]*/, std::size_t batch,
                        std::size_t seq_len, std::size_t channels, std::size_t heads, std::size_t kv_heads,
                        int num_threads);

// The same with the rotary embedding fused in (AttentionRope above); the Isa-less ones use best_isa().
void attention_forward(float* out /*[B,T,C]*/, float* lse /*[B,NH,T]*/, const float* qkv /*[B,T,W]*/, std::size_t batch,
                       std::size_t seq_len, std::size_t channels, std::size_t heads, std::size_t kv_heads,
                       const AttentionRope& rope, int num_threads = 0);
void attention_backward(float* dqkv /*[B,T,W]*/, const float* dout /*[B,T,C]*/, const float* qkv /*[B,T,W]*/,
                        const float* out /*[B,T,C]*/, const float* lse /*[B,NH,T]*/, std::size_t batch,
                        std::size_t seq_len, std::size_t channels, std::size_t heads, std::size_t kv_heads,
                        const AttentionRope& rope, int num_threads = 0);
void attention_forward(Isa isa, float* out /*[B,T,C]*/, float* lse /*[B,NH,T]*/, const float* qkv /*[B,T,W]*/,
                       std::size_t batch, std::size_t seq_len, std::size_t channels, std::size_t heads,
                       std::size_t kv_heads, const AttentionRope& rope, int num_threads);
void attention_backward(Isa isa, float* dqkv /*[B,T,W]*/, const float* dout /*[B,T,C]*/, const float* qkv /*[B,T,W]*/,
                        const float* out /*[B,T,C]*/, const float* lse /*[B,NH,T]*/, std::size_t batch,
                        std::size_t seq_len, std::size_t channels, std::size_t heads, std::size_t kv_heads,
                        const AttentionRope& rope, int num_threads);

}  // namespace zinf::kernels::cpu

namespace zinf::kernels::cuda {
// Same formulas, flash-attention style: per (batch, head, query block) the forward keeps an online
// softmax in fp32 over key blocks staged in shared memory, with QKᵀ and PV on tensor cores for
// bf16/fp16 (fp32 accumulation) and fp32 FMA for fp32; only lse (fp32) is saved, no [T,T] matrix is
// stored in global memory. The backward recomputes P per tile; dk/dv and dq are produced by
// separate passes (no floating-point atomics), so results are deterministic. dqkv is accumulated
// (+=) in `elem`. Any head size works; head sizes 32, 64 and 128 take the tensor-core path for
// bf16/fp16, others a general one. Grouped K/V heads (kv_heads < heads) are read in place from the
// packed layout: query head h reads K/V head h / G. One thread block owns a K/V head's dK/dV tile
// and runs through every query head of its group, adding their contributions in fp32 registers
// (query heads in increasing order) before one rounding to `elem` — so the K/V gradients are the
// group sums of the CPU contract, in another fixed fp32 order (not the CPU's bits; deterministic).
// Invalid arguments (shapes outside the contract, kv_heads < 1 or not dividing heads, null
// pointers, too little scratch) return cudaErrorInvalidValue and launch nothing.
// scratch: attention_backward_scratch_bytes (D, fp32 [B,NH,T]; it does not depend on kv_heads).
std::size_t attention_backward_scratch_bytes(std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                                             std::int64_t heads);
LaunchStatus attention_forward(Elem elem, void* out /*[B,T,C]*/, float* lse /*[B,NH,T]*/, const void* qkv /*[B,T,W]*/,
                               std::int64_t batch, std::int64_t seq_len, std::int64_t channels, std::int64_t heads,
                               std::int64_t kv_heads, Stream stream);
LaunchStatus attention_backward(Elem elem, void* dqkv /*[B,T,W]*/, const void* dout /*[B,T,C]*/,
                                const void* qkv /*[B,T,W]*/, const void* out /*[B,T,C]*/, const float* lse /*[B,NH,T]*/,
                                std::int64_t batch, std::int64_t seq_len, std::int64_t channels, std::int64_t heads,
                                std::int64_t kv_heads, void* scratch, std::size_t scratch_bytes, Stream stream);
}  // namespace zinf::kernels::cuda
