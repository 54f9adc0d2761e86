// CUDA grouped-query K/V expansion and its gradient's reduction (kernels/gqa.h). One thread per
// output element in a grid-stride loop; the reduction adds the group's G values in fp32 in
// increasing order, starting from the first, as the CPU does, so fp32 results are the CPU's bits.
#include <cstdint>

#include "kernels/cuda/elem.cuh"
#include "kernels/gqa.h"

namespace zinf::kernels::cuda {
namespace {

constexpr int kThreads = 256;

struct Geometry {
  std::int64_t rows;
  std::int64_t heads;
  std::int64_t kv_heads;
  std::int64_t head_dim;
};

// Element (r, c) of full: c < q is a query element; otherwise part (k or v) and head h.
template <typename T>
__global__ void __launch_bounds__(kThreads) gqa_expand_kernel(T* full, const T* packed, Geometry g) {
  const std::int64_t q = g.heads * g.head_dim, kv = g.kv_heads * g.head_dim, group = g.heads / g.kv_heads;
  const std::int64_t full_width = 3 * q, packed_width = q + 2 * kv;
  const std::int64_t total = g.rows * full_width;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const std::int64_t r = i / full_width, c = i % full_width;
    std::int64_t from = c;
    if (c >= q) {
      const std::int64_t part = (c - q) / q, within = (c - q) % q;
      const std::int64_t head = within / g.head_dim, d = within % g.head_dim;
      from = q + part * kv + (head / group) * g.head_dim + d;
    }
    full[i] = packed[r * packed_width + from];
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) gqa_reduce_kernel(T* dpacked, const T* dfull, Geometry g) {
  const std::int64_t q = g.heads * g.head_dim, kv = g.kv_heads * g.head_dim, group = g.heads / g.kv_heads;
  const std::int64_t full_width = 3 * q, packed_width = q + 2 * kv;
  const std::int64_t total = g.rows * packed_width;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const std::int64_t r = i / packed_width, c = i % packed_width;
    const T* row = dfull + r * full_width;
    if (c < q) {
      dpacked[i] = row[c];
      continue;
    }
    const std::int64_t part = (c - q) / kv, within = (c - q) % kv;
    const std::int64_t kv_head = within / g.head_dim, d = within % g.head_dim;
    const T* first = row + q + part * q + kv_head * group * g.head_dim + d;
    float sum = detail::to_f32(first[0]);
    for (std::int64_t j = 1; j < group; ++j) sum = __fadd_rn(sum, detail::to_f32(first[j * g.head_dim]));
    dpacked[i] = detail::from_f32<T>(sum);
  }
}

bool valid(const void* a, const void* b, const GqaShape& s) {
  return a != nullptr && b != nullptr && s.heads >= 1 && s.kv_heads >= 1 && s.head_dim >= 1 &&
         s.heads % s.kv_heads == 0;
}

Geometry geometry(const GqaShape& s) {
  return {static_cast<std::int64_t>(s.rows), static_cast<std::int64_t>(s.heads), static_cast<std::int64_t>(s.kv_heads),
          static_cast<std::int64_t>(s.head_dim)};
}

}  // namespace

LaunchStatus gqa_expand(Elem elem, void* full, const void* packed, const GqaShape& shape, Stream stream) {
  if (shape.rows == 0) return 0;
  if (!valid(full, packed, shape)) return detail::invalid_argument();
  const Geometry g = geometry(shape);
  const std::int64_t total = g.rows * 3 * g.heads * g.head_dim;
  return detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    using T = decltype(tag);
    gqa_expand_kernel<T><<<detail::blocks_for(total, kThreads), kThreads, 0, detail::native(stream)>>>(
        static_cast<T*>(full), static_cast<const T*>(packed), g);
    return detail::last_launch_status();
  });
}

LaunchStatus gqa_reduce(Elem elem, void* dpacked, const void* dfull, const GqaShape& shape, Stream stream) {
  if (shape.rows == 0) return 0;
  if (!valid(dpacked, dfull, shape)) return detail::invalid_argument();
  const Geometry g = geometry(shape);
  const std::int64_t total = g.rows * (g.heads + 2 * g.kv_heads) * g.head_dim;
  return detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    using T = decltype(tag);
    gqa_reduce_kernel<T><<<detail::blocks_for(total, kThreads), kThreads, 0, detail::native(stream)>>>(
        static_cast<T*>(dpacked), static_cast<const T*>(dfull), g);
    return detail::last_launch_status();
  });
}

}  // namespace zinf::kernels::cuda
