// Device-side helpers every kernels/cuda/<op>.cu shares: fp32 <-> storage-type conversion of one
// element, vector packs, the Elem -> C++ type dispatch, and the launch-status convention of
// kernels/cuda_launch.h.
// Internal to kernels/cuda; nothing outside it includes this file.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda_launch.h"

namespace zinf::kernels::cuda::detail {

// Widening is exact. Narrowing rounds to nearest even (the CUDA intrinsics' _rn forms); NaN
// handling that must match the CPU bit for bit lives in convert.cu, not here: kernels only narrow
// finite results or NaNs whose bits nobody pins down.
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) {
  return __float2half_rn(x);
}

// Calls f(T{}) with T the C++ type of `elem`: float, __nv_bfloat16 or __half.
template <typename F>
LaunchStatus dispatch_elem(Elem elem, F&& f) {
  switch (elem) {
    case Elem::kF32:
      return f(float{});
    case Elem::kBF16:
      return f(__nv_bfloat16{});
    case Elem::kF16:
      return f(__half{});
  }
  return static_cast<LaunchStatus>(cudaErrorInvalidValue);
}

// The status after a launch: what cudaGetLastError() says (and clears).
inline LaunchStatus last_launch_status() { return static_cast<LaunchStatus>(cudaGetLastError()); }

inline LaunchStatus invalid_argument() { return static_cast<LaunchStatus>(cudaErrorInvalidValue); }

inline cudaStream_t native(Stream stream) { return static_cast<cudaStream_t>(stream); }

// N elements moved as one access: 16 bytes (one vector load/store) for 16-bit N = 8 or fp32 N = 4,
// narrower packs aligned to their own size. Callers check the pointer's alignment (aligned()).
template <typename T, int N>
struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) Pack {
  T v[N];
};

template <typename T, int N>
__device__ __forceinline__ Pack<T, N> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, N>*>(p);
}

template <typename T, int N>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, N>& value) {
  *reinterpret_cast<Pack<T, N>*>(p) = value;
}

inline bool aligned(const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }
inline bool aligned16(const void* p) { return aligned(p, 16); }

// Blocks of `threads` covering n items, capped so the grid fits (grid-stride loops cover the rest).
inline unsigned int blocks_for(std::int64_t n, int threads, std::int64_t max_blocks = 65535LL * 16) {
  std::int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > max_blocks) blocks = max_blocks;
  return static_cast<unsigned int>(blocks);
}

// Blocks of `threads` for a grid-stride kernel that runs `vector_steps` steps of `vec` elements
// through vector accesses and then the remaining n - vector_steps * vec elements one by one: enough
// threads for whichever loop is longer.
inline unsigned int vector_and_tail_blocks(std::int64_t n, std::int64_t vector_steps, int vec, int threads) {
  const std::int64_t scalar_elements = n - vector_steps * vec;
  return blocks_for(vector_steps > scalar_elements ? vector_steps : scalar_elements, threads);
}

}  // namespace zinf::kernels::cuda::detail
