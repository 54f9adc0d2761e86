// The general path of the CUDA attention kernels: fp32 (any head size), and bf16/fp16 where the
// tensor cores do not apply; fp32 FMA on 32 x 32 shared tiles. Also D = rowwise dot(dout, out), the
// first pass of every backward (attention.cu has the design).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_shared.cuh"

namespace zinf::kernels::cuda::attention_impl {
namespace {

using detail::from_f32;
using detail::to_f32;

// ---- General path --------------------------------------------------------------------------------
//
// 128 threads: thread (ty, tx) = (tid / 8, tid % 8) owns tile rows 2 ty and 2 ty + 1, score columns
// tx + 8 j (j < 4) and output columns tx + 8 j (j < 8). A row's 8 threads are 8 consecutive lanes,
// so row reductions are three xor-shuffles. Shared tiles of the reduction have 33-float rows: the 8
// different rows one warp reads at a time then sit in 8 different banks.
//
// The backward kernels ask for 5 blocks per SM, as many as their 41 KiB of shared memory allow (96
// registers). Left free, ptxas took 128 registers once the packed layout's K/V pointers came in (4
// blocks per SM) and still spilled 4 bytes in the 16-bit dK/dV kernel; at 5 nothing spills (ptxas
// -v, sm_90). The forward takes 72 registers (7 blocks); capped at 64 (8 blocks) it spilled.
constexpr int kGenBackwardBlocks = 5;

// Rows [row0, row0 + kGenTile) x columns [col0, col0 + kCols) of one head (global rows `stride`
// apart) into tile[kGenTile][kLdS] as fp32; zero outside T x hs.
template <int kCols, int kLdS, typename T>
__device__ __forceinline__ void load_rows(float (*tile)[kLdS], const T* head, std::int64_t stride, int row0,
                                          int seq_len, int col0, int head_size) {
  for (int i = static_cast<int>(threadIdx.x); i < kGenTile * kCols; i += kGenThreads) {
    const int r = i / kCols;
    const int c = i % kCols;
    const int row = row0 + r;
    const int col = col0 + c;
    tile[r][c] = row < seq_len && col < head_size ? to_f32(head[row * stride + col]) : 0.0f;
  }
}

struct GeneralForwardSmem {
  float q[kGenTile][kGenChunk + 1];  // queries x a chunk of hs
  float k[kGenTile][kGenChunk + 1];  // keys x the same chunk
  float p[kGenTile][kGenTile + 1];   // probabilities, queries x keys
  float v[kGenTile][kGenOut];        // keys x the block's output columns
};

template <typename T>
__global__ void __launch_bounds__(kGenThreads)
    general_forward_kernel(T* __restrict__ out /*[B,T,C]*/, float* __restrict__ lse /*[B,NH,T] or null*/,
                           const T* __restrict__ qkv /*[B,T,W]*/, Packed layout, float scale) {
  __shared__ GeneralForwardSmem sm;
  const int seq_len = layout.seq_len;
  const int heads = layout.heads;
  const int head_size = layout.head_size;
  const int channels = heads * head_size;
  const int pair = static_cast<int>(blockIdx.x);
  const int b = pair / heads;
  const int h = pair % heads;
  const int g = h / layout.group();
  const int block = static_cast<int>(gridDim.y - 1 - blockIdx.y);
  const int q0 = block * kGenTile;
  const int col0 = static_cast<int>(blockIdx.z) * kGenOut;
  const int ty = static_cast<int>(threadIdx.x) / 8;
  const int tx = static_cast<int>(threadIdx.x) % 8;
  const std::int64_t stride = layout.stride();
  const T* const q_head = layout.q(qkv, b, h);
  const T* const k_head = layout.k(qkv, b, g);
  const T* const v_head = layout.v(qkv, b, g);

  float acc[2][8] = {};
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};  // this thread's part
  for (int tile = 0; tile <= block; ++tile) {
    const int key0 = tile * kGenTile;
    float s[2][4] = {};
    for (int d0 = 0; d0 < head_size; d0 += kGenChunk) {
      __syncthreads();  // the previous chunk (or tile) is consumed
      load_rows<kGenChunk>(sm.q, q_head, stride, q0, seq_len, d0, head_size);
      load_rows<kGenChunk>(sm.k, k_head, stride, key0, seq_len, d0, head_size);
      __syncthreads();
#pragma unroll
      for (int d = 0; d < kGenChunk; ++d) {
        const float qa = sm.q[2 * ty][d];
        const float qb = sm.q[2 * ty + 1][d];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float kv = sm.k[tx + 8 * j][d];
          s[0][j] = fmaf(qa, kv, s[0][j]);
          s[1][j] = fmaf(qb, kv, s[1][j]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int row = q0 + 2 * ty + i;
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s[i][j] = key0 + tx + 8 * j <= row ? scale * s[i][j] : -INFINITY;
        tile_max = fmaxf(tile_max, s[i][j]);
      }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 2));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 4));
      const float new_max = fmaxf(row_max[i], tile_max);
      const float base = new_max == -INFINITY ? 0.0f : new_max;
      const float alpha = expf(row_max[i] - base);
      row_max[i] = new_max;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float p = expf(s[i][j] - base);
        sm.p[2 * ty + i][tx + 8 * j] = p;
        sum += p;
      }
      row_sum[i] = row_sum[i] * alpha + sum;
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] *= alpha;
    }
    load_rows<kGenOut>(sm.v, v_head, stride, key0, seq_len, col0, head_size);
    __syncthreads();
