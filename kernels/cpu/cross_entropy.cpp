// CPU fused softmax + cross-entropy, forward and backward (cross_entropy.h has the formulas). One
// plain C++ body per pass, compiled as is (scalar) and inlined into AVX2 and AVX-512 functions so
// the compiler vectorises what it can (the max and the final scaling; exp() stays a library call).
// The row max is exact in any order, the exp sums go into kLanes fixed fp64 lanes (element v into
// lane v % kLanes), and the file is built with -ffp-contract=off, so the variants agree bit for bit.
#include "kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"

namespace zinf::kernels::cpu {
namespace {

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

[[gnu::always_inline]] inline RowStats row_stats(const float* row, std::size_t vocab) {
  float max = row[0];
  for (std::size_t v = 1; v < vocab; ++v) max = std::max(max, row[v]);
  double lanes[kLanes] = {};
  const std::size_t body = vocab / kLanes * kLanes;
  for (std::size_t v = 0; v < body; v += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) lanes[l] += static_cast<double>(std::exp(row[v + l] - max));
  }
  for (std::size_t v = body; v < vocab; ++v) lanes[v % kLanes] += static_cast<double>(std::exp(row[v] - max));
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
    const float target_prob = std::exp(row[target] - stats.max) * inv_sum;
    for (std::size_t v = 0; v < a.vocab; ++v) grad[v] = std::exp(row[v] - stats.max) * inv_sum * a.scale;
    grad[target] = (target_prob - 1.0f) * a.scale;
  }
}

void forward_scalar(const Args& a, double* row_losses, std::size_t begin, std::size_t end) {
  forward_rows(a, row_losses, begin, end);
}
void backward_scalar(const Args& a, std::size_t begin, std::size_t end) { backward_rows(a, begin, end); }

#if ZINF_KERNELS_X86
ZINF_TARGET_AVX2 void forward_avx2(const Args& a, double* row_losses, std::size_t begin, std::size_t end) {
  forward_rows(a, row_losses, begin, end);
}
ZINF_TARGET_AVX2 void backward_avx2(const Args& a, std::size_t begin, std::size_t end) { backward_rows(a, begin, end); }
ZINF_TARGET_AVX512 void forward_avx512(const Args& a, double* row_losses, std::size_t begin, std::size_t end) {
  forward_rows(a, row_losses, begin, end);
}
ZINF_TARGET_AVX512 void backward_avx512(const Args& a, std::size_t begin, std::size_t end) {
  backward_rows(a, begin, end);
}
#endif

}  // namespace

double cross_entropy_forward(Isa isa, float* losses, const float* logits, const std::int32_t* targets, std::size_t rows,
                             std::size_t vocab, int num_threads) {
  if (rows == 0) return 0.0;
  using Fn = void (*)(const Args&, double*, std::size_t, std::size_t);
  Fn fn = forward_scalar;
#if ZINF_KERNELS_X86
  if (isa == Isa::kAvx2) fn = forward_avx2;
  if (isa == Isa::kAvx512) fn = forward_avx512;
#else
  (void)isa;
#endif
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
  using Fn = void (*)(const Args&, std::size_t, std::size_t);
  Fn fn = backward_scalar;
#if ZINF_KERNELS_X86
  if (isa == Isa::kAvx2) fn = backward_avx2;
  if (isa == Isa::kAvx512) fn = backward_avx512;
#else
  (void)isa;
#endif
  const Args args{dlogits, logits, targets, vocab,
                  static_cast<float>(static_cast<double>(dloss) / static_cast<double>(rows))};
  const std::size_t min_rows = kMinParallelElements / std::max<std::size_t>(vocab, 1) + 1;
  parallel::for_each_range(rows, min_rows, 1, parallel::resolve_threads(num_threads),
                           [&](std::size_t begin, std::size_t end) { fn(args, begin, end); });
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
