// Fused softmax + cross-entropy over the vocabulary (GPT-2's language-model loss), forward and
// backward, on raw fp32 logits. CPU variants, and the CUDA ones at the end.
//
// Dimension legend: R rows (B*T, every position of every sequence), V vocabulary size.
//
// Forward, per row r with target t = targets[r]:
//   loss[r] = logsumexp(logits[r, :]) - logits[r, t]
//           = log(sum_v exp(logits[r, v] - max)) + max - logits[r, t]
// Subtracting the row maximum first keeps every exp() in [0, 1], so logits of any finite size
// (1e4, -1e4) give a finite loss. exp() is a vectorisable fp32 polynomial approximation (Cephes'
// expf, relative error <= 2e-7; arguments below -87 give exactly 0), not the library's exp. The
// row sums are accumulated in fp64. The function returns the
// mean loss over the rows (fp64, added in row order).
// Backward, for the mean loss with upstream gradient dloss (1 for a plain loss.backward()):
//   dlogits[r, v] = (softmax(logits[r, :])[v] - (v == t ? 1 : 0)) * dloss / R
// dlogits is OVERWRITTEN (=, not +=), because logits are the last activation of the model and
// nothing else contributes to their gradient. dlogits may be the same pointer as logits (the
// gradient replaces the logits in place, saving an [R,V] buffer); otherwise the two may not overlap.
// The softmax is recomputed from the logits, so the forward pass saves nothing.
//
// Threads: rows are split into one contiguous range per OpenMP thread (`num_threads`; 0 means
// omp_get_max_threads()); every result is the same for any thread count and any variant.
//
// Preconditions (not checked): R*V elements behind logits/dlogits, R behind targets/losses,
// 0 <= targets[r] < V, V >= 1, finite logits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cuda_launch.h"

namespace zinf::kernels::cpu {

// Writes losses[r] for every row (losses may be nullptr when only the mean is wanted) and returns
// their mean (0 when rows == 0).
double cross_entropy_forward(float* losses /*[R]*/, const float* logits /*[R,V]*/, const std::int32_t* targets /*[R]*/,
                             std::size_t rows, std::size_t vocab, int num_threads = 0);

// The gradient of dloss * mean(losses) with respect to the logits, written into dlogits (see above).
void cross_entropy_backward(float* dlogits /*[R,V]*/, const float* logits /*[R,V]*/,
                            const std::int32_t* targets /*[R]*/, float dloss, std::size_t rows, std::size_t vocab,
                            int num_threads = 0);

// Both passes in one: writes the backward's dlogits and returns the forward's mean loss, the same
// bits as cross_entropy_forward then cross_entropy_backward on the same logits, in a third of the
// exps (each row's softmax is computed once, into dlogits). dlogits may be logits (in place).
double cross_entropy_forward_backward(float* dlogits /*[R,V]*/, const float* logits /*[R,V]*/,
                                      const std::int32_t* targets /*[R]*/, float dloss, std::size_t rows,
                                      std::size_t vocab, int num_threads = 0);

// One instruction-set variant on purpose, for tests and benchmarks. Precondition: isa_supported(isa).
double cross_entropy_forward(Isa isa, float* losses /*[R]*/, const float* logits /*[R,V]*/,
                             const std::int32_t* targets /*[R]*/, std::size_t rows, std::size_t vocab, int num_threads);
void cross_entropy_backward(Isa isa, float* dlogits /*[R,V]*/, const float* logits /*[R,V]*/,
                            const std::int32_t* targets /*[R]*/, float dloss, std::size_t rows, std::size_t vocab,
                            int num_threads);
double cross_entropy_forward_backward(Isa isa, float* dlogits /*[R,V]*/, const float* logits /*[R,V]*/,
                                      const std::int32_t* targets /*[R]*/, float dloss, std::size_t rows,
                                      std::size_t vocab, int num_threads);

}  // namespace zinf::kernels::cpu

namespace zinf::kernels::cuda {
// Same formulas on `elem` logits, fp32 arithmetic (expf/logf, max-subtracted, row sums in fp32).
// The forward writes every row's loss (fp32, device memory, not optional); the caller reads them
// back and forms the mean in fp64 in row order, as the CPU kernel does. The backward overwrites
// dlogits (in place allowed: dlogits == logits).
LaunchStatus cross_entropy_forward(Elem elem, float* losses /*[R]*/, const void* logits /*[R,V]*/,
                                   const std::int32_t* targets /*[R]*/, std::int64_t rows, std::int64_t vocab,
                                   Stream stream);
LaunchStatus cross_entropy_backward(Elem elem, void* dlogits /*[R,V]*/, const void* logits /*[R,V]*/,
                                    const std::int32_t* targets /*[R]*/, float dloss, std::int64_t rows,
                                    std::int64_t vocab, Stream stream);
}  // namespace zinf::kernels::cuda