#pragma unroll
    for (int key = 0; key < kGenTile; ++key) {
      const float pa = sm.p[2 * ty][key];
      const float pb = sm.p[2 * ty + 1][key];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float vv = sm.v[key][tx + 8 * j];
        acc[0][j] = fmaf(pa, vv, acc[0][j]);
        acc[1][j] = fmaf(pb, vv, acc[1][j]);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float total = row_sum[i];
    total += __shfl_xor_sync(kFullMask, total, 1);
    total += __shfl_xor_sync(kFullMask, total, 2);
    total += __shfl_xor_sync(kFullMask, total, 4);
    const int row = q0 + 2 * ty + i;
    if (row < seq_len) {
      T* const out_row =
          out + (static_cast<std::int64_t>(b) * seq_len + row) * channels + static_cast<std::int64_t>(h) * head_size;
      const float inv = 1.0f / total;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int col = col0 + tx + 8 * j;
        if (col < head_size) out_row[col] = from_f32<T>(acc[i][j] * inv);
      }
      if (lse != nullptr && blockIdx.z == 0 && tx == 0) {
        lse[static_cast<std::int64_t>(pair) * seq_len + row] = row_max[i] + logf(total);
      }
    }
  }
}

struct GeneralBackwardSmem {
  float q[kGenTile][kGenChunk + 1];  // Q rows x a chunk of hs
  float k[kGenTile][kGenChunk + 1];  // K rows x the chunk
  float v[kGenTile][kGenChunk + 1];  // V rows x the chunk
  float o[kGenTile][kGenChunk + 1];  // dO rows x the chunk
  float p[kGenTile][kGenTile + 1];   // P^T (dK/dV pass)
  float ds[kGenTile][kGenTile + 1];  // dS^T (dK/dV pass) or dS (dQ pass)
  float x[kGenTile][kGenOut];        // the block's output columns of dO (dK/dV) or K (dQ)
  float y[kGenTile][kGenOut];        // the block's output columns of Q (dK/dV)
};

