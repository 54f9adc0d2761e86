// Internal to attention_tensor_core.cu: PTX wrappers (cp.async, ldmatrix, mma.sync m16n8k16) and
// the fragment and shared-tile helpers of the tensor-core attention kernels (attention.cu has the
// design). Device code only; sm_80 or later.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace zinf::kernels::cuda::attention_impl {

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

}  // namespace zinf::kernels::cuda::attention_impl
