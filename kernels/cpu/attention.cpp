// CPU causal multi-head self-attention, forward and backward (attention.h has the formulas). One
// plain C++ body per pass, compiled as is (scalar) and inlined into AVX2 and AVX-512 functions so
// the compiler vectorises the head-sized loops (dot products and multiply-adds over hs; exp() stays
// a library call). Dot products go into kLanes fixed fp32 lanes (element d into lane d % kLanes,
// lanes added in order), so they vectorise without reassociation; the file is built with
// -ffp-contract=off, so no variant fuses a multiply-add the others do not, and all agree bit for bit.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"

namespace zinf::kernels::cpu {
namespace {

constexpr std::size_t kLanes = 8;
// Below this much work (about B * T * T * C / 2 multiply-adds) a pass runs on the calling thread.
constexpr std::size_t kMinParallelWork = std::size_t{1} << 15;

struct Shape {
  std::size_t batch;
  std::size_t seq_len;
  std::size_t channels;
  std::size_t heads;
  std::size_t head_size;
  float scale;
};

struct ForwardArgs {
  float* out;
  float* lse;
  const float* qkv;
  Shape shape;
};

struct BackwardArgs {
  float* dqkv;
  const float* dout;
  const float* qkv;
  const float* out;
  const float* lse;
  Shape shape;
};

[[gnu::always_inline]] inline float dot(const float* a, const float* b, std::size_t n) {
  float lanes[kLanes] = {};
  const std::size_t body = n / kLanes * kLanes;
  for (std::size_t d = 0; d < body; d += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) lanes[l] += a[d + l] * b[d + l];
  }
  for (std::size_t d = body; d < n; ++d) lanes[d % kLanes] += a[d] * b[d];
  float total = 0.0f;
  for (std::size_t l = 0; l < kLanes; ++l) total += lanes[l];
  return total;
}

// out and lse for the (batch, head) pairs [begin, end). acc is scratch of hs floats.
[[gnu::always_inline]] inline void forward_pairs(const ForwardArgs& a, float* acc, std::size_t begin, std::size_t end) {
  const Shape& s = a.shape;
  const std::size_t hs = s.head_size;
  const std::size_t row = 3 * s.channels;
  for (std::size_t pair = begin; pair < end; ++pair) {
    const std::size_t b = pair / s.heads;
    const std::size_t h = pair % s.heads;
    const float* base = a.qkv + b * s.seq_len * row + h * hs;
    for (std::size_t t = 0; t < s.seq_len; ++t) {
      const float* q = base + t * row;
      // Online softmax: running maximum `max`, running sum `sum` of exp(score - max), and acc the
      // matching exp-weighted sum of v rows; both rescaled when the maximum grows.
      float max = 0.0f;
      float sum = 0.0f;
      for (std::size_t t2 = 0; t2 <= t; ++t2) {
        const float* k = base + t2 * row + s.channels;
        const float* v = base + t2 * row + 2 * s.channels;
        const float score = dot(q, k, hs) * s.scale;
        if (t2 == 0) {
          max = score;
          sum = 1.0f;
          for (std::size_t d = 0; d < hs; ++d) acc[d] = v[d];
        } else if (score > max) {
          const float correction = std::exp(max - score);
          max = score;
          sum = sum * correction + 1.0f;
          for (std::size_t d = 0; d < hs; ++d) acc[d] = acc[d] * correction + v[d];
        } else {
          const float p = std::exp(score - max);
          sum += p;
          for (std::size_t d = 0; d < hs; ++d) acc[d] += p * v[d];
        }
      }
      const float inv_sum = 1.0f / sum;
      float* o = a.out + (b * s.seq_len + t) * s.channels + h * hs;
      for (std::size_t d = 0; d < hs; ++d) o[d] = acc[d] * inv_sum;
      if (a.lse != nullptr) a.lse[pair * s.seq_len + t] = max + std::log(sum);
    }
  }
}

// dqkv for the (batch, head) pairs [begin, end). scratch holds (2 * T + 1) * hs floats: dk and dv
// of the pair's T key positions, and dq of one query position. Each is summed in fixed order and
// added to dqkv once.
[[gnu::always_inline]] inline void backward_pairs(const BackwardArgs& a, float* scratch, std::size_t begin,
                                                  std::size_t end) {
  const Shape& s = a.shape;
  const std::size_t hs = s.head_size;
  const std::size_t row = 3 * s.channels;
  float* dk = scratch;
  float* dv = scratch + s.seq_len * hs;
  float* dq = scratch + 2 * s.seq_len * hs;
  for (std::size_t pair = begin; pair < end; ++pair) {
    const std::size_t b = pair / s.heads;
    const std::size_t h = pair % s.heads;
    const float* base = a.qkv + b * s.seq_len * row + h * hs;
    float* dbase = a.dqkv + b * s.seq_len * row + h * hs;
    std::fill(dk, dk + 2 * s.seq_len * hs, 0.0f);
    for (std::size_t t = 0; t < s.seq_len; ++t) {
      const float* q = base + t * row;
      const float* o = a.out + (b * s.seq_len + t) * s.channels + h * hs;
      const float* dy = a.dout + (b * s.seq_len + t) * s.channels + h * hs;
      const float lse = a.lse[pair * s.seq_len + t];
      const float delta = dot(dy, o, hs);
      std::fill(dq, dq + hs, 0.0f);
      for (std::size_t t2 = 0; t2 <= t; ++t2) {
        const float* k = base + t2 * row + s.channels;
        const float* v = base + t2 * row + 2 * s.channels;
        const float p = std::exp(dot(q, k, hs) * s.scale - lse);
        // The score's gradient, times the scale that maps it back to the q.k product.
        const float dscore = p * (dot(dy, v, hs) - delta) * s.scale;
        float* dk_row = dk + t2 * hs;
        float* dv_row = dv + t2 * hs;
        for (std::size_t d = 0; d < hs; ++d) {
          dq[d] += dscore * k[d];
          dk_row[d] += dscore * q[d];
          dv_row[d] += p * dy[d];
        }
      }
      float* dq_out = dbase + t * row;
      for (std::size_t d = 0; d < hs; ++d) dq_out[d] += dq[d];
    }
    for (std::size_t t = 0; t < s.seq_len; ++t) {
      float* dk_out = dbase + t * row + s.channels;
      float* dv_out = dbase + t * row + 2 * s.channels;
      for (std::size_t d = 0; d < hs; ++d) {
        dk_out[d] += dk[t * hs + d];
        dv_out[d] += dv[t * hs + d];
      }
    }
  }
}

void forward_scalar(const ForwardArgs& a, float* acc, std::size_t begin, std::size_t end) {
  forward_pairs(a, acc, begin, end);
}
void backward_scalar(const BackwardArgs& a, float* scratch, std::size_t begin, std::size_t end) {
  backward_pairs(a, scratch, begin, end);
}

#if ZINF_KERNELS_X86
ZINF_TARGET_AVX2 void forward_avx2(const ForwardArgs& a, float* acc, std::size_t begin, std::size_t end) {
  forward_pairs(a, acc, begin, end);
}
ZINF_TARGET_AVX2 void backward_avx2(const BackwardArgs& a, float* scratch, std::size_t begin, std::size_t end) {
  backward_pairs(a, scratch, begin, end);
}
ZINF_TARGET_AVX512 void forward_avx512(const ForwardArgs& a, float* acc, std::size_t begin, std::size_t end) {
  forward_pairs(a, acc, begin, end);
}
ZINF_TARGET_AVX512 void backward_avx512(const BackwardArgs& a, float* scratch, std::size_t begin, std::size_t end) {
  backward_pairs(a, scratch, begin, end);
}
#endif

Shape make_shape(std::size_t batch, std::size_t seq_len, std::size_t channels, std::size_t heads) {
  const std::size_t head_size = channels / heads;
  return {batch, seq_len,   channels,
          heads, head_size, static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_size)))};
}

