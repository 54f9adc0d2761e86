// CUDA causal multi-head self-attention, forward and backward (kernels/attention.h has the formulas
// and the contract), flash-attention style: per (batch, head) the sequence is cut into query blocks
// and key tiles staged in shared memory; the forward keeps an fp32 online softmax per query row
// (running maximum and sum, the partial output rescaled whenever the maximum grows) and saves only
// lse; the backward recomputes P = exp(scale * q.k - lse) per tile. No [T, T] matrix ever reaches
// global memory, and tiles wholly above the diagonal are skipped.
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
//     dK, dV    grid (B*NH, ceil(T/64)), 128 threads: 64 keys (4 warps) kept in shared memory, a loop
//               over the query tiles at or after them (64 queries, 16 at hs 128), Q, dO, lse and D
//               double-buffered (31, 55, 51 KiB). S^T = K Q^T and dP^T = V dO^T are computed
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
// than causal, attention bias, key/value heads shared between query heads.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/attention.h"
#include "kernels/cuda/elem.cuh"

namespace zinf::kernels::cuda {
namespace {

using detail::aligned16;
using detail::from_f32;
using detail::to_f32;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr unsigned int kFullMask = 0xFFFFFFFFu;

// ---- Problem shape ---------------------------------------------------------------------------

// Blocks of the general path: query rows and keys per tile, head columns per reduction step and
// per output chunk.
constexpr int kGenTile = 32;
constexpr int kGenChunk = 32;
constexpr int kGenOut = 64;
constexpr int kGenThreads = 128;

// Grids put query or key blocks on y and the general path's output chunks on z (at most 65535 each).
constexpr std::int64_t kMaxSeqLen = 65535LL * kGenTile;
constexpr std::int64_t kMaxHeadSize = 65535LL * kGenOut;

struct Problem {
  int seq_len;
  int channels;
  int heads;
  int head_size;
  std::int64_t pairs;  // B * NH, the grid's x
  float scale;         // 1/sqrt(hs), rounded from double exactly as the CPU does
};

// False for shapes the contract rejects, or too large for the kernels' int arguments and grids.
bool make_problem(std::int64_t batch, std::int64_t seq_len, std::int64_t channels, std::int64_t heads,
                  Problem* problem) {
  if (batch < 1 || seq_len < 1 || channels < 1 || heads < 1 || channels % heads != 0) return false;
  if (seq_len > kMaxSeqLen || channels > INT_MAX / 3 || batch > INT_MAX / heads || channels / heads > kMaxHeadSize) {
    return false;
  }
  problem->seq_len = static_cast<int>(seq_len);
  problem->channels = static_cast<int>(channels);
  problem->heads = static_cast<int>(heads);
  problem->head_size = static_cast<int>(channels / heads);
  problem->pairs = batch * heads;
  problem->scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(channels / heads)));
  return true;
}

__host__ __device__ constexpr int ceil_div(int n, int d) { return (n + d - 1) / d; }

// Kernels above the default 48 KiB of dynamic shared memory must opt in (per kernel, per device).
template <typename Kernel>
LaunchStatus allow_shared_memory(Kernel kernel, std::size_t bytes) {
  if (bytes <= 48 * 1024) return 0;
  const cudaError_t error =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (error != cudaSuccess) {
    cudaGetLastError();  // reported here; not left behind for the next launch's status
    return static_cast<LaunchStatus>(error);
  }
  return 0;
}

// ---- PTX wrappers for the tensor-core path -------------------------------------------------------

__device__ __forceinline__ std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1; valid = false writes 16 zero bytes and reads nothing.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}

// 4 bytes global -> shared; valid = false writes a zero.
__device__ __forceinline__ void cp_async_4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(dst)), "l"(src), "r"(valid ? 4 : 0)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most `kPending` of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Four 8x8 16-bit matrices; lane l gives the address of row l % 8 of matrix l / 8 and receives, of
// matrix i, register i holding row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* src) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(src)));
}

