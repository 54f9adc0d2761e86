// The tensor-core path of the CUDA attention kernels: bf16/fp16, head sizes 32, 64 and 128,
// mma.sync m16n8k16 fed by ldmatrix from cp.async double-buffered shared tiles (attention.cu has the
// design, the tile sizes and the shared-memory budgets).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/attention_mma.cuh"
#include "kernels/cuda/attention_shared.cuh"

namespace zinf::kernels::cuda::attention_impl {
namespace {

template <int kHs>
struct TcForward {
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = 16 * kWarps;  // queries per block
  // Keys per tile. Two blocks of 256 threads per SM leave 128 registers a thread; at hs 64 and 128
  // the output (32 or 64 registers) plus 64 keys of scores (32) and the operands in flight spill, so
  // those take 32-key tiles.
  static constexpr int kKeys = kHs >= 64 ? 32 : 64;
  static constexpr int kLd = kHs + kPad;
  // Q, then K and V twice (double buffer).
  static constexpr std::size_t kSmemBytes = static_cast<std::size_t>(kRows + 4 * kKeys) * kLd * 2;
  // The warp's Q fragments stay in registers up to hs 64 (16 registers); at hs 128 they would take
  // 32, and are re-read from shared memory per tile instead.
  static constexpr bool kQInRegisters = kHs <= 64;
};

template <typename T, int kHs>
__global__ void __launch_bounds__(TcForward<kHs>::kThreads, 2)
    tc_forward_kernel(T* __restrict__ out /*[B,T,C]*/, float* __restrict__ lse /*[B,NH,T] or null*/,
                      const T* __restrict__ qkv /*[B,T,W]*/, Packed layout, float scale_log2) {
  using Cfg = TcForward<kHs>;
  constexpr int kLd = Cfg::kLd;
  constexpr int kRows = Cfg::kRows;
  constexpr int kKeys = Cfg::kKeys;
  constexpr int kThreads = Cfg::kThreads;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* const q_tile = reinterpret_cast<T*>(shared_bytes);  // [kRows][kLd]
  T* const k_tiles = q_tile + kRows * kLd;               // [2][kKeys][kLd]
  T* const v_tiles = k_tiles + 2 * kKeys * kLd;          // [2][kKeys][kLd]

  const int seq_len = layout.seq_len;
  const int channels = layout.heads * kHs;
  const int pair = static_cast<int>(blockIdx.x);
  const int b = pair / layout.heads;
  const int h = pair % layout.heads;
  const int g = h / layout.group();
  const int q0 = static_cast<int>(gridDim.y - 1 - blockIdx.y) * kRows;  // latest (heaviest) blocks first
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t stride = layout.stride();
  const T* const q_head = layout.q(qkv, b, h);
  const T* const k_head = layout.k(qkv, b, g);
  const T* const v_head = layout.v(qkv, b, g);
  // Key tiles up to the one holding the block's last valid row.
  const int num_tiles = (min(q0 + kRows, seq_len) - 1) / kKeys + 1;

  load_tile_async<kRows, kHs, kThreads>(q_tile, q_head, stride, q0, seq_len);
  load_tile_async<kKeys, kHs, kThreads>(k_tiles, k_head, stride, 0, seq_len);
  load_tile_async<kKeys, kHs, kThreads>(v_tiles, v_head, stride, 0, seq_len);
  cp_async_commit();

  const int warp_row0 = q0 + 16 * warp;
  const bool warp_active = warp_row0 < seq_len;  // warp-uniform
  const int row_lo = warp_row0 + lane / 4;       // accumulator rows row_lo and row_lo + 8
  const int col_pair = 2 * (lane % 4);           // accumulator columns col_pair, col_pair + 1 of each n8 tile

  float o[kHs / 8][4] = {};                   // unnormalised output, 16 rows x kHs per warp
  float row_max[2] = {-INFINITY, -INFINITY};  // running max of scale*log2(e)*s, rows row_lo, +8
  float row_sum[2] = {0.0f, 0.0f};            // this thread's part of the running sum of 2^(...)
  [[maybe_unused]] std::uint32_t q_frag[Cfg::kQInRegisters ? kHs / 16 : 1][4];

  for (int tile = 0; tile < num_tiles; ++tile) {
    const int stage = tile & 1;
    if (tile + 1 < num_tiles) {
      // Stage ^ 1 was last read in the previous iteration, which ended with a barrier.
      load_tile_async<kKeys, kHs, kThreads>(k_tiles + (stage ^ 1) * kKeys * kLd, k_head, stride, (tile + 1) * kKeys,
                                            seq_len);
      load_tile_async<kKeys, kHs, kThreads>(v_tiles + (stage ^ 1) * kKeys * kLd, v_head, stride, (tile + 1) * kKeys,
                                            seq_len);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int key0 = tile * kKeys;
    // Warps whose rows all precede the tile's first key have nothing to add (warp-uniform).
    if (warp_active && key0 <= warp_row0 + 15) {
      const T* const k_tile = k_tiles + stage * kKeys * kLd;
      const T* const v_tile = v_tiles + stage * kKeys * kLd;
      if constexpr (Cfg::kQInRegisters) {
        if (tile == 0) {
#pragma unroll
          for (int ks = 0; ks < kHs / 16; ++ks)
            ldmatrix_x4(q_frag[ks], a_operand<kLd>(q_tile, 16 * warp, 16 * ks, lane));
        }
      }
      // S = Q K^T for the warp's 16 rows and the tile's keys.
      float s[kKeys / 8][4] = {};
#pragma unroll
      for (int ks = 0; ks < kHs / 16; ++ks) {
        std::uint32_t a[4];
        if constexpr (Cfg::kQInRegisters) {
#pragma unroll
          for (int i = 0; i < 4; ++i) a[i] = q_frag[ks][i];
        } else {
          ldmatrix_x4(a, a_operand<kLd>(q_tile, 16 * warp, 16 * ks, lane));
        }
#pragma unroll
        for (int np = 0; np < kKeys / 16; ++np) {
          std::uint32_t kf[4];
          ldmatrix_x4(kf, b_operand<kLd>(k_tile, 16 * np, 16 * ks, lane));
          mma_16816<T>(s[2 * np], a, kf[0], kf[1]);
          mma_16816<T>(s[2 * np + 1], a, kf[2], kf[3]);
        }
      }
      // Causal mask, where the tile reaches past the warp's first row (this also masks keys >= T).
      if (key0 + kKeys - 1 > warp_row0) {
#pragma unroll
        for (int j = 0; j < kKeys / 8; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = key0 + 8 * j + col_pair + (e & 1);
            const int row = row_lo + 8 * (e >> 1);
            if (key > row) s[j][e] = -INFINITY;
          }
        }
      }
      // Online softmax in base 2: p = 2^(scale*log2(e)*s - max).
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float tile_max = -INFINITY;
#pragma unroll
        for (int j = 0; j < kKeys / 8; ++j) tile_max = fmaxf(tile_max, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
        // The 4 lanes of a quad hold one row.
        tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 1));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 2));
        const float new_max = fmaxf(row_max[r], tile_max * scale_log2);
        // A row with no unmasked key yet keeps max -inf; subtracting 0 then keeps every p at 0, not NaN.
        const float base = new_max == -INFINITY ? 0.0f : new_max;
        const float alpha = exp2_approx(row_max[r] - base);
        row_max[r] = new_max;
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < kKeys / 8; ++j) {
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const float p = exp2_approx(fmaf(s[j][2 * r + c], scale_log2, -base));
            s[j][2 * r + c] = p;
            sum += p;
          }
        }
        row_sum[r] = row_sum[r] * alpha + sum;
