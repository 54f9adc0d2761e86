// CUDA fused SwiGLU (kernels/swiglu.h), forward and backward, elementwise on `elem` arrays in fp32
// arithmetic. exp is the library's expf (a couple of ulp), not the CPU's exp_approx, so results
// agree with the CPU to about 1e-6 relative, not bit for bit.
//
// Launch: grid-stride, 256 threads a block; each step handles 16 bytes of every array (4 fp32 or 8
// bf16/fp16 elements) when all arrays are 16-byte aligned, and a scalar loop takes the remainder
// (or everything, when an array is not aligned). The backward accumulates into dgate and dup (+=).
#include <cstdint>

#include "kernels/cuda/elem.cuh"
#include "kernels/swiglu.h"

namespace zinf::kernels::cuda {
namespace {

using detail::aligned16;
using detail::Pack;

constexpr int kThreads = 256;

__device__ __forceinline__ float swiglu(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// The two gradients of one element, accumulated into dg and du.
__device__ __forceinline__ void swiglu_grad(float dy, float g, float u, float& dg, float& du) {
  const float e = 1.0f + expf(-g);
  const float s = 1.0f / e;
  dg += dy * u * (s * (1.0f + g * (1.0f - s)));
  du += dy * (g / e);
}

// out may be gate or up: each element is read and written by the same thread, read first.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    swiglu_forward_kernel(T* out, const T* gate, const T* up, std::int64_t n, std::int64_t vector_steps) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  using P = Pack<T, kVec>;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t step = first; step < vector_steps; step += stride) {
    const P g = *reinterpret_cast<const P*>(gate + step * kVec);
    const P u = *reinterpret_cast<const P*>(up + step * kVec);
    P y;
#pragma unroll
    for (int k = 0; k < kVec; ++k) y.v[k] = detail::from_f32<T>(swiglu(detail::to_f32(g.v[k]), detail::to_f32(u.v[k])));
    *reinterpret_cast<P*>(out + step * kVec) = y;
  }
  for (std::int64_t i = vector_steps * kVec + first; i < n; i += stride) {
    out[i] = detail::from_f32<T>(swiglu(detail::to_f32(gate[i]), detail::to_f32(up[i])));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    swiglu_backward_kernel(T* __restrict__ dgate, T* __restrict__ dup, const T* __restrict__ dout,
                           const T* __restrict__ gate, const T* __restrict__ up, std::int64_t n,
                           std::int64_t vector_steps) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  using P = Pack<T, kVec>;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t step = first; step < vector_steps; step += stride) {
    const P dy = *reinterpret_cast<const P*>(dout + step * kVec);
    const P g = *reinterpret_cast<const P*>(gate + step * kVec);
    const P u = *reinterpret_cast<const P*>(up + step * kVec);
    P dg = *reinterpret_cast<const P*>(dgate + step * kVec);
    P du = *reinterpret_cast<const P*>(dup + step * kVec);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      float dgf = detail::to_f32(dg.v[k]);
      float duf = detail::to_f32(du.v[k]);
      swiglu_grad(detail::to_f32(dy.v[k]), detail::to_f32(g.v[k]), detail::to_f32(u.v[k]), dgf, duf);
      dg.v[k] = detail::from_f32<T>(dgf);
      du.v[k] = detail::from_f32<T>(duf);
    }
    *reinterpret_cast<P*>(dgate + step * kVec) = dg;
    *reinterpret_cast<P*>(dup + step * kVec) = du;
  }
  for (std::int64_t i = vector_steps * kVec + first; i < n; i += stride) {
    float dgf = detail::to_f32(dgate[i]);
    float duf = detail::to_f32(dup[i]);
    swiglu_grad(detail::to_f32(dout[i]), detail::to_f32(gate[i]), detail::to_f32(up[i]), dgf, duf);
    dgate[i] = detail::from_f32<T>(dgf);
    dup[i] = detail::from_f32<T>(duf);
  }
}

}  // namespace

LaunchStatus swiglu_forward(Elem elem, void* out, const void* gate, const void* up, std::int64_t n, Stream stream) {
  if (n < 0) return detail::invalid_argument();
  if (n == 0) return 0;
  if (out == nullptr || gate == nullptr || up == nullptr) return detail::invalid_argument();
  return detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    using T = decltype(tag);
    constexpr int kVec = 16 / static_cast<int>(sizeof(T));
    const std::int64_t vector_steps = aligned16(out) && aligned16(gate) && aligned16(up) ? n / kVec : 0;
    swiglu_forward_kernel<T>
        <<<detail::vector_and_tail_blocks(n, vector_steps, kVec, kThreads), kThreads, 0, detail::native(stream)>>>(
            static_cast<T*>(out), static_cast<const T*>(gate), static_cast<const T*>(up), n, vector_steps);
    return detail::last_launch_status();
  });
}

LaunchStatus swiglu_backward(Elem elem, void* dgate, void* dup, const void* dout, const void* gate, const void* up,
                             std::int64_t n, Stream stream) {
  if (n < 0) return detail::invalid_argument();
  if (n == 0) return 0;
  if (dgate == nullptr || dup == nullptr || dout == nullptr || gate == nullptr || up == nullptr) {
    return detail::invalid_argument();
  }
  return detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    using T = decltype(tag);
    constexpr int kVec = 16 / static_cast<int>(sizeof(T));
    const bool vector = aligned16(dgate) && aligned16(dup) && aligned16(dout) && aligned16(gate) && aligned16(up);
    const std::int64_t vector_steps = vector ? n / kVec : 0;
    swiglu_backward_kernel<T>
        <<<detail::vector_and_tail_blocks(n, vector_steps, kVec, kThreads), kThreads, 0, detail::native(stream)>>>(
            static_cast<T*>(dgate), static_cast<T*>(dup), static_cast<const T*>(dout), static_cast<const T*>(gate),
            static_cast<const T*>(up), n, vector_steps);
    return detail::last_launch_status();
  });
}

}  // namespace zinf::kernels::cuda