// The same, each matrix transposed: register i holds rows 2 (l % 4) and 2 (l % 4) + 1, column l / 4.
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* src) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(src)));
}

// d += a b, a 16x16 (row-major fragment), b 16x8 (column-major fragment), d 16x8 fp32. With
// g = lane / 4 and c = 2 (lane % 4): a = {(g, c..c+1), (g+8, c..c+1), (g, c+8..c+9), (g+8, c+8..c+9)},
// b = {(k c..c+1, n g), (k c+8..c+9, n g)}, d = {(g, c), (g, c+1), (g+8, c), (g+8, c+1)}.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                          std::uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// 2^x; +0 for -inf. Relative error about 2^-22, far below the 16-bit rounding of P that follows.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two fp32 values rounded to T, `lo` in the low half: one 32-bit fragment register.
template <typename T>
__device__ __forceinline__ std::uint32_t pack_pair(float lo, float hi) {
  std::uint32_t bits;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    std::memcpy(&bits, &v, sizeof(bits));
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    std::memcpy(&bits, &v, sizeof(bits));
  }
  return bits;
}

// p[0], p[1] = lo, hi (p 4-byte aligned).
template <typename T>
__device__ __forceinline__ void store_pair(T* p, float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(lo, hi);
  } else {
    *reinterpret_cast<__half2*>(p) = __floats2half2_rn(lo, hi);
  }
}

// p[0] += lo, p[1] += hi in fp32, rounded once to T (p 4-byte aligned).
template <typename T>
__device__ __forceinline__ void add_pair(T* p, float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    auto* q = reinterpret_cast<__nv_bfloat162*>(p);
    const float2 old = __bfloat1622float2(*q);
    *q = __floats2bfloat162_rn(old.x + lo, old.y + hi);
  } else {
    auto* q = reinterpret_cast<__half2*>(p);
    const float2 old = __half22float2(*q);
    *q = __floats2half2_rn(old.x + lo, old.y + hi);
  }
}

// ---- Tensor-core path ----------------------------------------------------------------------------

// Shared rows are kHs + kPad elements long: 16 bytes of padding shift consecutive rows by 4 banks,
// so the 8 rows one ldmatrix phase reads cover all 32 banks once (hs 32, 64 and 128 alike), and
// every row stays 16-byte aligned for cp.async and ldmatrix.
constexpr int kPad = 8;

// Copies rows [row0, row0 + kRows) of one head's kHs columns (global rows `stride` elements apart,
// `head` pointing at row 0) into a shared tile [kRows][kHs + kPad]; rows at or past seq_len are
// zero-filled, so masked products read zeros rather than stale shared memory (0 * NaN would leak).
template <int kRows, int kHs, int kThreads, typename T>
__device__ __forceinline__ void load_tile_async(T* tile, const T* head, std::int64_t stride, int row0, int seq_len) {
  constexpr int kChunks = kHs / 8;  // 16-byte pieces per row
  static_assert((kRows * kChunks) % kThreads == 0, "every thread copies the same number of pieces");
#pragma unroll
  for (int step = 0; step < kRows * kChunks / kThreads; ++step) {
    const int i = step * kThreads + static_cast<int>(threadIdx.x);
    const int r = i / kChunks;
    const int c = i % kChunks;
    const int row = row0 + r;
    const bool valid = row < seq_len;
    const T* src = head + (valid ? row * stride : 0) + c * 8;
    cp_async_16(tile + r * (kHs + kPad) + c * 8, src, valid);
  }
}

