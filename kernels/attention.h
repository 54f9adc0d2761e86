// Causal multi-head self-attention (GPT-2's attention core, after the fused QKV projection and
// before the output projection), forward and backward, on raw fp32 arrays. CPU variants only.
// Memory-efficient: no [T,T] score or probability matrix is ever stored; the forward pass keeps an
// online softmax per query row (flash-attention style) and saves only its log-sum-exp, and the
// backward pass recomputes the probabilities from q, k and that statistic.
//
// Dimension legend: B batch, T sequence, C channels, NH heads, hs = C / NH head size.
//
// Layout (llm.c's): qkv[b, t, 0:C] is q, qkv[b, t, C:2C] is k, qkv[b, t, 2C:3C] is v; head h owns
// columns h*hs .. h*hs + hs - 1 of each of the three, and of out.
// Forward, per (b, h) and query position t, with scale = 1/sqrt(hs):
//   s[t, t'] = scale * dot(q[t], k[t'])            for t' <= t (causal: later keys are masked out)
//   lse[t]   = log(sum_{t' <= t} exp(s[t, t']))
//   out[t]   = sum_{t' <= t} exp(s[t, t'] - lse[t]) * v[t']
// computed in one sweep over t' with a running maximum and sum (the sum rescaled whenever the
// maximum grows), so every exp() stays in [0, 1].
// Backward, with P[t, t'] = exp(s[t, t'] - lse[t]) recomputed and D[t] = dot(dout[t], out[t]):
//   dS[t, t'] = P[t, t'] * (dot(dout[t], v[t']) - D[t])
//   dq[t]  += scale * sum_{t'} dS[t, t'] * k[t']
//   dk[t'] += scale * sum_{t} dS[t, t'] * q[t]
//   dv[t'] += sum_{t} P[t, t'] * dout[t]
// dqkv is accumulated (+=): callers zero it first when they want plain values.
//
// Threads: the B*NH (batch, head) pairs are split into one contiguous range per OpenMP thread
// (`num_threads`; 0 means omp_get_max_threads()). Each pair writes only its own head's columns of
// out/dqkv and its own lse row, and sums in a fixed order, so every result is the same for any
// thread count and any variant. Small problems run on the calling thread.
//
// Preconditions (not checked): B*T*3C elements behind qkv/dqkv, B*T*C behind out/dout, B*NH*T
// behind lse; outputs overlap no input; T >= 1, NH >= 1, C a positive multiple of NH.
#pragma once

#include <cstddef>

#include "kernels/cpu/cpu_features.h"

namespace zinf::kernels::cpu {

// lse may be nullptr (inference: nothing saved).
void attention_forward(float* out /*[B,T,C]*/, float* lse /*[B,NH,T]*/, const float* qkv /*[B,T,3C]*/,
                       std::size_t batch, std::size_t seq_len, std::size_t channels, std::size_t heads,
                       int num_threads = 0);

// out and lse are the ones the forward pass produced for this `qkv`.
void attention_backward(float* dqkv /*[B,T,3C]*/, const float* dout /*[B,T,C]*/, const float* qkv /*[B,T,3C]*/,
                        const float* out /*[B,T,C]*/, const float* lse /*[B,NH,T]*/, std::size_t batch,
                        std::size_t seq_len, std::size_t channels, std::size_t heads, int num_threads = 0);

// One instruction-set variant on purpose, for tests and benchmarks; the functions above call these
// with best_isa(). Precondition: isa_supported(isa). Every variant gives the same bits.
void attention_forward(Isa isa, float* out /*[B,T,C]*/, float* lse /*[B,NH,T]*/, const float* qkv /*[B,T,3C]*/,
                       std::size_t batch, std::size_t seq_len, std::size_t channels, std::size_t heads,
                       int num_threads);
void attention_backward(Isa isa, float* dqkv /*[B,T,3C]*/, const float* dout /*[B,T,C]*/, const float* qkv /*[B,T,3C]*/,
                        const float* out /*[B,T,C]*/, const float* lse /*[B,NH,T]*/, std::size_t batch,
                        std::size_t seq_len, std::size_t channels, std::size_t heads, int num_threads);

}  // namespace zinf::kernels::cpu
