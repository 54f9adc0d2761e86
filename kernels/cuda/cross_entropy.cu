// CUDA fused softmax + cross-entropy over the vocabulary (kernels/cross_entropy.h), forward and
// backward, on `elem` logits in fp32 arithmetic (expf, logf).
//
// One 512-thread block per row. The row's maximum and sum of exp(logit - max) come from one pass
// (online softmax: each thread keeps a running maximum and rescales its sum when the maximum
// grows), then a block reduction in a fixed order (butterfly within each warp, then the warps in
// order), so every thread of the block holds the same statistics and every run gives the same bits.
// Rows start at any alignment (V is often odd), so each pass takes the row's first elements up to a
// 16-byte boundary one by one, then 16-byte vectors, then the tail; the element -> thread mapping is
// the same in every pass.
// Forward: losses[r] = log(sum) + (max - logit[target]). Backward: the statistics pass, then a write
// pass dlogits[r, v] = (softmax - onehot) * dloss / R. In place (dlogits == logits) is safe: the
// statistics pass reads the whole row before the block reduction's barrier, and in the write pass
// each element is read and then written by the same thread. The per-row losses are not averaged
// here: the caller forms the mean in fp64 in row order, as the CPU kernel does.
#include <cmath>
#include <cstdint>

#include "kernels/cross_entropy.h"
#include "kernels/cuda/elem.cuh"

namespace zinf::kernels::cuda {
namespace {

using detail::load_pack;
using detail::Pack;

constexpr int kThreads = 512;

// A running maximum and the sum of exp(x - max) over the elements seen; max = -inf: none seen.
struct MaxSum {
  float max;
  float sum;
};

__device__ __forceinline__ void update(MaxSum& s, float x) {
  if (x > s.max) {
    s.sum = s.sum * expf(s.max - x) + 1.0f;  // exp(-inf) = 0 for the first element
    s.max = x;
  } else {
    s.sum += expf(x - s.max);
  }
}

// Commutative bit for bit (equal maxima add the two sums; otherwise the smaller side is rescaled),
// so both lanes of a butterfly step get the same result.
__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  if (a.max < b.max) {
    const MaxSum t = a;
    a = b;
    b = t;
  }
  if (b.max == -INFINITY) return a;  // b saw no element: -inf - -inf would be NaN
  return {a.max, a.sum + b.sum * expf(b.max - a.max)};
}

// Every thread of the block must call it; every thread gets the same result.
__device__ MaxSum block_combine(MaxSum s, MaxSum* warp_stats /*[32]*/) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const MaxSum other{__shfl_xor_sync(0xFFFFFFFFu, s.max, offset), __shfl_xor_sync(0xFFFFFFFFu, s.sum, offset)};
    s = combine(s, other);
  }
  if (threadIdx.x % 32 == 0) warp_stats[threadIdx.x / 32] = s;
  __syncthreads();
  MaxSum total = warp_stats[0];
  const int warps = static_cast<int>(blockDim.x) / 32;
  for (int w = 1; w < warps; ++w) total = combine(total, warp_stats[w]);
  return total;
}

// Elements before the row's first 16-byte boundary (at most the row).
template <typename T>
__device__ __forceinline__ std::int64_t head_elements(const T* row, std::int64_t vocab) {
  const auto misalignment = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(row) % 16);
  const std::int64_t head = (16 - misalignment) % 16 / static_cast<std::int64_t>(sizeof(T));
  return head < vocab ? head : vocab;
}

// The row's statistics: head one by one (threads 0..head-1), 16-byte vectors, tail one by one.
template <typename T>
__device__ MaxSum row_stats(const T* row, std::int64_t vocab, MaxSum* warp_stats) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  const std::int64_t tid = threadIdx.x;
  const std::int64_t head = head_elements(row, vocab);
  const std::int64_t vectors = (vocab - head) / kVec;
  const std::int64_t tail = head + vectors * kVec;
  MaxSum s{-INFINITY, 0.0f};
  if (tid < head) update(s, detail::to_f32(row[tid]));
  for (std::int64_t j = tid; j < vectors; j += blockDim.x) {
    const auto p = load_pack<T, kVec>(row + head + j * kVec);
#pragma unroll
    for (int k = 0; k < kVec; ++k) update(s, detail::to_f32(p.v[k]));
  }
  if (tail + tid < vocab) update(s, detail::to_f32(row[tail + tid]));
  return block_combine(s, warp_stats);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_forward_kernel(float* __restrict__ losses, const T* __restrict__ logits,
                                 const std::int32_t* __restrict__ targets, std::int64_t vocab) {
  __shared__ MaxSum warp_stats[32];
  const std::int64_t r = blockIdx.x;
  const T* row = logits + r * vocab;
  const MaxSum s = row_stats(row, vocab, warp_stats);
  if (threadIdx.x == 0) {
    const std::int64_t target = targets[r];
    // An out-of-range target (a broken precondition) gives NaN rather than a read out of bounds.
    losses[r] = target >= 0 && target < vocab ? logf(s.sum) + (s.max - detail::to_f32(row[target]))
                                              : __int_as_float(0x7FC00000);
  }
}