// ldmatrix addresses inside a tile of rows kLd elements apart, for 16 rows x 16 columns at (row0, col0):
// as the A operand (rows = M, columns = K),
template <int kLd, typename T>
__device__ __forceinline__ const T* a_operand(const T* tile, int row0, int col0, int lane) {
  return tile + (row0 + (lane & 15)) * kLd + col0 + (lane >> 4) * 8;
}
// as the B operands of two n8 tiles when the tile holds B transposed (rows = N, columns = K): registers
// 0-1 are n-tile rows row0..row0+7, 2-3 rows row0+8..row0+15,
template <int kLd, typename T>
__device__ __forceinline__ const T* b_operand(const T* tile, int row0, int col0, int lane) {
  return tile + (row0 + (lane & 7) + ((lane >> 4) << 3)) * kLd + col0 + ((lane >> 3) & 1) * 8;
}
// and, with ldmatrix_x4_trans, as the B operands of two n8 tiles when the tile holds B itself (rows = K,
// columns = N): registers 0-1 are columns col0..col0+7, 2-3 columns col0+8..col0+15.
template <int kLd, typename T>
__device__ __forceinline__ const T* b_operand_trans(const T* tile, int row0, int col0, int lane) {
  return tile + (row0 + (lane & 15)) * kLd + col0 + (lane >> 4) * 8;
}

