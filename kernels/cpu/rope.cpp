// RoPE tables (HF's fp32 frequency rules) and the CPU rotation, forward and backward (rope.h has
// the formulas). The rotation is one plain C++ body compiled as is (scalar) and inlined into AVX2
// and AVX-512 functions so the compiler vectorises the pair loop; it is a multiply, a multiply and
// an add or subtract per output (no fused multiply-add: the file is built with -ffp-contract=off),
// so every variant gives the same bits, and HF's bits for HF's tables. The two halves of each
// head's rotary part are first copied into small local buffers: the compiler then knows the
// outputs alias nothing it still reads, so the in-place call (the usual one, on qkv) vectorises too.
#include "kernels/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"

namespace zinf::kernels {

std::size_t rope_rotary_dim(std::size_t head_dim, double partial_rotary_factor) {
  return static_cast<std::size_t>(static_cast<double>(head_dim) * partial_rotary_factor);
}

void rope_inv_freq(float* inv_freq, const RopeFrequencies& f) {
  const std::size_t half = f.rotary_dim / 2;
  const auto dim = static_cast<float>(f.rotary_dim);
  const auto base = static_cast<float>(f.theta);
  const auto factor = static_cast<float>(f.factor);
  for (std::size_t i = 0; i < half; ++i) {
    // 1.0 / (base ** (arange(0, dim, 2).float() / dim)): torch's rdiv is reciprocal(x) * 1.0.
    const float exponent = static_cast<float>(2 * i) / dim;
    const auto power = static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
    float inv = 1.0f / power;
    if (f.scaling == RopeScaling::kLinear) inv = inv / factor;  // inv_freq /= factor
    if (f.scaling == RopeScaling::kLlama3) {
      // _compute_llama3_parameters, operation by operation (python scalars become fp32 operands).
      const auto old_context = static_cast<float>(f.original_max_position_embeddings);
      const auto low = static_cast<float>(f.low_freq_factor);
      const auto low_freq_wavelen = static_cast<float>(f.original_max_position_embeddings / f.low_freq_factor);
      const auto high_freq_wavelen = static_cast<float>(f.original_max_position_embeddings / f.high_freq_factor);
      const float wavelen = (1.0f / inv) * static_cast<float>(2.0 * std::numbers::pi);
      const float inv_llama = wavelen > low_freq_wavelen ? inv / factor : inv;
      const float smooth =
          ((1.0f / wavelen) * old_context - low) / static_cast<float>(f.high_freq_factor - f.low_freq_factor);
      const float smoothed = (1.0f - smooth) * inv_llama / factor + smooth * inv_llama;
      const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
      inv = medium ? smoothed : inv_llama;
    }
    inv_freq[i] = inv;
  }
}

void rope_tables(float* cos, float* sin, const float* inv_freq, std::size_t half, std::size_t positions) {
  for (std::size_t p = 0; p < positions; ++p) {
    for (std::size_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inv_freq[i];
      cos[p * half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin[p * half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
}

namespace cpu {
namespace {

// Below this many rotated elements a pass runs on the calling thread.
constexpr std::size_t kMinParallelElements = std::size_t{1} << 15;
// Pairs per local chunk: the two halves are staged in 2 x 256 bytes.
constexpr std::size_t kChunk = 64;

struct Args {
  float* out;
  const float* inp;
  const float* cos;
  const float* sin;
  RopeShape shape;
};

// Rotates rows [begin, end) by +theta (forward) or -theta (backward: the forward with sin negated,
// written out so that each output is still two products and one add or subtract).
template <bool kForward>
[[gnu::always_inline]] inline void rotate_rows(const Args& a, std::size_t begin, std::size_t end) {
  const RopeShape& s = a.shape;
  const std::size_t half = s.rotary_dim / 2;
  for (std::size_t row = begin; row < end; ++row) {
    const std::size_t position = s.pos_offset + row % s.seq_len;
    const float* cos_row = a.cos + position * half;
    const float* sin_row = a.sin + position * half;
    for (std::size_t head = 0; head < s.heads; ++head) {
      const std::size_t offset = row * s.row_stride + head * s.head_dim;
      const float* x = a.inp + offset;
      float* y = a.out + offset;
      for (std::size_t chunk = 0; chunk < half; chunk += kChunk) {
        const std::size_t n = std::min(kChunk, half - chunk);
        float x1[kChunk];
        float x2[kChunk];
        for (std::size_t i = 0; i < n; ++i) x1[i] = x[chunk + i];
        for (std::size_t i = 0; i < n; ++i) x2[i] = x[half + chunk + i];
        const float* c = cos_row + chunk;
        const float* sn = sin_row + chunk;
        for (std::size_t i = 0; i < n; ++i) {
          if constexpr (kForward) {
            y[chunk + i] = x1[i] * c[i] - x2[i] * sn[i];
            y[half + chunk + i] = x2[i] * c[i] + x1[i] * sn[i];
          } else {
            y[chunk + i] = x1[i] * c[i] + x2[i] * sn[i];
            y[half + chunk + i] = x2[i] * c[i] - x1[i] * sn[i];
          }
        }
      }
      if (y != x) {
        for (std::size_t i = s.rotary_dim; i < s.head_dim; ++i) y[i] = x[i];
      }
    }
  }
}

void forward_scalar(const Args& a, std::size_t begin, std::size_t end) { rotate_rows<true>(a, begin, end); }
void backward_scalar(const Args& a, std::size_t begin, std::size_t end) { rotate_rows<false>(a, begin, end); }

#if ZINF_KERNELS_X86
ZINF_TARGET_AVX2 void forward_avx2(const Args& a, std::size_t begin, std::size_t end) {
  rotate_rows<true>(a, begin, end);
}
ZINF_TARGET_AVX2 void backward_avx2(const Args& a, std::size_t begin, std::size_t end) {
  rotate_rows<false>(a, begin, end);
}
ZINF_TARGET_AVX512 void forward_avx512(const Args& a, std::size_t begin, std::size_t end) {
  rotate_rows<true>(a, begin, end);
}
ZINF_TARGET_AVX512 void backward_avx512(const Args& a, std::size_t begin, std::size_t end) {
  rotate_rows<false>(a, begin, end);
}
#endif

template <typename Fn>
void run(Fn fn, float* out, const float* inp, const float* cos, const float* sin, const RopeShape& shape,
         int num_threads) {
  const std::size_t rows = shape.batch * shape.seq_len;
  if (rows == 0 || shape.heads == 0) return;
  const Args args{out, inp, cos, sin, shape};
  const std::size_t per_row = std::max<std::size_t>(shape.heads * shape.head_dim, 1);
  const std::size_t min_rows = kMinParallelElements / per_row + 1;
  parallel::for_each_range(rows, min_rows, 1, parallel::resolve_threads(num_threads),
                           [&](std::size_t begin, std::size_t end) { fn(args, begin, end); });
}

}  // namespace

void rope_forward(Isa isa, float* out, const float* inp, const float* cos, const float* sin, const RopeShape& shape,
                  int num_threads) {
  run(ZINF_KERNEL_VARIANT(isa, forward), out, inp, cos, sin, shape, num_threads);
}

void rope_backward(Isa isa, float* dinp, const float* dout, const float* cos, const float* sin, const RopeShape& shape,
                   int num_threads) {
  run(ZINF_KERNEL_VARIANT(isa, backward), dinp, dout, cos, sin, shape, num_threads);
}

void rope_forward(float* out, const float* inp, const float* cos, const float* sin, const RopeShape& shape,
                  int num_threads) {
  rope_forward(best_isa(), out, inp, cos, sin, shape, num_threads);
}

void rope_backward(float* dinp, const float* dout, const float* cos, const float* sin, const RopeShape& shape,
                   int num_threads) {
  rope_backward(best_isa(), dinp, dout, cos, sin, shape, num_threads);
}

}  // namespace cpu
}  // namespace zinf::kernels