#pragma unroll
        for (int j = 0; j < kHs / 8; ++j) {
          o[j][2 * r] *= alpha;
          o[j][2 * r + 1] *= alpha;
        }
      }
      // O += P V, P rounded to T.
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) {
        std::uint32_t a[4];
        accumulators_to_a<T>(a, s, kk);
#pragma unroll
        for (int dn = 0; dn < kHs / 16; ++dn) {
          std::uint32_t vf[4];
          ldmatrix_x4_trans(vf, b_operand_trans<kLd>(v_tile, 16 * kk, 16 * dn, lane));
          mma_16816<T>(o[2 * dn], a, vf[0], vf[1]);
          mma_16816<T>(o[2 * dn + 1], a, vf[2], vf[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this stage before the next iteration refills it
  }

  if (warp_active) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float total = row_sum[r];
      total += __shfl_xor_sync(kFullMask, total, 1);
      total += __shfl_xor_sync(kFullMask, total, 2);
      const int row = row_lo + 8 * r;
      if (row < seq_len) {
        const float inv = 1.0f / total;
        T* const out_row = out + (static_cast<std::int64_t>(b) * seq_len + row) * channels + h * kHs + col_pair;
#pragma unroll
        for (int j = 0; j < kHs / 8; ++j) store_pair(out_row + 8 * j, o[j][2 * r] * inv, o[j][2 * r + 1] * inv);
        if (lse != nullptr && lane % 4 == 0) {
          lse[static_cast<std::int64_t>(pair) * seq_len + row] = (row_max[r] + log2f(total)) * kLn2;
        }
      }
    }
  }
}

