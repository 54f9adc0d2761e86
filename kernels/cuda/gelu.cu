// CUDA GELU, tanh form (kernels/gelu.h), forward and backward, elementwise on `elem` arrays in fp32
// arithmetic. tanh is the library's tanhf (a couple of ulp), not the CPU's exp-based approximation,
// so results agree with the CPU to about 1e-6 relative, not bit for bit.
//
// Launch: grid-stride, 256 threads a block; each step handles 16 bytes of every array (4 fp32 or 8
// bf16/fp16 elements) when all arrays are 16-byte aligned, and a scalar loop takes the remainder
// (or everything, when an array is not aligned). The backward accumulates into dinp (+=).
#include <cstdint>

#include "kernels/cuda/elem.cuh"
#include "kernels/gelu.h"

namespace zinf::kernels::cuda {
namespace {

using detail::aligned16;
using detail::Pack;

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

__device__ __forceinline__ float gelu(float x) {
  const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}

// d gelu(x) / dx.
__device__ __forceinline__ float gelu_grad(float x) {
  const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
  const float t = tanhf(u);
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

// out may be inp: each element is read and written by the same thread, read first.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    gelu_forward_kernel(T* out, const T* inp, std::int64_t n, std::int64_t vector_steps) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  using P = Pack<T, kVec>;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t step = first; step < vector_steps; step += stride) {
    const P x = *reinterpret_cast<const P*>(inp + step * kVec);
    P y;
#pragma unroll
    for (int k = 0; k < kVec; ++k) y.v[k] = detail::from_f32<T>(gelu(detail::to_f32(x.v[k])));
    *reinterpret_cast<P*>(out + step * kVec) = y;
  }
  for (std::int64_t i = vector_steps * kVec + first; i < n; i += stride) {
    out[i] = detail::from_f32<T>(gelu(detail::to_f32(inp[i])));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    gelu_backward_kernel(T* __restrict__ dinp, const T* __restrict__ inp, const T* __restrict__ dout, std::int64_t n,
                         std::int64_t vector_steps) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  using P = Pack<T, kVec>;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t step = first; step < vector_steps; step += stride) {
    const P x = *reinterpret_cast<const P*>(inp + step * kVec);
    const P dy = *reinterpret_cast<const P*>(dout + step * kVec);
    P dx = *reinterpret_cast<const P*>(dinp + step * kVec);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      dx.v[k] =
          detail::from_f32<T>(detail::to_f32(dx.v[k]) + detail::to_f32(dy.v[k]) * gelu_grad(detail::to_f32(x.v[k])));
    }
    *reinterpret_cast<P*>(dinp + step * kVec) = dx;
  }
  for (std::int64_t i = vector_steps * kVec + first; i < n; i += stride) {
    dinp[i] =
        detail::from_f32<T>(detail::to_f32(dinp[i]) + detail::to_f32(dout[i]) * gelu_grad(detail::to_f32(inp[i])));
  }
}

}  // namespace

LaunchStatus gelu_forward(Elem elem, void* out, const void* inp, std::int64_t n, Stream stream) {
  if (n < 0) return detail::invalid_argument();
  if (n == 0) return 0;
  if (out == nullptr || inp == nullptr) return detail::invalid_argument();
  return detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    using T = decltype(tag);
    constexpr int kVec = 16 / static_cast<int>(sizeof(T));
    const std::int64_t vector_steps = aligned16(out) && aligned16(inp) ? n / kVec : 0;
    gelu_forward_kernel<T>
        <<<detail::vector_and_tail_blocks(n, vector_steps, kVec, kThreads), kThreads, 0, detail::native(stream)>>>(
            static_cast<T*>(out), static_cast<const T*>(inp), n, vector_steps);
    return detail::last_launch_status();
  });
}

LaunchStatus gelu_backward(Elem elem, void* dinp, const void* inp, const void* dout, std::int64_t n, Stream stream) {
  if (n < 0) return detail::invalid_argument();
  if (n == 0) return 0;
  if (dinp == nullptr || inp == nullptr || dout == nullptr) return detail::invalid_argument();
  return detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    using T = decltype(tag);
    constexpr int kVec = 16 / static_cast<int>(sizeof(T));
    const std::int64_t vector_steps = aligned16(dinp) && aligned16(inp) && aligned16(dout) ? n / kVec : 0;
    gelu_backward_kernel<T>
        <<<detail::vector_and_tail_blocks(n, vector_steps, kVec, kThreads), kThreads, 0, detail::native(stream)>>>(
            static_cast<T*>(dinp), static_cast<const T*>(inp), static_cast<const T*>(dout), n, vector_steps);
    return detail::last_launch_status();
  });
}

}  // namespace zinf::kernels::cuda