// dK, dV of key/value head g for keys [32 y, 32 y + 32) and head columns [64 z, 64 z + 64): for
// each query head of g's group in increasing order, a loop over the query tiles from the diagonal
// to the end, every product added to the same fp32 accumulators (the group's sum, rounded once).
// Thread rows are keys, score columns queries. Grid x: (batch, K/V head) pairs.
template <typename T>
__global__ void __launch_bounds__(kGenThreads, kGenBackwardBlocks)
    general_dkdv_kernel(T* __restrict__ dqkv /*[B,T,W]*/, const T* __restrict__ dout /*[B,T,C]*/,
                        const T* __restrict__ qkv /*[B,T,W]*/, const float* __restrict__ lse /*[B,NH,T]*/,
                        const float* __restrict__ delta /*[B,NH,T]*/, Packed layout, float scale) {
  __shared__ GeneralBackwardSmem sm;
  const int seq_len = layout.seq_len;
  const int heads = layout.heads;
  const int head_size = layout.head_size;
  const int channels = heads * head_size;
  const int group = layout.group();
  const int kv_pair = static_cast<int>(blockIdx.x);
  const int b = kv_pair / layout.kv_heads;
  const int g = kv_pair % layout.kv_heads;
  const int block = static_cast<int>(blockIdx.y);
  const int key0 = block * kGenTile;
  const int col0 = static_cast<int>(blockIdx.z) * kGenOut;
  const int ty = static_cast<int>(threadIdx.x) / 8;
  const int tx = static_cast<int>(threadIdx.x) % 8;
  const std::int64_t stride = layout.stride();
  const T* const k_head = layout.k(qkv, b, g);
  const T* const v_head = layout.v(qkv, b, g);
  const int num_blocks = ceil_div(seq_len, kGenTile);

  float dk[2][8] = {};
  float dv[2][8] = {};
  for (int member = 0; member < group; ++member) {
    const int h = g * group + member;
    const int pair = b * heads + h;
    const T* const q_head = layout.q(qkv, b, h);
    const T* const do_head =
        dout + static_cast<std::int64_t>(b) * seq_len * channels + static_cast<std::int64_t>(h) * head_size;
    const float* const lse_pair = lse + static_cast<std::int64_t>(pair) * seq_len;
    const float* const delta_pair = delta + static_cast<std::int64_t>(pair) * seq_len;
    for (int tile = block; tile < num_blocks; ++tile) {
      const int q0 = tile * kGenTile;
      float st[2][4] = {};
      float dpt[2][4] = {};
      for (int d0 = 0; d0 < head_size; d0 += kGenChunk) {
        __syncthreads();
        load_rows<kGenChunk>(sm.k, k_head, stride, key0, seq_len, d0, head_size);
        load_rows<kGenChunk>(sm.v, v_head, stride, key0, seq_len, d0, head_size);
        load_rows<kGenChunk>(sm.q, q_head, stride, q0, seq_len, d0, head_size);
        load_rows<kGenChunk>(sm.o, do_head, channels, q0, seq_len, d0, head_size);
        __syncthreads();
#pragma unroll 8
        for (int d = 0; d < kGenChunk; ++d) {
          const float ka = sm.k[2 * ty][d];
          const float kb = sm.k[2 * ty + 1][d];
          const float va = sm.v[2 * ty][d];
          const float vb = sm.v[2 * ty + 1][d];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const float qv = sm.q[tx + 8 * j][d];
            const float ov = sm.o[tx + 8 * j][d];
            st[0][j] = fmaf(ka, qv, st[0][j]);
            st[1][j] = fmaf(kb, qv, st[1][j]);
            dpt[0][j] = fmaf(va, ov, dpt[0][j]);
            dpt[1][j] = fmaf(vb, ov, dpt[1][j]);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int query = q0 + tx + 8 * j;
        const bool query_valid = query < seq_len;
        const float query_lse = query_valid ? lse_pair[query] : 0.0f;
        const float query_delta = query_valid ? delta_pair[query] : 0.0f;
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          float p = 0.0f;
          float ds = 0.0f;
          if (query_valid && key0 + 2 * ty + i <= query) {
            p = expf(scale * st[i][j] - query_lse);
            ds = p * (dpt[i][j] - query_delta);
          }
          sm.p[2 * ty + i][tx + 8 * j] = p;
          sm.ds[2 * ty + i][tx + 8 * j] = ds;
        }
      }
      load_rows<kGenOut>(sm.x, do_head, channels, q0, seq_len, col0, head_size);
      load_rows<kGenOut>(sm.y, q_head, stride, q0, seq_len, col0, head_size);
      __syncthreads();
#pragma unroll 8
      for (int query = 0; query < kGenTile; ++query) {
        const float pa = sm.p[2 * ty][query];
        const float pb = sm.p[2 * ty + 1][query];
        const float dsa = sm.ds[2 * ty][query];
        const float dsb = sm.ds[2 * ty + 1][query];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float ov = sm.x[query][tx + 8 * j];
          const float qv = sm.y[query][tx + 8 * j];
          dv[0][j] = fmaf(pa, ov, dv[0][j]);
          dv[1][j] = fmaf(pb, ov, dv[1][j]);
          dk[0][j] = fmaf(dsa, qv, dk[0][j]);
          dk[1][j] = fmaf(dsb, qv, dk[1][j]);
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int key = key0 + 2 * ty + i;
    if (key < seq_len) {
      T* const dk_row = layout.k(dqkv, b, g) + key * stride;
      T* const dv_row = layout.v(dqkv, b, g) + key * stride;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int col = col0 + tx + 8 * j;
        if (col < head_size) {
          T* const dk_at = dk_row + col;
          T* const dv_at = dv_row + col;
          *dk_at = from_f32<T>(to_f32(*dk_at) + scale * dk[i][j]);
          *dv_at = from_f32<T>(to_f32(*dv_at) + dv[i][j]);
        }
      }
    }
  }
}

// dQ for queries [32 (last - y), +32) and head columns [64 z, 64 z + 64): a loop over the key tiles
// up to the diagonal.
template <typename T>
__global__ void __launch_bounds__(kGenThreads, kGenBackwardBlocks)
    general_dq_kernel(T* __restrict__ dqkv /*[B,T,W]*/, const T* __restrict__ dout /*[B,T,C]*/,
                      const T* __restrict__ qkv /*[B,T,W]*/, const float* __restrict__ lse /*[B,NH,T]*/,
                      const float* __restrict__ delta /*[B,NH,T]*/, Packed layout, float scale) {
  __shared__ GeneralBackwardSmem sm;
  const int seq_len = layout.seq_len;
  const int heads = layout.heads;
  const int head_size = layout.head_size;
  const int channels = heads * head_size;
  const int pair = static_cast<int>(blockIdx.x);
  const int b = pair / heads;
  const int h = pair % heads;
  const int g = h / layout.group();
  const int block = static_cast<int>(gridDim.y - 1 - blockIdx.y);
  const int q0 = block * kGenTile;
  const int col0 = static_cast<int>(blockIdx.z) * kGenOut;
  const int ty = static_cast<int>(threadIdx.x) / 8;
  const int tx = static_cast<int>(threadIdx.x) % 8;
  const std::int64_t stride = layout.stride();
  const T* const q_head = layout.q(qkv, b, h);
  const T* const k_head = layout.k(qkv, b, g);
  const T* const v_head = layout.v(qkv, b, g);
  const T* const do_head =
      dout + static_cast<std::int64_t>(b) * seq_len * channels + static_cast<std::int64_t>(h) * head_size;

  float row_lse[2];
  float row_delta[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = q0 + 2 * ty + i;
    const std::int64_t at = static_cast<std::int64_t>(pair) * seq_len + row;
    row_lse[i] = row < seq_len ? lse[at] : 0.0f;
    row_delta[i] = row < seq_len ? delta[at] : 0.0f;
  }
  float dq[2][8] = {};
  for (int tile = 0; tile <= block; ++tile) {
    const int key0 = tile * kGenTile;
    float s[2][4] = {};
    float dp[2][4] = {};
    for (int d0 = 0; d0 < head_size; d0 += kGenChunk) {
      __syncthreads();
      load_rows<kGenChunk>(sm.q, q_head, stride, q0, seq_len, d0, head_size);
      load_rows<kGenChunk>(sm.o, do_head, channels, q0, seq_len, d0, head_size);
      load_rows<kGenChunk>(sm.k, k_head, stride, key0, seq_len, d0, head_size);
      load_rows<kGenChunk>(sm.v, v_head, stride, key0, seq_len, d0, head_size);
      __syncthreads();
#pragma unroll 8
      for (int d = 0; d < kGenChunk; ++d) {
        const float qa = sm.q[2 * ty][d];
        const float qb = sm.q[2 * ty + 1][d];
        const float oa = sm.o[2 * ty][d];
        const float ob = sm.o[2 * ty + 1][d];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float kv = sm.k[tx + 8 * j][d];
          const float vv = sm.v[tx + 8 * j][d];
          s[0][j] = fmaf(qa, kv, s[0][j]);
          s[1][j] = fmaf(qb, kv, s[1][j]);
          dp[0][j] = fmaf(oa, vv, dp[0][j]);
          dp[1][j] = fmaf(ob, vv, dp[1][j]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int row = q0 + 2 * ty + i;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float ds = 0.0f;
        if (row < seq_len && key0 + tx + 8 * j <= row) {
          ds = expf(scale * s[i][j] - row_lse[i]) * (dp[i][j] - row_delta[i]);
        }
        sm.ds[2 * ty + i][tx + 8 * j] = ds;
      }
    }
    load_rows<kGenOut>(sm.x, k_head, stride, key0, seq_len, col0, head_size);
    __syncthreads();
#pragma unroll 8
    for (int key = 0; key < kGenTile; ++key) {
      const float dsa = sm.ds[2 * ty][key];
      const float dsb = sm.ds[2 * ty + 1][key];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float kv = sm.x[key][tx + 8 * j];
        dq[0][j] = fmaf(dsa, kv, dq[0][j]);
        dq[1][j] = fmaf(dsb, kv, dq[1][j]);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = q0 + 2 * ty + i;
    if (row < seq_len) {
      T* const dq_row = layout.q(dqkv, b, h) + row * stride;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int col = col0 + tx + 8 * j;
        if (col < head_size) dq_row[col] = from_f32<T>(to_f32(dq_row[col]) + scale * dq[i][j]);
      }
    }
  }
}

// ---- D = rowwise dot(dout, out) --------------------------------------------------------------------

constexpr int kDeltaThreads = 256;
constexpr int kDeltaWarps = kDeltaThreads / 32;

// One warp per (b, h, t), grid-stride; lanes stride over hs and a fixed xor tree adds them.
template <typename T>
__global__ void __launch_bounds__(kDeltaThreads)
    delta_kernel(float* __restrict__ delta /*[B,NH,T]*/, const T* __restrict__ dout /*[B,T,C]*/,
                 const T* __restrict__ out /*[B,T,C]*/, std::int64_t rows, int seq_len, int channels, int heads,
                 int head_size) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * kDeltaWarps;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kDeltaWarps + threadIdx.x / 32; r < rows; r += warps) {
    const std::int64_t pair = r / seq_len;
    const std::int64_t t = r % seq_len;
    const std::int64_t b = pair / heads;
    const std::int64_t h = pair % heads;
    const std::int64_t offset = (b * seq_len + t) * channels + h * head_size;
    float sum = 0.0f;
    for (int d = lane; d < head_size; d += 32) sum = fmaf(to_f32(dout[offset + d]), to_f32(out[offset + d]), sum);
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) sum += __shfl_xor_sync(kFullMask, sum, m);
    if (lane == 0) delta[r] = sum;
  }
}