// logits and dlogits may be the same array (no __restrict__). vector_writes: the two rows have the
// same alignment, so the vector mapping serves both; otherwise the write pass goes element by element.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_backward_kernel(T* dlogits, const T* logits, const std::int32_t* __restrict__ targets,
                                  std::int64_t vocab, float scale, bool vector_writes) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  __shared__ MaxSum warp_stats[32];
  const std::int64_t r = blockIdx.x;
  const T* row = logits + r * vocab;
  T* grad = dlogits + r * vocab;
  const MaxSum s = row_stats(row, vocab, warp_stats);
  const float inv_sum = 1.0f / s.sum;
  const std::int64_t target = targets[r];
  const auto gradient = [&](std::int64_t v, float x) {
    const float p = expf(x - s.max) * inv_sum;
    return detail::from_f32<T>(v == target ? (p - 1.0f) * scale : p * scale);
  };
  const std::int64_t tid = threadIdx.x;
  if (!vector_writes) {
    for (std::int64_t v = tid; v < vocab; v += blockDim.x) grad[v] = gradient(v, detail::to_f32(row[v]));
    return;
  }
  const std::int64_t head = head_elements(row, vocab);
  const std::int64_t vectors = (vocab - head) / kVec;
  const std::int64_t tail = head + vectors * kVec;
  if (tid < head) grad[tid] = gradient(tid, detail::to_f32(row[tid]));
  for (std::int64_t j = tid; j < vectors; j += blockDim.x) {
    const std::int64_t v = head + j * kVec;
    const auto p = load_pack<T, kVec>(row + v);
    Pack<T, kVec> out;
#pragma unroll
    for (int k = 0; k < kVec; ++k) out.v[k] = gradient(v + k, detail::to_f32(p.v[k]));
    *reinterpret_cast<Pack<T, kVec>*>(grad + v) = out;
  }
  if (tail + tid < vocab) grad[tail + tid] = gradient(tail + tid, detail::to_f32(row[tail + tid]));
}

bool valid_shape(std::int64_t rows, std::int64_t vocab) { return rows >= 0 && rows <= INT32_MAX && vocab >= 1; }

}  // namespace

LaunchStatus cross_entropy_forward(Elem elem, float* losses, const void* logits, const std::int32_t* targets,
                                   std::int64_t rows, std::int64_t vocab, Stream stream) {
  if (!valid_shape(rows, vocab)) return detail::invalid_argument();
  if (rows == 0) return 0;
  if (losses == nullptr || logits == nullptr || targets == nullptr) return detail::invalid_argument();
  return detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    using T = decltype(tag);
    cross_entropy_forward_kernel<T><<<static_cast<unsigned int>(rows), kThreads, 0, detail::native(stream)>>>(
        losses, static_cast<const T*>(logits), targets, vocab);
    return detail::last_launch_status();
  });
}

LaunchStatus cross_entropy_backward(Elem elem, void* dlogits, const void* logits, const std::int32_t* targets,
                                    float dloss, std::int64_t rows, std::int64_t vocab, Stream stream) {
  if (!valid_shape(rows, vocab)) return detail::invalid_argument();
  if (rows == 0) return 0;
  if (dlogits == nullptr || logits == nullptr || targets == nullptr) return detail::invalid_argument();
  const auto scale = static_cast<float>(static_cast<double>(dloss) / static_cast<double>(rows));
  const bool vector_writes =
      reinterpret_cast<std::uintptr_t>(dlogits) % 16 == reinterpret_cast<std::uintptr_t>(logits) % 16;
  return detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    using T = decltype(tag);
    cross_entropy_backward_kernel<T><<<static_cast<unsigned int>(rows), kThreads, 0, detail::native(stream)>>>(
        static_cast<T*>(dlogits), static_cast<const T*>(logits), targets, vocab, scale, vector_writes);
    return detail::last_launch_status();
  });
}

}  // namespace zinf::kernels::cuda