// The A fragment of k-step kk (columns 16 kk .. 16 kk + 15) from fp32 accumulators of n8 tiles 2 kk
// and 2 kk + 1: the accumulator layout of a 16x16 block is the A layout, element for element.
template <typename T, int kTiles>
__device__ __forceinline__ void accumulators_to_a(std::uint32_t (&a)[4], const float (&acc)[kTiles][4], int kk) {
  a[0] = pack_pair<T>(acc[2 * kk][0], acc[2 * kk][1]);
  a[1] = pack_pair<T>(acc[2 * kk][2], acc[2 * kk][3]);
  a[2] = pack_pair<T>(acc[2 * kk + 1][0], acc[2 * kk + 1][1]);
  a[3] = pack_pair<T>(acc[2 * kk + 1][2], acc[2 * kk + 1][3]);
}

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
                      const T* __restrict__ qkv /*[B,T,3C]*/, int seq_len, int channels, int heads, float scale_log2) {
  using Cfg = TcForward<kHs>;
  constexpr int kLd = Cfg::kLd;
  constexpr int kRows = Cfg::kRows;
  constexpr int kKeys = Cfg::kKeys;
  constexpr int kThreads = Cfg::kThreads;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* const q_tile = reinterpret_cast<T*>(shared_bytes);  // [kRows][kLd]
  T* const k_tiles = q_tile + kRows * kLd;               // [2][kKeys][kLd]
  T* const v_tiles = k_tiles + 2 * kKeys * kLd;          // [2][kKeys][kLd]

  const int pair = static_cast<int>(blockIdx.x);
  const int b = pair / heads;
  const int h = pair % heads;
  const int q0 = static_cast<int>(gridDim.y - 1 - blockIdx.y) * kRows;  // latest (heaviest) blocks first
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t stride = 3LL * channels;
  const T* const q_head = qkv + static_cast<std::int64_t>(b) * seq_len * stride + static_cast<std::int64_t>(h) * kHs;
  const T* const k_head = q_head + channels;
  const T* const v_head = q_head + 2 * channels;
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
    tc_dq_kernel(T* __restrict__ dqkv /*[B,T,3C]*/, const T* __restrict__ dout /*[B,T,C]*/,
                 const T* __restrict__ qkv /*[B,T,3C]*/, const float* __restrict__ lse /*[B,NH,T]*/,
                 const float* __restrict__ delta /*[B,NH,T]*/, int seq_len, int channels, int heads, float scale,
                 float scale_log2) {
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

  const int pair = static_cast<int>(blockIdx.x);
  const int b = pair / heads;
  const int h = pair % heads;
  const int q0 = static_cast<int>(gridDim.y - 1 - blockIdx.y) * kRows;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t stride = 3LL * channels;
  const T* const q_head = qkv + static_cast<std::int64_t>(b) * seq_len * stride + static_cast<std::int64_t>(h) * kHs;
  const T* const k_head = q_head + channels;
  const T* const v_head = q_head + 2 * channels;
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
        T* const dq_row = dqkv + (static_cast<std::int64_t>(b) * seq_len + row) * stride + h * kHs + col_pair;
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
    tc_dkdv_kernel(T* __restrict__ dqkv /*[B,T,3C]*/, const T* __restrict__ dout /*[B,T,C]*/,
                   const T* __restrict__ qkv /*[B,T,3C]*/, const float* __restrict__ lse /*[B,NH,T]*/,
                   const float* __restrict__ delta /*[B,NH,T]*/, int seq_len, int channels, int heads, float scale,
                   float scale_log2) {
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

  const int pair = static_cast<int>(blockIdx.x);
  const int b = pair / heads;
  const int h = pair % heads;
  const int key0 = static_cast<int>(blockIdx.y) * kKeys;  // early (heaviest) key blocks first
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t stride = 3LL * channels;
  const T* const q_head = qkv + static_cast<std::int64_t>(b) * seq_len * stride + static_cast<std::int64_t>(h) * kHs;
  const T* const k_head = q_head + channels;
  const T* const v_head = q_head + 2 * channels;
  const T* const do_head =
      dout + static_cast<std::int64_t>(b) * seq_len * channels + static_cast<std::int64_t>(h) * kHs;
  const float* const lse_pair = lse + static_cast<std::int64_t>(pair) * seq_len;
  const float* const delta_pair = delta + static_cast<std::int64_t>(pair) * seq_len;
  // Query tiles from the one holding key0 (earlier ones see none of these keys) to the end.
  const int first_tile = key0 / kRows;
  const int num_tiles = ceil_div(seq_len, kRows) - first_tile;

  // One query tile's Q, dO, lse and D into `stage`; rows past T are zero (and masked below).
  const auto load_query_tile = [&](int stage, int row0) {
    load_tile_async<kRows, kHs, kThreads>(q_tiles + stage * kRows * kLd, q_head, stride, row0, seq_len);
    load_tile_async<kRows, kHs, kThreads>(do_tiles + stage * kRows * kLd, do_head, channels, row0, seq_len);
    const int t = static_cast<int>(threadIdx.x);
    if (t < 2 * kRows) {
      const int row = row0 + t % kRows;
      const bool valid = row < seq_len;
      const float* const src = (t < kRows ? lse_pair : delta_pair) + (valid ? row : 0);
      float* const dst = (t < kRows ? lse_tiles : delta_tiles) + stage * kRows + t % kRows;
      cp_async_4(dst, src, valid);
    }
  };

  load_tile_async<kKeys, kHs, kThreads>(k_tile, k_head, stride, key0, seq_len);
  load_tile_async<kKeys, kHs, kThreads>(v_tile, v_head, stride, key0, seq_len);
  load_query_tile(0, first_tile * kRows);
  cp_async_commit();

  const int warp_key0 = key0 + 16 * warp;
  const bool warp_active = warp_key0 < seq_len;
  const int key_lo = warp_key0 + lane / 4;  // accumulator rows (keys) key_lo and key_lo + 8
  const int col_pair = 2 * (lane % 4);
  float dk[kHs / 8][4] = {};
  float dv[kHs / 8][4] = {};

  for (int tile = 0; tile < num_tiles; ++tile) {
    const int stage = tile & 1;
    const int q0 = (first_tile + tile) * kRows;
    if (tile + 1 < num_tiles) {
      load_query_tile(stage ^ 1, q0 + kRows);
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
        T* const row = dqkv + (static_cast<std::int64_t>(b) * seq_len + key) * stride + h * kHs + col_pair;
#pragma unroll
        for (int j = 0; j < kHs / 8; ++j) {
          add_pair(row + channels + 8 * j, scale * dk[j][2 * r], scale * dk[j][2 * r + 1]);
          add_pair(row + 2 * channels + 8 * j, dv[j][2 * r], dv[j][2 * r + 1]);
        }
      }
    }
  }
}

// ---- General path --------------------------------------------------------------------------------
//
// 128 threads: thread (ty, tx) = (tid / 8, tid % 8) owns tile rows 2 ty and 2 ty + 1, score columns
// tx + 8 j (j < 4) and output columns tx + 8 j (j < 8). A row's 8 threads are 8 consecutive lanes,
// so row reductions are three xor-shuffles. Shared tiles of the reduction have 33-float rows: the 8
// different rows one warp reads at a time then sit in 8 different banks.

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
                           const T* __restrict__ qkv /*[B,T,3C]*/, int seq_len, int channels, int heads, int head_size,
                           float scale) {
  __shared__ GeneralForwardSmem sm;
  const int pair = static_cast<int>(blockIdx.x);
  const int b = pair / heads;
  const int h = pair % heads;
  const int block = static_cast<int>(gridDim.y - 1 - blockIdx.y);
  const int q0 = block * kGenTile;
  const int col0 = static_cast<int>(blockIdx.z) * kGenOut;
  const int ty = static_cast<int>(threadIdx.x) / 8;
  const int tx = static_cast<int>(threadIdx.x) % 8;
  const std::int64_t stride = 3LL * channels;
  const T* const q_head =
      qkv + static_cast<std::int64_t>(b) * seq_len * stride + static_cast<std::int64_t>(h) * head_size;
  const T* const k_head = q_head + channels;
  const T* const v_head = q_head + 2 * channels;

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

// dK, dV for keys [32 y, 32 y + 32) and head columns [64 z, 64 z + 64): a loop over the query tiles
// from the diagonal to the end. Thread rows are keys, score columns queries.
template <typename T>
__global__ void __launch_bounds__(kGenThreads)
    general_dkdv_kernel(T* __restrict__ dqkv /*[B,T,3C]*/, const T* __restrict__ dout /*[B,T,C]*/,
                        const T* __restrict__ qkv /*[B,T,3C]*/, const float* __restrict__ lse /*[B,NH,T]*/,
                        const float* __restrict__ delta /*[B,NH,T]*/, int seq_len, int channels, int heads,
                        int head_size, float scale) {
  __shared__ GeneralBackwardSmem sm;
  const int pair = static_cast<int>(blockIdx.x);
  const int b = pair / heads;
  const int h = pair % heads;
  const int block = static_cast<int>(blockIdx.y);
  const int key0 = block * kGenTile;
  const int col0 = static_cast<int>(blockIdx.z) * kGenOut;
  const int ty = static_cast<int>(threadIdx.x) / 8;
  const int tx = static_cast<int>(threadIdx.x) % 8;
  const std::int64_t stride = 3LL * channels;
  const std::int64_t head_offset = static_cast<std::int64_t>(h) * head_size;
  const T* const q_head = qkv + static_cast<std::int64_t>(b) * seq_len * stride + head_offset;
  const T* const k_head = q_head + channels;
  const T* const v_head = q_head + 2 * channels;
  const T* const do_head = dout + static_cast<std::int64_t>(b) * seq_len * channels + head_offset;
  const float* const lse_pair = lse + static_cast<std::int64_t>(pair) * seq_len;
  const float* const delta_pair = delta + static_cast<std::int64_t>(pair) * seq_len;
  const int num_blocks = ceil_div(seq_len, kGenTile);

  float dk[2][8] = {};
  float dv[2][8] = {};
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

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int key = key0 + 2 * ty + i;
    if (key < seq_len) {
      T* const row = dqkv + (static_cast<std::int64_t>(b) * seq_len + key) * stride + head_offset;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int col = col0 + tx + 8 * j;
        if (col < head_size) {
          T* const dk_at = row + channels + col;
          T* const dv_at = row + 2 * channels + col;
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
__global__ void __launch_bounds__(kGenThreads)
    general_dq_kernel(T* __restrict__ dqkv /*[B,T,3C]*/, const T* __restrict__ dout /*[B,T,C]*/,
                      const T* __restrict__ qkv /*[B,T,3C]*/, const float* __restrict__ lse /*[B,NH,T]*/,
                      const float* __restrict__ delta /*[B,NH,T]*/, int seq_len, int channels, int heads, int head_size,
                      float scale) {
  __shared__ GeneralBackwardSmem sm;
  const int pair = static_cast<int>(blockIdx.x);
  const int b = pair / heads;
  const int h = pair % heads;
  const int block = static_cast<int>(gridDim.y - 1 - blockIdx.y);
  const int q0 = block * kGenTile;
  const int col0 = static_cast<int>(blockIdx.z) * kGenOut;
  const int ty = static_cast<int>(threadIdx.x) / 8;
  const int tx = static_cast<int>(threadIdx.x) % 8;
  const std::int64_t stride = 3LL * channels;
  const std::int64_t head_offset = static_cast<std::int64_t>(h) * head_size;
  const T* const q_head = qkv + static_cast<std::int64_t>(b) * seq_len * stride + head_offset;
  const T* const k_head = q_head + channels;
  const T* const v_head = q_head + 2 * channels;
  const T* const do_head = dout + static_cast<std::int64_t>(b) * seq_len * channels + head_offset;

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
      T* const dq_row = dqkv + (static_cast<std::int64_t>(b) * seq_len + row) * stride + head_offset;
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

// ---- Launchers -------------------------------------------------------------------------------------

bool tensor_core_head_size(int head_size) { return head_size == 32 || head_size == 64 || head_size == 128; }

std::size_t delta_bytes(const Problem& p) {
  const std::size_t bytes = static_cast<std::size_t>(p.pairs) * static_cast<std::size_t>(p.seq_len) * sizeof(float);
  return (bytes + 255) / 256 * 256;
}

template <typename T, int kHs>
LaunchStatus launch_tc_forward(T* out, float* lse, const T* qkv, const Problem& p, cudaStream_t stream) {
  using Cfg = TcForward<kHs>;
  const auto kernel = tc_forward_kernel<T, kHs>;
  if (const LaunchStatus status = allow_shared_memory(kernel, Cfg::kSmemBytes); status != 0) return status;
  const dim3 grid(static_cast<unsigned int>(p.pairs), static_cast<unsigned int>(ceil_div(p.seq_len, Cfg::kRows)));
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(out, lse, qkv, p.seq_len, p.channels, p.heads,
                                                           p.scale * kLog2e);
  return detail::last_launch_status();
}

template <typename T, int kHs>
LaunchStatus launch_tc_backward(T* dqkv, const T* dout, const T* qkv, const float* lse, const float* delta,
                                const Problem& p, cudaStream_t stream) {
  using Dkdv = TcDkdv<kHs>;
  using Dq = TcDq<kHs>;
  const auto dkdv = tc_dkdv_kernel<T, kHs>;
  const auto dq = tc_dq_kernel<T, kHs>;
  if (const LaunchStatus status = allow_shared_memory(dkdv, Dkdv::kSmemBytes); status != 0) return status;
  if (const LaunchStatus status = allow_shared_memory(dq, Dq::kSmemBytes); status != 0) return status;
  const auto pairs = static_cast<unsigned int>(p.pairs);
  dkdv<<<dim3(pairs, static_cast<unsigned int>(ceil_div(p.seq_len, Dkdv::kKeys))), Dkdv::kThreads, Dkdv::kSmemBytes,
         stream>>>(dqkv, dout, qkv, lse, delta, p.seq_len, p.channels, p.heads, p.scale, p.scale * kLog2e);
  if (const LaunchStatus status = detail::last_launch_status(); status != 0) return status;
  dq<<<dim3(pairs, static_cast<unsigned int>(ceil_div(p.seq_len, Dq::kRows))), Dq::kThreads, Dq::kSmemBytes, stream>>>(
      dqkv, dout, qkv, lse, delta, p.seq_len, p.channels, p.heads, p.scale, p.scale * kLog2e);
  return detail::last_launch_status();
}

dim3 general_grid(const Problem& p) {
  return dim3(static_cast<unsigned int>(p.pairs), static_cast<unsigned int>(ceil_div(p.seq_len, kGenTile)),
              static_cast<unsigned int>(ceil_div(p.head_size, kGenOut)));
}

}  // namespace

std::size_t attention_backward_scratch_bytes(std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                                             std::int64_t heads) {
  Problem p;
  if (!make_problem(batch, seq_len, channels, heads, &p)) return 0;
  return delta_bytes(p);
}

LaunchStatus attention_forward(Elem elem, void* out, float* lse, const void* qkv, std::int64_t batch,
                               std::int64_t seq_len, std::int64_t channels, std::int64_t heads, Stream stream) {
  Problem p;
  if (!make_problem(batch, seq_len, channels, heads, &p) || out == nullptr || qkv == nullptr) {
    return detail::invalid_argument();
  }
  const cudaStream_t s = detail::native(stream);
  return detail::dispatch_elem(elem, [&](auto zero) -> LaunchStatus {
    using T = decltype(zero);
    T* const o = static_cast<T*>(out);
    const T* const x = static_cast<const T*>(qkv);
    if constexpr (!std::is_same_v<T, float>) {
      if (tensor_core_head_size(p.head_size) && aligned16(o) && aligned16(x)) {
        if (p.head_size == 32) return launch_tc_forward<T, 32>(o, lse, x, p, s);
        if (p.head_size == 64) return launch_tc_forward<T, 64>(o, lse, x, p, s);
        return launch_tc_forward<T, 128>(o, lse, x, p, s);
      }
    }
    general_forward_kernel<T>
        <<<general_grid(p), kGenThreads, 0, s>>>(o, lse, x, p.seq_len, p.channels, p.heads, p.head_size, p.scale);
    return detail::last_launch_status();
  });
}

LaunchStatus attention_backward(Elem elem, void* dqkv, const void* dout, const void* qkv, const void* out,
                                const float* lse, std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                                std::int64_t heads, void* scratch, std::size_t scratch_bytes, Stream stream) {
  Problem p;
  if (!make_problem(batch, seq_len, channels, heads, &p) || dqkv == nullptr || dout == nullptr || qkv == nullptr ||
      out == nullptr || lse == nullptr || scratch == nullptr || scratch_bytes < delta_bytes(p) ||
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
    const std::int64_t rows = p.pairs * p.seq_len;
    delta_kernel<T><<<detail::blocks_for(rows, kDeltaWarps), kDeltaThreads, 0, s>>>(delta, dy, y, rows, p.seq_len,
                                                                                    p.channels, p.heads, p.head_size);
    if (const LaunchStatus status = detail::last_launch_status(); status != 0) return status;
    if constexpr (!std::is_same_v<T, float>) {
      if (tensor_core_head_size(p.head_size) && aligned16(dx) && aligned16(dy) && aligned16(x)) {
        if (p.head_size == 32) return launch_tc_backward<T, 32>(dx, dy, x, lse, delta, p, s);
        if (p.head_size == 64) return launch_tc_backward<T, 64>(dx, dy, x, lse, delta, p, s);
        return launch_tc_backward<T, 128>(dx, dy, x, lse, delta, p, s);
      }
    }
    const dim3 grid = general_grid(p);
    general_dkdv_kernel<T>
        <<<grid, kGenThreads, 0, s>>>(dx, dy, x, lse, delta, p.seq_len, p.channels, p.heads, p.head_size, p.scale);
    if (const LaunchStatus status = detail::last_launch_status(); status != 0) return status;
    general_dq_kernel<T>
        <<<grid, kGenThreads, 0, s>>>(dx, dy, x, lse, delta, p.seq_len, p.channels, p.heads, p.head_size, p.scale);
    return detail::last_launch_status();
  });
}

}  // namespace zinf::kernels::cuda