// x: `pairs` (batch, head) pairs — query heads, or K/V heads in the dK/dV pass.
dim3 general_grid(const Problem& p, std::int64_t pairs) {
  return dim3(static_cast<unsigned int>(pairs), static_cast<unsigned int>(ceil_div(p.seq_len, kGenTile)),
              static_cast<unsigned int>(ceil_div(p.head_size, kGenOut)));
}

}  // namespace

template <typename T>
LaunchStatus launch_general_forward(T* out, float* lse, const T* qkv, const Problem& p, cudaStream_t stream) {
  general_forward_kernel<T><<<general_grid(p, p.pairs), kGenThreads, 0, stream>>>(out, lse, qkv, packed_of(p), p.scale);
  return detail::last_launch_status();
}

template <typename T>
LaunchStatus launch_general_backward(T* dqkv, const T* dout, const T* qkv, const float* lse, const float* delta,
                                     const Problem& p, cudaStream_t stream) {
  general_dkdv_kernel<T>
      <<<general_grid(p, p.kv_pairs), kGenThreads, 0, stream>>>(dqkv, dout, qkv, lse, delta, packed_of(p), p.scale);
  if (const LaunchStatus status = detail::last_launch_status(); status != 0) return status;
  general_dq_kernel<T>
      <<<general_grid(p, p.pairs), kGenThreads, 0, stream>>>(dqkv, dout, qkv, lse, delta, packed_of(p), p.scale);
  return detail::last_launch_status();
}

template <typename T>
LaunchStatus launch_delta(float* delta, const T* dout, const T* out, const Problem& p, cudaStream_t stream) {
  const std::int64_t rows = p.pairs * p.seq_len;
  delta_kernel<T><<<detail::blocks_for(rows, kDeltaWarps), kDeltaThreads, 0, stream>>>(
      delta, dout, out, rows, p.seq_len, p.channels, p.heads, p.head_size);
  return detail::last_launch_status();
}

#define ZINF_ATTENTION_GENERAL(T)                                                                                      \
  template LaunchStatus launch_general_forward<T>(T*, float*, const T*, const Problem&, cudaStream_t);                 \
  template LaunchStatus launch_general_backward<T>(T*, const T*, const T*, const float*, const float*, const Problem&, \
                                                   cudaStream_t);                                                      \
  template LaunchStatus launch_delta<T>(float*, const T*, const T*, const Problem&, cudaStream_t);
ZINF_ATTENTION_GENERAL(float)
ZINF_ATTENTION_GENERAL(__nv_bfloat16)
ZINF_ATTENTION_GENERAL(__half)
#undef ZINF_ATTENTION_GENERAL

}  // namespace zinf::kernels::cuda::attention_impl
