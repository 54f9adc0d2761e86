// CUDA RoPE rotation (kernels/rope.h), forward and backward, on `elem` heads with fp32 cos/sin
// tables. One block per row, its threads over (head, pair), plus, when out != inp, one per
// pass-through element (dimensions rd..hd-1). The arithmetic is the CPU's, operation for operation,
// with explicitly rounded intrinsics (__fmul_rn, __fadd_rn, __fsub_rn) so nvcc fuses nothing: fp32
// results equal the CPU's bit for bit; 16-bit results are that fp32 value rounded once.
// In place is safe: each thread reads its pair's two elements before writing them.
#include <cstdint>

#include "kernels/cuda/elem.cuh"
#include "kernels/rope.h"

namespace zinf::kernels::cuda {
namespace {

constexpr int kThreads = 256;

struct Geometry {
  std::int64_t rows;
  std::int64_t seq_len;
  std::int64_t row_stride;
  std::int64_t heads;
  std::int64_t head_dim;
  std::int64_t half;
  std::int64_t pass;  // elements per head copied (0 in place)
  std::int64_t pos_offset;
};

template <typename T, bool kForward>
__global__ void __launch_bounds__(kThreads)
    rope_kernel(T* out, const T* inp, const float* __restrict__ cos, const float* __restrict__ sin, Geometry g) {
  // A block per row (a grid-stride loop over rows): the row's position and addresses are computed
  // once, and its (head, pair) split is 32-bit (launch() checks that it fits). With a 64-bit
  // division and modulo per element over the whole tensor this kernel moved 0.28 of the HBM
  // bandwidth on an H200: index arithmetic, not memory, was its bound.
  const int half = static_cast<int>(g.half);
  const int per_head = static_cast<int>(g.half + g.pass);
  const int work = static_cast<int>(g.heads) * per_head;
  for (std::int64_t row = blockIdx.x; row < g.rows; row += gridDim.x) {
    const std::int64_t position = g.pos_offset + row % g.seq_len;
    const float* row_cos = cos + position * g.half;
    const float* row_sin = sin + position * g.half;
    for (int t = static_cast<int>(threadIdx.x); t < work; t += static_cast<int>(blockDim.x)) {
      const int head = t / per_head;
      const int j = t - head * per_head;
      const std::int64_t offset = row * g.row_stride + static_cast<std::int64_t>(head) * g.head_dim;
      if (j >= half) {  // pass-through dimension 2*half + (j - half)
        const std::int64_t d = half + j;
        out[offset + d] = inp[offset + d];
        continue;
      }
      const float c = row_cos[j];
      const float s = row_sin[j];
      const float x1 = detail::to_f32(inp[offset + j]);
      const float x2 = detail::to_f32(inp[offset + g.half + j]);
      float y1;
      float y2;
      if (kForward) {
        y1 = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
        y2 = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
      } else {
        y1 = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
        y2 = __fsub_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
      }
      out[offset + j] = detail::from_f32<T>(y1);
      out[offset + half + j] = detail::from_f32<T>(y2);
    }
  }
}

template <bool kForward>
LaunchStatus launch(Elem elem, void* out, const void* inp, const float* cos, const float* sin,
                    const cpu::RopeShape& shape, Stream stream) {
  const std::int64_t rows = static_cast<std::int64_t>(shape.batch) * static_cast<std::int64_t>(shape.seq_len);
  if (rows == 0 || shape.heads == 0) return 0;
  if (out == nullptr || inp == nullptr || cos == nullptr || sin == nullptr || shape.rotary_dim < 2 ||
      shape.rotary_dim % 2 != 0 || shape.rotary_dim > shape.head_dim) {
    return detail::invalid_argument();
  }
  const Geometry g{rows,
                   static_cast<std::int64_t>(shape.seq_len),
                   static_cast<std::int64_t>(shape.row_stride),
                   static_cast<std::int64_t>(shape.heads),
                   static_cast<std::int64_t>(shape.head_dim),
                   static_cast<std::int64_t>(shape.rotary_dim / 2),
                   out == inp ? 0 : static_cast<std::int64_t>(shape.head_dim - shape.rotary_dim),
                   static_cast<std::int64_t>(shape.pos_offset)};
  if (g.heads * (g.half + g.pass) > INT32_MAX) return detail::invalid_argument();  // the kernel's 32-bit split
  return detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    using T = decltype(tag);
    rope_kernel<T, kForward><<<detail::blocks_for(g.rows, 1), kThreads, 0, detail::native(stream)>>>(
        static_cast<T*>(out), static_cast<const T*>(inp), cos, sin, g);
    return detail::last_launch_status();
  });
}

}  // namespace

LaunchStatus rope_forward(Elem elem, void* out, const void* inp, const float* cos, const float* sin,
                          const cpu::RopeShape& shape, Stream stream) {
  return launch<true>(elem, out, inp, cos, sin, shape, stream);
}

LaunchStatus rope_backward(Elem elem, void* dinp, const void* dout, const float* cos, const float* sin,
                           const cpu::RopeShape& shape, Stream stream) {
  return launch<false>(elem, dinp, dout, cos, sin, shape, stream);
}

}  // namespace zinf::kernels::cuda