// The thread count for a pass over `shape`: one thread when the work is too small to split.
int pass_threads(const Shape& shape, int num_threads) {
  const std::size_t work = shape.batch * shape.seq_len * shape.seq_len * shape.channels / 2;
  return work < kMinParallelWork ? 1 : parallel::resolve_threads(num_threads);
}

}  // namespace

void attention_forward(Isa isa, float* out, float* lse, const float* qkv, std::size_t batch, std::size_t seq_len,
                       std::size_t channels, std::size_t heads, int num_threads) {
  const auto fn = ZINF_KERNEL_VARIANT(isa, forward);
  const ForwardArgs args{out, lse, qkv, make_shape(batch, seq_len, channels, heads)};
  parallel::for_each_range(batch * heads, 2, 1, pass_threads(args.shape, num_threads),
                           [&](std::size_t begin, std::size_t end) {
                             std::vector<float> acc(args.shape.head_size);
                             fn(args, acc.data(), begin, end);
                           });
}

void attention_backward(Isa isa, float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                        std::size_t batch, std::size_t seq_len, std::size_t channels, std::size_t heads,
                        int num_threads) {
  const auto fn = ZINF_KERNEL_VARIANT(isa, backward);
  const BackwardArgs args{dqkv, dout, qkv, out, lse, make_shape(batch, seq_len, channels, heads)};
  parallel::for_each_range(batch * heads, 2, 1, pass_threads(args.shape, num_threads),
                           [&](std::size_t begin, std::size_t end) {
                             std::vector<float> scratch((2 * args.shape.seq_len + 1) * args.shape.head_size);
                             fn(args, scratch.data(), begin, end);
                           });
}

void attention_forward(float* out, float* lse, const float* qkv, std::size_t batch, std::size_t seq_len,
                       std::size_t channels, std::size_t heads, int num_threads) {
  attention_forward(best_isa(), out, lse, qkv, batch, seq_len, channels, heads, num_threads);
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                        std::size_t batch, std::size_t seq_len, std::size_t channels, std::size_t heads,
                        int num_threads) {
  attention_backward(best_isa(), dqkv, dout, qkv, out, lse, batch, seq_len, channels, heads, num_threads);
}

}  // namespace zinf::kernels::cpu
