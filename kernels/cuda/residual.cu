// CUDA residual add (kernels/residual.h), forward and backward, elementwise on `elem` arrays: each
// output is the fp32 sum of its operands rounded once to `elem`.
//
// Launch: grid-stride, 256 threads a block; each step handles 16 bytes of every array (4 fp32 or 8
// bf16/fp16 elements) when all arrays are 16-byte aligned, and a scalar loop takes the remainder
// (or everything, when an array is not aligned). The backward accumulates into both gradients (+=).
#include <cstdint>

#include "kernels/cuda/elem.cuh"
#include "kernels/residual.h"

namespace zinf::kernels::cuda {
namespace {

using detail::aligned16;
using detail::Pack;

constexpr int kThreads = 256;

// out may be inp1 or inp2: each element is read and written by the same thread, read first.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    residual_forward_kernel(T* out, const T* inp1, const T* inp2, std::int64_t n, std::int64_t vector_steps) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  using P = Pack<T, kVec>;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t step = first; step < vector_steps; step += stride) {
    const P a = *reinterpret_cast<const P*>(inp1 + step * kVec);
    const P b = *reinterpret_cast<const P*>(inp2 + step * kVec);
    P y;
#pragma unroll
    for (int k = 0; k < kVec; ++k) y.v[k] = detail::from_f32<T>(detail::to_f32(a.v[k]) + detail::to_f32(b.v[k]));
    *reinterpret_cast<P*>(out + step * kVec) = y;
  }
  for (std::int64_t i = vector_steps * kVec + first; i < n; i += stride) {
    out[i] = detail::from_f32<T>(detail::to_f32(inp1[i]) + detail::to_f32(inp2[i]));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    residual_backward_kernel(T* __restrict__ dinp1, T* __restrict__ dinp2, const T* __restrict__ dout, std::int64_t n,
                             std::int64_t vector_steps) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  using P = Pack<T, kVec>;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t step = first; step < vector_steps; step += stride) {
    const P dy = *reinterpret_cast<const P*>(dout + step * kVec);
    P d1 = *reinterpret_cast<const P*>(dinp1 + step * kVec);
    P d2 = *reinterpret_cast<const P*>(dinp2 + step * kVec);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float g = detail::to_f32(dy.v[k]);
      d1.v[k] = detail::from_f32<T>(detail::to_f32(d1.v[k]) + g);
      d2.v[k] = detail::from_f32<T>(detail::to_f32(d2.v[k]) + g);
    }
    *reinterpret_cast<P*>(dinp1 + step * kVec) = d1;
    *reinterpret_cast<P*>(dinp2 + step * kVec) = d2;
  }
  for (std::int64_t i = vector_steps * kVec + first; i < n; i += stride) {
    const float g = detail::to_f32(dout[i]);
    dinp1[i] = detail::from_f32<T>(detail::to_f32(dinp1[i]) + g);
    dinp2[i] = detail::from_f32<T>(detail::to_f32(dinp2[i]) + g);
  }
}

}  // namespace

LaunchStatus residual_forward(Elem elem, void* out, const void* inp1, const void* inp2, std::int64_t n, Stream stream) {
  if (n < 0) return detail::invalid_argument();
  if (n == 0) return 0;
  if (out == nullptr || inp1 == nullptr || inp2 == nullptr) return detail::invalid_argument();
  return detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    using T = decltype(tag);
    constexpr int kVec = 16 / static_cast<int>(sizeof(T));
    const std::int64_t vector_steps = aligned16(out) && aligned16(inp1) && aligned16(inp2) ? n / kVec : 0;
    residual_forward_kernel<T>
        <<<detail::vector_and_tail_blocks(n, vector_steps, kVec, kThreads), kThreads, 0, detail::native(stream)>>>(
            static_cast<T*>(out), static_cast<const T*>(inp1), static_cast<const T*>(inp2), n, vector_steps);
    return detail::last_launch_status();
  });
}

LaunchStatus residual_backward(Elem elem, void* dinp1, void* dinp2, const void* dout, std::int64_t n, Stream stream) {
  if (n < 0) return detail::invalid_argument();
  if (n == 0) return 0;
  if (dinp1 == nullptr || dinp2 == nullptr || dout == nullptr) return detail::invalid_argument();
  return detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    using T = decltype(tag);
    constexpr int kVec = 16 / static_cast<int>(sizeof(T));
    const std::int64_t vector_steps = aligned16(dinp1) && aligned16(dinp2) && aligned16(dout) ? n / kVec : 0;
    residual_backward_kernel<T>
        <<<detail::vector_and_tail_blocks(n, vector_steps, kVec, kThreads), kThreads, 0, detail::native(stream)>>>(
            static_cast<T*>(dinp1), static_cast<T*>(dinp2), static_cast<const T*>(dout), n, vector_steps);
    return detail::last_launch_status();
  });
}

}  // namespace zinf::kernels::cuda