template <int kHs>
struct TcDq {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = 16 * kWarps;  // queries per block
  static constexpr int kKeys = 64;           // keys per tile (equal to kRows: the last tile is the diagonal)
  static constexpr int kLd = kHs + kPad;
  // Q and dO, then K and V twice.
  static constexpr std::size_t kSmemBytes = static_cast<std::size_t>(2 * kRows + 4 * kKeys) * kLd * 2;
};

template <typename T, int kHs>
__global__ void __launch_bounds__(TcDq<kHs>::kThreads, 2)
    tc_dq_kernel(T* __restrict__ dqkv /*[B,T,W]*/, const T* __restrict__ dout /*[B,T,C]*/,
                 const T* __restrict__ qkv /*[B,T,W]*/, const float* __restrict__ lse /*[B,NH,T]*/,
                 const float* __restrict__ delta /*[B,NH,T]*/, Packed layout, float scale, float scale_log2) {
  using Cfg = TcDq<kHs>;
  constexpr int kLd = Cfg::kLd;
  constexpr int kRows = Cfg::kRows;
  constexpr int kKeys = Cfg::kKeys;
  constexpr int kThreads = Cfg::kThreads;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* const q_tile = reinterpret_cast<T*>(shared_bytes);  // [kRows][kLd]
  T* const do_tile = q_tile + kRows * kLd;               // [kRows][kLd]
  T* const k_tiles = do_tile + kRows * kLd;              // [2][kKeys][kLd]
  T* const v_tiles = k_tiles + 2 * kKeys * kLd;          // [2][kKeys][kLd]

  const int seq_len = layout.seq_len;
  const int channels = layout.heads * kHs;
  const int pair = static_cast<int>(blockIdx.x);
  const int b = pair / layout.heads;
  const int h = pair % layout.heads;
  const int g = h / layout.group();
  const int q0 = static_cast<int>(gridDim.y - 1 - blockIdx.y) * kRows;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t stride = layout.stride();
  const T* const q_head = layout.q(qkv, b, h);
  const T* const k_head = layout.k(qkv, b, g);
  const T* const v_head = layout.v(qkv, b, g);
  const T* const do_head =
      dout + static_cast<std::int64_t>(b) * seq_len * channels + static_cast<std::int64_t>(h) * kHs;
  const int num_tiles = (min(q0 + kRows, seq_len) - 1) / kKeys + 1;

  load_tile_async<kRows, kHs, kThreads>(q_tile, q_head, stride, q0, seq_len);
  load_tile_async<kRows, kHs, kThreads>(do_tile, do_head, channels, q0, seq_len);
  load_tile_async<kKeys, kHs, kThreads>(k_tiles, k_head, stride, 0, seq_len);
  load_tile_async<kKeys, kHs, kThreads>(v_tiles, v_head, stride, 0, seq_len);
  cp_async_commit();

  const int warp_row0 = q0 + 16 * warp;
  const bool warp_active = warp_row0 < seq_len;
  const int row_lo = warp_row0 + lane / 4;
  const int col_pair = 2 * (lane % 4);
  // Per row: lse in base 2 and D. Rows past T get lse = +inf, so their P is exactly 0.
  float lse2[2];
  float row_delta[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row_lo + 8 * r;
    const bool valid = row < seq_len;
    const std::int64_t at = static_cast<std::int64_t>(pair) * seq_len + row;
    lse2[r] = valid ? lse[at] * kLog2e : INFINITY;
    row_delta[r] = valid ? delta[at] : 0.0f;
  }
  float dq[kHs / 8][4] = {};

  for (int tile = 0; tile < num_tiles; ++tile) {
    const int stage = tile & 1;
    if (tile + 1 < num_tiles) {
      load_tile_async<kKeys, kHs, kThreads>(k_tiles + (stage ^ 1) * kKeys * kLd, k_head, stride, (tile + 1) * kKeys,
                                            seq_len);
      load_tile_async<kKeys, kHs, kThreads>(v_tiles + (stage ^ 1) * kKeys * kLd, v_head, stride, (tile + 1) * kKeys,
                                            seq_len);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int key0 = tile * kKeys;
    if (warp_active && key0 <= warp_row0 + 15) {
      const T* const k_tile = k_tiles + stage * kKeys * kLd;
      const T* const v_tile = v_tiles + stage * kKeys * kLd;
      // S = Q K^T and dP = dO V^T.
      float s[kKeys / 8][4] = {};
      float dp[kKeys / 8][4] = {};
#pragma unroll
      for (int ks = 0; ks < kHs / 16; ++ks) {
        std::uint32_t aq[4];
        std::uint32_t ado[4];
        ldmatrix_x4(aq, a_operand<kLd>(q_tile, 16 * warp, 16 * ks, lane));
        ldmatrix_x4(ado, a_operand<kLd>(do_tile, 16 * warp, 16 * ks, lane));
#pragma unroll
        for (int np = 0; np < kKeys / 16; ++np) {
          std::uint32_t kf[4];
          std::uint32_t vf[4];
          ldmatrix_x4(kf, b_operand<kLd>(k_tile, 16 * np, 16 * ks, lane));
          ldmatrix_x4(vf, b_operand<kLd>(v_tile, 16 * np, 16 * ks, lane));
          mma_16816<T>(s[2 * np], aq, kf[0], kf[1]);
          mma_16816<T>(s[2 * np + 1], aq, kf[2], kf[3]);
          mma_16816<T>(dp[2 * np], ado, vf[0], vf[1]);
          mma_16816<T>(dp[2 * np + 1], ado, vf[2], vf[3]);
        }
      }
      // dS = P (dP - D), in s; masked entries exactly 0 (a select, so an inf from exp2 never leaks).
      const bool masked_tile = key0 + kKeys - 1 > warp_row0;
#pragma unroll
      for (int j = 0; j < kKeys / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1;
          const int key = key0 + 8 * j + col_pair + (e & 1);
          float p = exp2_approx(fmaf(s[j][e], scale_log2, -lse2[r]));
          if (masked_tile && key > row_lo + 8 * r) p = 0.0f;
          s[j][e] = p * (dp[j][e] - row_delta[r]);
        }
      }
      // dQ += dS K, dS rounded to T.
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) {
        std::uint32_t a[4];
        accumulators_to_a<T>(a, s, kk);
#pragma unroll
        for (int dn = 0; dn < kHs / 16; ++dn) {
          std::uint32_t kf[4];
          ldmatrix_x4_trans(kf, b_operand_trans<kLd>(k_tile, 16 * kk, 16 * dn, lane));
          mma_16816<T>(dq[2 * dn], a, kf[0], kf[1]);
          mma_16816<T>(dq[2 * dn + 1], a, kf[2], kf[3]);
        }
      }
    }
    __syncthreads();
  }

  if (warp_active) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row_lo + 8 * r;
      if (row < seq_len) {
        T* const dq_row = layout.q(dqkv, b, h) + row * stride + col_pair;
#pragma unroll
        for (int j = 0; j < kHs / 8; ++j) add_pair(dq_row + 8 * j, scale * dq[j][2 * r], scale * dq[j][2 * r + 1]);
      }
    }
  }
}

