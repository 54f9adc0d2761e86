// Internal to the CUDA attention kernels (attention.cu has their design): the problem shape, the
// constants and launch helpers the three files share, and the launchers that attention.cu's entry
// points call — tensor-core kernels in attention_tensor_core.cu, the general path and D in
// attention_general.cu. Every launcher enqueues on `stream` and returns the launch status (0 when
// it launched); none synchronizes.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/cuda/elem.cuh"

namespace zinf::kernels::cuda::attention_impl {

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
  int channels;  // C = NH hs, the width of out
  int heads;     // NH
  int kv_heads;  // NKV; NH is a multiple of it
  int head_size;
  std::int64_t pairs;     // B * NH: the grid's x in the forward and dQ passes
  std::int64_t kv_pairs;  // B * NKV: the grid's x in the dK/dV pass
  float scale;            // 1/sqrt(hs), rounded from double exactly as the CPU does
};

// False for shapes the contract rejects, or too large for the kernels' int arguments and grids.
inline bool make_problem(std::int64_t batch, std::int64_t seq_len, std::int64_t channels, std::int64_t heads,
                         std::int64_t kv_heads, Problem* problem) {
  if (batch < 1 || seq_len < 1 || channels < 1 || heads < 1 || channels % heads != 0) return false;
  if (kv_heads < 1 || kv_heads > heads || heads % kv_heads != 0) return false;
  if (seq_len > kMaxSeqLen || channels > INT_MAX / 3 || batch > INT_MAX / heads || channels / heads > kMaxHeadSize) {
    return false;
  }
  problem->seq_len = static_cast<int>(seq_len);
  problem->channels = static_cast<int>(channels);
  problem->heads = static_cast<int>(heads);
  problem->kv_heads = static_cast<int>(kv_heads);
  problem->head_size = static_cast<int>(channels / heads);
  problem->pairs = batch * heads;
  problem->kv_pairs = batch * kv_heads;
  problem->scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(channels / heads)));
  return true;
}

// The packed q|k|v rows (kernels/attention.h): NH query heads, then NKV key heads, then NKV value
// heads, hs elements each, W = (NH + 2 NKV) hs elements a row; query head h reads K/V head
// h / (NH / NKV). Passed to the kernels by value. NH, NKV, hs as make_problem accepted them, so
// W <= 3 C fits an int.
struct Packed {
  int seq_len;
  int heads;
  int kv_heads;
  int head_size;

  __host__ __device__ std::int64_t stride() const {
    return static_cast<std::int64_t>(heads + 2 * kv_heads) * head_size;
  }
  __host__ __device__ int group() const { return heads / kv_heads; }
  // Row 0 of batch b's head `slot` of the row (slot h: query head h; NH + g: key head g; NH + NKV + g:
  // value head g), in qkv or in a gradient of its layout.
  template <typename P>
  __host__ __device__ P* head(P* base, int b, int slot) const {
    return base + static_cast<std::int64_t>(b) * seq_len * stride() + static_cast<std::int64_t>(slot) * head_size;
  }
  template <typename P>
  __host__ __device__ P* q(P* base, int b, int h) const {
    return head(base, b, h);
  }
  template <typename P>
  __host__ __device__ P* k(P* base, int b, int g) const {
    return head(base, b, heads + g);
  }
  template <typename P>
  __host__ __device__ P* v(P* base, int b, int g) const {
    return head(base, b, heads + kv_heads + g);
  }
};

inline Packed packed_of(const Problem& p) { return {p.seq_len, p.heads, p.kv_heads, p.head_size}; }

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

inline std::size_t delta_bytes(const Problem& p) {
  const std::size_t bytes = static_cast<std::size_t>(p.pairs) * static_cast<std::size_t>(p.seq_len) * sizeof(float);
  return (bytes + 255) / 256 * 256;
}

// Head sizes the tensor-core kernels are built for (with bf16/fp16 and 16-byte aligned arrays).
inline bool tensor_core_head_size(int head_size) { return head_size == 32 || head_size == 64 || head_size == 128; }

// Forward through the tensor cores: T is __nv_bfloat16 or __half, p.head_size 32, 64 or 128, the
// arrays 16-byte aligned. lse may be null.
template <typename T>
LaunchStatus launch_tc_forward(T* out, float* lse, const T* qkv, const Problem& p, cudaStream_t stream);

// Backward through the tensor cores (dK/dV pass, then dQ), after launch_delta; same conditions.
template <typename T>
LaunchStatus launch_tc_backward(T* dqkv, const T* dout, const T* qkv, const float* lse, const float* delta,
                                const Problem& p, cudaStream_t stream);

// Forward on the general path: T float, __nv_bfloat16 or __half, any head size and alignment.
template <typename T>
LaunchStatus launch_general_forward(T* out, float* lse, const T* qkv, const Problem& p, cudaStream_t stream);

// Backward on the general path (dK/dV pass, then dQ), after launch_delta.
template <typename T>
LaunchStatus launch_general_backward(T* dqkv, const T* dout, const T* qkv, const float* lse, const float* delta,
                                     const Problem& p, cudaStream_t stream);

// D[b, h, t] = dot(dout[b, t, h], out[b, t, h]) in fp32 into `delta` (delta_bytes(p) of scratch).
template <typename T>
LaunchStatus launch_delta(float* delta, const T* dout, const T* out, const Problem& p, cudaStream_t stream);

}  // namespace zinf::kernels::cuda::attention_impl
