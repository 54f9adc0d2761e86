// CPU fused softmax + cross-entropy, forward and backward (cross_entropy.h has the formulas). One
// plain C++ body per pass, compiled as is (scalar) and inlined into AVX2 and AVX-512 functions so
// the compiler vectorises the whole pass: exp is simd::exp_approx_flushed (simd.h: Cephes' expf,
// relative error <= 2e-7, exactly 0 below -87), plain fp32 arithmetic rather than a library call.
// The row max is exact in any order, the exp sums go into kLanes fixed fp64 lanes (element v into
// lane v % kLanes), and the file is built with -ffp-contract=off, so the variants agree bit for bit.
#include "kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"

namespace zinf::kernels::cpu {
namespace {

using simd::exp_approx_flushed;

constexpr std::size_t kLanes = 8;
// Below this many logits a pass runs on the calling thread.
constexpr std::size_t kMinParallelElements = std::size_t{1} << 15;

struct Args {
  float* out;  // forward: losses [R] (may be nullptr); backward: dlogits [R,V]
  const float* logits;
  const std::int32_t* targets;
  std::size_t vocab;
  float scale;  // backward: dloss / R
};

// The row's maximum and sum of exp(logit - max) (fp64, in fixed lanes).
struct RowStats {
  float max;
  double sum;
};

// kLanes floats or doubles as one value (GCC vector extensions): element-wise arithmetic in every
// variant, so lane l always sees the same elements in the same order.
using FloatLanes = float __attribute__((vector_size(kLanes * sizeof(float))));
using DoubleLanes = double __attribute__((vector_size(kLanes * sizeof(double))));
// The exps of a row go through a stack buffer of this many floats (a multiple of kLanes) so the
// exp loop vectorises on its own and the fp64 lane sums read whole vectors.
constexpr std::size_t kBlock = 512;

// The row's maximum. Exact in any order (finite logits), so lanes of maxima then their maximum.
[[gnu::always_inline]] inline float row_max(const float* row, std::size_t vocab) {
  const std::size_t body = vocab / kLanes * kLanes;
  float max = row[0];
  if (body > 0) {
    FloatLanes lane_max;
    std::memcpy(&lane_max, row, sizeof(lane_max));
    for (std::size_t v = kLanes; v < body; v += kLanes) {
      FloatLanes x;
      std::memcpy(&x, row + v, sizeof(x));
      lane_max = x > lane_max ? x : lane_max;
    }
    for (std::size_t l = 0; l < kLanes; ++l) max = std::max(max, lane_max[l]);
  }
  for (std::size_t v = body; v < vocab; ++v) max = std::max(max, row[v]);
  return max;
}

[[gnu::always_inline]] inline RowStats row_stats(const float* row, std::size_t vocab) {
  const std::size_t body = vocab / kLanes * kLanes;
  const float max = row_max(row, vocab);

  DoubleLanes lanes = {};
  alignas(64) float exps[kBlock];
  for (std::size_t begin = 0; begin < body; begin += kBlock) {
    const std::size_t count = std::min(kBlock, body - begin);
    for (std::size_t i = 0; i < count; ++i) exps[i] = exp_approx_flushed(row[begin + i] - max);
    for (std::size_t i = 0; i < count; i += kLanes) {
      FloatLanes e;
      std::memcpy(&e, exps + i, sizeof(e));
      lanes += __builtin_convertvector(e, DoubleLanes);
    }
  }
  for (std::size_t v = body; v < vocab; ++v) lanes[v % kLanes] += static_cast<double>(exp_approx_flushed(row[v] - max));
  double sum = 0.0;
  for (std::size_t l = 0; l < kLanes; ++l) sum += lanes[l];
  return {max, sum};
}

[[gnu::always_inline]] inline void forward_rows(const Args& a, double* row_losses, std::size_t begin, std::size_t end) {
  for (std::size_t r = begin; r < end; ++r) {
    const float* row = a.logits + r * a.vocab;
    const RowStats stats = row_stats(row, a.vocab);
    const auto target = static_cast<std::size_t>(a.targets[r]);
    // log(sum) + max - logit[t], with max - logit[t] >= 0 exact in fp64.
    row_losses[r] = std::log(stats.sum) + (static_cast<double>(stats.max) - static_cast<double>(row[target]));
    if (a.out != nullptr) a.out[r] = static_cast<float>(row_losses[r]);
  }
}

[[gnu::always_inline]] inline void backward_rows(const Args& a, std::size_t begin, std::size_t end) {
  for (std::size_t r = begin; r < end; ++r) {
    const float* row = a.logits + r * a.vocab;
    float* grad = a.out + r * a.vocab;
    const RowStats stats = row_stats(row, a.vocab);
    const auto inv_sum = static_cast<float>(1.0 / stats.sum);
    // row and grad may be the same array: the target's logit is read before the loop overwrites it,
    // and the loop reads row[v] before it writes grad[v].
    const auto target = static_cast<std::size_t>(a.targets[r]);
    const float target_prob = exp_approx_flushed(row[target] - stats.max) * inv_sum;
    for (std::size_t v = 0; v < a.vocab; ++v) grad[v] = exp_approx_flushed(row[v] - stats.max) * inv_sum * a.scale;
    grad[target] = (target_prob - 1.0f) * a.scale;
  }
}

// The forward and the backward of each row in one pass over it: the max, then the exps written
// into grad (where the backward's recomputation would write them) and summed in the same lanes
// from there, then every exp scaled. The values and their order are row_stats' and backward_rows',
// so the loss and the gradient are the same bits as forward_rows then backward_rows, with one
// exp per logit instead of three. grad may be row (in place): the target's logit is read first.
[[gnu::always_inline]] inline void fused_rows(const Args& a, double* row_losses, std::size_t begin, std::size_t end) {
  for (std::size_t r = begin; r < end; ++r) {
    const float* row = a.logits + r * a.vocab;
    float* grad = a.out + r * a.vocab;
    const std::size_t body = a.vocab / kLanes * kLanes;
    const float max = row_max(row, a.vocab);
    const auto target = static_cast<std::size_t>(a.targets[r]);
    const double max_minus_target = static_cast<double>(max) - static_cast<double>(row[target]);

    DoubleLanes lanes = {};
    for (std::size_t v = 0; v < a.vocab; ++v) grad[v] = exp_approx_flushed(row[v] - max);
    for (std::size_t v = 0; v < body; v += kLanes) {
      FloatLanes e;
      std::memcpy(&e, grad + v, sizeof(e));
      lanes += __builtin_convertvector(e, DoubleLanes);
    }
    for (std::size_t v = body; v < a.vocab; ++v) lanes[v % kLanes] += static_cast<double>(grad[v]);
    double sum = 0.0;
    for (std::size_t l = 0; l < kLanes; ++l) sum += lanes[l];
    row_losses[r] = std::log(sum) + max_minus_target;

    const auto inv_sum = static_cast<float>(1.0 / sum);
    const float target_prob = grad[target] * inv_sum;
    for (std::size_t v = 0; v < a.vocab; ++v) grad[v] = grad[v] * inv_sum * a.scale;
    grad[target] = (target_prob - 1.0f) * a.scale;
  }
}

void forward_scalar(const Args& a, double* row_losses, std::size_t begin, std::size_t end) {
  forward_rows(a, row_losses, begin, end);
}
void backward_scalar(const Args& a, std::size_t begin, std::size_t end) { backward_rows(a, begin, end); }
void fused_scalar(const Args& a, double* row_losses, std::size_t begin, std::size_t end) {
  fused_rows(a, row_losses, begin, end);
}

#if ZINF_KERNELS_X86
ZINF_TARGET_AVX2 void forward_avx2(const Args& a, double* row_losses, std::size_t begin, std::size_t end) {
  forward_rows(a, row_losses, begin, end);
}
ZINF_TARGET_AVX2 void backward_avx2(const Args& a, std::size_t begin, std::size_t end) { backward_rows(a, begin, end); }
ZINF_TARGET_AVX2 void fused_avx2(const Args& a, double* row_losses, std::size_t begin, std::size_t end) {
  fused_rows(a, row_losses, begin, end);
}
ZINF_TARGET_AVX512 void forward_avx512(const Args& a, double* row_losses, std::size_t begin, std::size_t end) {
  forward_rows(a, row_losses, begin, end);
}
ZINF_TARGET_AVX512 void backward_avx512(const Args& a, std::size_t begin, std::size_t end) {
  backward_rows(a, begin, end);
}
ZINF_TARGET_AVX512 void fused_avx512(const Args& a, double* row_losses, std::size_t begin, std::size_t end) {
  fused_rows(a, row_losses, begin, end);
}
#endif

}  // namespace

double cross_entropy_forward(Isa isa, float* losses, const float* logits, const std::int32_t* targets, std::size_t rows,
                             std::size_t vocab, int num_threads) {
  if (rows == 0) return 0.0;
  const auto fn = ZINF_KERNEL_VARIANT(isa, forward);
  // Per-row losses in fp64, then the mean in row order: the same for any thread split.
  std::vector<double> row_losses(rows);
  const Args args{losses, logits, targets, vocab, 0.0f};
  const std::size_t min_rows = kMinParallelElements / std::max<std::size_t>(vocab, 1) + 1;
  parallel::for_each_range(rows, min_rows, 1, parallel::resolve_threads(num_threads),
                           [&](std::size_t begin, std::size_t end) { fn(args, row_losses.data(), begin, end); });
  double total = 0.0;
  for (double loss : row_losses) total += loss;
  return total / static_cast<double>(rows);
}

void cross_entropy_backward(Isa isa, float* dlogits, const float* logits, const std::int32_t* targets, float dloss,
                            std::size_t rows, std::size_t vocab, int num_threads) {
  if (rows == 0) return;
  const auto fn = ZINF_KERNEL_VARIANT(isa, backward);
  const Args args{dlogits, logits, targets, vocab,
                  static_cast<float>(static_cast<double>(dloss) / static_cast<double>(rows))};
  const std::size_t min_rows = kMinParallelElements / std::max<std::size_t>(vocab, 1) + 1;
  parallel::for_each_range(rows, min_rows, 1, parallel::resolve_threads(num_threads),
                           [&](std::size_t begin, std::size_t end) { fn(args, begin, end); });
}

double cross_entropy_forward_backward(Isa isa, float* dlogits, const float* logits, const std::int32_t* targets,
                                      float dloss, std::size_t rows, std::size_t vocab, int num_threads) {
  if (rows == 0) return 0.0;
  const auto fn = ZINF_KERNEL_VARIANT(isa, fused);
  std::vector<double> row_losses(rows);
  const Args args{dlogits, logits, targets, vocab,
                  static_cast<float>(static_cast<double>(dloss) / static_cast<double>(rows))};
  const std::size_t min_rows = kMinParallelElements / std::max<std::size_t>(vocab, 1) + 1;
  parallel::for_each_range(rows, min_rows, 1, parallel::resolve_threads(num_threads),
                           [&](std::size_t begin, std::size_t end) { fn(args, row_losses.data(), begin, end); });
  double total = 0.0;
  for (double loss : row_losses) total += loss;
  return total / static_cast<double>(rows);
}

double cross_entropy_forward_backward(float* dlogits, const float* logits, const std::int32_t* targets, float dloss,
                                      std::size_t rows, std::size_t vocab, int num_threads) {
  return cross_entropy_forward_backward(best_isa(), dlogits, logits, targets, dloss, rows, vocab, num_threads);
}

double cross_entropy_forward(float* losses, const float* logits, const std::int32_t* targets, std::size_t rows,
                             std::size_t vocab, int num_threads) {
  return cross_entropy_forward(best_isa(), losses, logits, targets, rows, vocab, num_threads);
}

void cross_entropy_backward(float* dlogits, const float* logits, const std::int32_t* targets, float dloss,
                            std::size_t rows, std::size_t vocab, int num_threads) {
  cross_entropy_backward(best_isa(), dlogits, logits, targets, dloss, rows, vocab, num_threads);
}

}  // namespace zinf::kernels::cpu