template <int kHs>
struct TcDkdv {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kKeys = 16 * kWarps;  // keys per block
  // Queries per tile. At hs 128 dK and dV alone hold 128 fp32 registers a thread, and 32-query tiles
  // (32 more for S^T and dP^T) ran past 255 and spilled; 16-query tiles do not.
  static constexpr int kRows = kHs == 128 ? 16 : 64;
  static constexpr int kLd = kHs + kPad;
  // K and V, then Q and dO twice, then lse and D twice.
  static constexpr std::size_t kElemBytes = static_cast<std::size_t>(2 * kKeys + 4 * kRows) * kLd * 2;
  static constexpr std::size_t kSmemBytes = kElemBytes + 4 * kRows * sizeof(float);
  static_assert(2 * kRows <= kThreads, "one thread per lse or D value of a tile");
};

template <typename T, int kHs>
__global__ void __launch_bounds__(TcDkdv<kHs>::kThreads, 2)
    tc_dkdv_kernel(T* __restrict__ dqkv /*[B,T,W]*/, const T* __restrict__ dout /*[B,T,C]*/,
                   const T* __restrict__ qkv /*[B,T,W]*/, const float* __restrict__ lse /*[B,NH,T]*/,
                   const float* __restrict__ delta /*[B,NH,T]*/, Packed layout, float scale, float scale_log2) {
  using Cfg = TcDkdv<kHs>;
  constexpr int kLd = Cfg::kLd;
  constexpr int kRows = Cfg::kRows;
  constexpr int kKeys = Cfg::kKeys;
  constexpr int kThreads = Cfg::kThreads;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* const k_tile = reinterpret_cast<T*>(shared_bytes);                               // [kKeys][kLd]
  T* const v_tile = k_tile + kKeys * kLd;                                             // [kKeys][kLd]
  T* const q_tiles = v_tile + kKeys * kLd;                                            // [2][kRows][kLd]
  T* const do_tiles = q_tiles + 2 * kRows * kLd;                                      // [2][kRows][kLd]
  float* const lse_tiles = reinterpret_cast<float*>(shared_bytes + Cfg::kElemBytes);  // [2][kRows]
  float* const delta_tiles = lse_tiles + 2 * kRows;                                   // [2][kRows]

  // One block per (batch, K/V head g, key block): K and V stay in shared memory while the block
  // runs through the query tiles of every query head of g's group, one "step" per (head, tile),
  // and dK and dV add up over the whole group in the same fp32 registers.
  const int seq_len = layout.seq_len;
  const int channels = layout.heads * kHs;
  const int group = layout.group();
  const int kv_pair = static_cast<int>(blockIdx.x);
  const int b = kv_pair / layout.kv_heads;
  const int g = kv_pair % layout.kv_heads;
  const int key0 = static_cast<int>(blockIdx.y) * kKeys;  // early (heaviest) key blocks first
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t stride = layout.stride();
  const T* const k_head = layout.k(qkv, b, g);
  const T* const v_head = layout.v(qkv, b, g);
  // Per query head, query tiles from the one holding key0 (earlier ones see none of these keys) to the end.
  const int first_tile = key0 / kRows;
  const int tiles_per_head = ceil_div(seq_len, kRows) - first_tile;
  const int num_steps = group * tiles_per_head;
  // Step i: query head g * group + i / tiles_per_head, query tile first_tile + i % tiles_per_head.
  const auto step_row0 = [&](int step) { return (first_tile + step % tiles_per_head) * kRows; };

  // Step `step`'s Q, dO, lse and D into `stage`; rows past T are zero (and masked below).
  const auto load_query_tile = [&](int stage, int step) {
    const int h = g * group + step / tiles_per_head;
    const int row0 = step_row0(step);
    const std::int64_t pair = static_cast<std::int64_t>(b) * layout.heads + h;
    const T* const q_head = layout.q(qkv, b, h);
    const T* const do_head =
        dout + static_cast<std::int64_t>(b) * seq_len * channels + static_cast<std::int64_t>(h) * kHs;
    load_tile_async<kRows, kHs, kThreads>(q_tiles + stage * kRows * kLd, q_head, stride, row0, seq_len);
    load_tile_async<kRows, kHs, kThreads>(do_tiles + stage * kRows * kLd, do_head, channels, row0, seq_len);
    const int t = static_cast<int>(threadIdx.x);
    if (t < 2 * kRows) {
      const int row = row0 + t % kRows;
      const bool valid = row < seq_len;
      const float* const src = (t < kRows ? lse : delta) + pair * seq_len + (valid ? row : 0);
      float* const dst = (t < kRows ? lse_tiles : delta_tiles) + stage * kRows + t % kRows;
      cp_async_4(dst, src, valid);
    }
  };

  load_tile_async<kKeys, kHs, kThreads>(k_tile, k_head, stride, key0, seq_len);
  load_tile_async<kKeys, kHs, kThreads>(v_tile, v_head, stride, key0, seq_len);
  load_query_tile(0, 0);
  cp_async_commit();

  const int warp_key0 = key0 + 16 * warp;
  const bool warp_active = warp_key0 < seq_len;
  const int key_lo = warp_key0 + lane / 4;  // accumulator rows (keys) key_lo and key_lo + 8
  const int col_pair = 2 * (lane % 4);
  float dk[kHs / 8][4] = {};
  float dv[kHs / 8][4] = {};

  for (int step = 0; step < num_steps; ++step) {
    const int stage = step & 1;
    const int q0 = step_row0(step);
    if (step + 1 < num_steps) {
      load_query_tile(stage ^ 1, step + 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    // Warps whose first key follows every query of the tile have nothing to add.
    if (warp_active && q0 + kRows - 1 >= warp_key0) {
      const T* const q_tile = q_tiles + stage * kRows * kLd;
      const T* const do_tile = do_tiles + stage * kRows * kLd;
      const float* const lse_tile = lse_tiles + stage * kRows;
      const float* const delta_tile = delta_tiles + stage * kRows;
      // S^T = K Q^T and dP^T = V dO^T: the warp's 16 keys x the tile's queries.
      float st[kRows / 8][4] = {};
      float dpt[kRows / 8][4] = {};
#pragma unroll
      for (int ks = 0; ks < kHs / 16; ++ks) {
        std::uint32_t ak[4];
        std::uint32_t av[4];
        ldmatrix_x4(ak, a_operand<kLd>(k_tile, 16 * warp, 16 * ks, lane));
        ldmatrix_x4(av, a_operand<kLd>(v_tile, 16 * warp, 16 * ks, lane));
#pragma unroll
        for (int np = 0; np < kRows / 16; ++np) {
          std::uint32_t qf[4];
          std::uint32_t of[4];
          ldmatrix_x4(qf, b_operand<kLd>(q_tile, 16 * np, 16 * ks, lane));
          ldmatrix_x4(of, b_operand<kLd>(do_tile, 16 * np, 16 * ks, lane));
          mma_16816<T>(st[2 * np], ak, qf[0], qf[1]);
          mma_16816<T>(st[2 * np + 1], ak, qf[2], qf[3]);
          mma_16816<T>(dpt[2 * np], av, of[0], of[1]);
          mma_16816<T>(dpt[2 * np + 1], av, of[2], of[3]);
        }
      }
      // P^T into st, dS^T = P^T (dP^T - D) into dpt. Masked: keys after the query, and queries past T.
      const bool masked_tile = warp_key0 + 15 > q0 || q0 + kRows > seq_len;
#pragma unroll
      for (int j = 0; j < kRows / 8; ++j) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int qi = 8 * j + col_pair + c;  // query within the tile
          const float query_lse2 = lse_tile[qi] * kLog2e;
          const float query_delta = delta_tile[qi];
          const int query = q0 + qi;
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int e = 2 * r + c;
            float p = exp2_approx(fmaf(st[j][e], scale_log2, -query_lse2));
            if (masked_tile && (key_lo + 8 * r > query || query >= seq_len)) p = 0.0f;
            st[j][e] = p;
            dpt[j][e] = p * (dpt[j][e] - query_delta);
          }
        }
      }
      // dV += P^T dO and dK += dS^T Q, P^T and dS^T rounded to T.
#pragma unroll
      for (int kk = 0; kk < kRows / 16; ++kk) {
        std::uint32_t ap[4];
        std::uint32_t ads[4];
        accumulators_to_a<T>(ap, st, kk);
        accumulators_to_a<T>(ads, dpt, kk);
#pragma unroll
        for (int dn = 0; dn < kHs / 16; ++dn) {
          std::uint32_t of[4];
          std::uint32_t qf[4];
          ldmatrix_x4_trans(of, b_operand_trans<kLd>(do_tile, 16 * kk, 16 * dn, lane));
          ldmatrix_x4_trans(qf, b_operand_trans<kLd>(q_tile, 16 * kk, 16 * dn, lane));
          mma_16816<T>(dv[2 * dn], ap, of[0], of[1]);
          mma_16816<T>(dv[2 * dn + 1], ap, of[2], of[3]);
          mma_16816<T>(dk[2 * dn], ads, qf[0], qf[1]);
          mma_16816<T>(dk[2 * dn + 1], ads, qf[2], qf[3]);
        }
      }
    }
    __syncthreads();
  }

  if (warp_active) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int key = key_lo + 8 * r;
      if (key < seq_len) {
        T* const dk_row = layout.k(dqkv, b, g) + key * stride + col_pair;
        T* const dv_row = layout.v(dqkv, b, g) + key * stride + col_pair;
#pragma unroll
        for (int j = 0; j < kHs / 8; ++j) {
          add_pair(dk_row + 8 * j, scale * dk[j][2 * r], scale * dk[j][2 * r + 1]);
          add_pair(dv_row + 8 * j, dv[j][2 * r], dv[j][2 * r + 1]);
        }
      }
    }
  }
}

template <typename T, int kHs>
LaunchStatus launch_tc_forward_hs(T* out, float* lse, const T* qkv, const Problem& p, cudaStream_t stream) {
  using Cfg = TcForward<kHs>;
  const auto kernel = tc_forward_kernel<T, kHs>;
  if (const LaunchStatus status = allow_shared_memory(kernel, Cfg::kSmemBytes); status != 0) return status;
  const dim3 grid(static_cast<unsigned int>(p.pairs), static_cast<unsigned int>(ceil_div(p.seq_len, Cfg::kRows)));
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(out, lse, qkv, packed_of(p), p.scale * kLog2e);
  return detail::last_launch_status();
}

template <typename T, int kHs>
LaunchStatus launch_tc_backward_hs(T* dqkv, const T* dout, const T* qkv, const float* lse, const float* delta,
                                   const Problem& p, cudaStream_t stream) {
  using Dkdv = TcDkdv<kHs>;
  using Dq = TcDq<kHs>;
  const auto dkdv = tc_dkdv_kernel<T, kHs>;
  const auto dq = tc_dq_kernel<T, kHs>;
  if (const LaunchStatus status = allow_shared_memory(dkdv, Dkdv::kSmemBytes); status != 0) return status;
  if (const LaunchStatus status = allow_shared_memory(dq, Dq::kSmemBytes); status != 0) return status;
  const Packed layout = packed_of(p);
  dkdv<<<dim3(static_cast<unsigned int>(p.kv_pairs), static_cast<unsigned int>(ceil_div(p.seq_len, Dkdv::kKeys))),
         Dkdv::kThreads, Dkdv::kSmemBytes, stream>>>(dqkv, dout, qkv, lse, delta, layout, p.scale, p.scale * kLog2e);
  if (const LaunchStatus status = detail::last_launch_status(); status != 0) return status;
  dq<<<dim3(static_cast<unsigned int>(p.pairs), static_cast<unsigned int>(ceil_div(p.seq_len, Dq::kRows))),
       Dq::kThreads, Dq::kSmemBytes, stream>>>(dqkv, dout, qkv, lse, delta, layout, p.scale, p.scale * kLog2e);
  return detail::last_launch_status();
}

}  // namespace

template <typename T>
LaunchStatus launch_tc_forward(T* out, float* lse, const T* qkv, const Problem& p, cudaStream_t stream) {
  if (p.head_size == 32) return launch_tc_forward_hs<T, 32>(out, lse, qkv, p, stream);
  if (p.head_size == 64) return launch_tc_forward_hs<T, 64>(out, lse, qkv, p, stream);
  if (p.head_size == 128) return launch_tc_forward_hs<T, 128>(out, lse, qkv, p, stream);
  return detail::invalid_argument();
}

template <typename T>
LaunchStatus launch_tc_backward(T* dqkv, const T* dout, const T* qkv, const float* lse, const float* delta,
                                const Problem& p, cudaStream_t stream) {
  if (p.head_size == 32) return launch_tc_backward_hs<T, 32>(dqkv, dout, qkv, lse, delta, p, stream);
  if (p.head_size == 64) return launch_tc_backward_hs<T, 64>(dqkv, dout, qkv, lse, delta, p, stream);
  if (p.head_size == 128) return launch_tc_backward_hs<T, 128>(dqkv, dout, qkv, lse, delta, p, stream);
  return detail::invalid_argument();
}

template LaunchStatus launch_tc_forward<__nv_bfloat16>(__nv_bfloat16*, float*, const __nv_bfloat16*, const Problem&,
                                                       cudaStream_t);
template LaunchStatus launch_tc_forward<__half>(__half*, float*, const __half*, const Problem&, cudaStream_t);
template LaunchStatus launch_tc_backward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                                        const float*, const float*, const Problem&, cudaStream_t);
template LaunchStatus launch_tc_backward<__half>(__half*, const __half*, const __half*, const float*, const float*,
                                                 const Problem&, cudaStream_t);

}  // namespace zinf::kernels::cuda::attention_impl
