// CPU residual add, forward and backward (residual.h has the contract). One plain C++ body per
// pass, compiled as is (scalar) and inlined into AVX2 and AVX-512 functions so the compiler
// vectorises the loop. One addition per element, so the variants agree bit for bit.
#include "kernels/residual.h"

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"

namespace zinf::kernels::cpu {
namespace {

// Below this many elements a pass runs on the calling thread.
constexpr std::size_t kMinParallelElements = std::size_t{1} << 16;
constexpr std::size_t kRangeAlign = 64;

[[gnu::always_inline]] inline void forward_range(float* out, const float* inp1, const float* inp2, std::size_t begin,
                                                 std::size_t end) {
  for (std::size_t i = begin; i < end; ++i) out[i] = inp1[i] + inp2[i];
}

[[gnu::always_inline]] inline void backward_range(float* dinp1, float* dinp2, const float* dout, std::size_t begin,
                                                  std::size_t end) {
  for (std::size_t i = begin; i < end; ++i) {
    dinp1[i] += dout[i];
    dinp2[i] += dout[i];
  }
}

void forward_scalar(float* out, const float* inp1, const float* inp2, std::size_t begin, std::size_t end) {
  forward_range(out, inp1, inp2, begin, end);
}
void backward_scalar(float* dinp1, float* dinp2, const float* dout, std::size_t begin, std::size_t end) {
  backward_range(dinp1, dinp2, dout, begin, end);
}

#if ZINF_KERNELS_X86
ZINF_TARGET_AVX2 void forward_avx2(float* out, const float* inp1, const float* inp2, std::size_t begin,
                                   std::size_t end) {
  forward_range(out, inp1, inp2, begin, end);
}
ZINF_TARGET_AVX2 void backward_avx2(float* dinp1, float* dinp2, const float* dout, std::size_t begin, std::size_t end) {
  backward_range(dinp1, dinp2, dout, begin, end);
}
ZINF_TARGET_AVX512 void forward_avx512(float* out, const float* inp1, const float* inp2, std::size_t begin,
                                       std::size_t end) {
  forward_range(out, inp1, inp2, begin, end);
}
ZINF_TARGET_AVX512 void backward_avx512(float* dinp1, float* dinp2, const float* dout, std::size_t begin,
                                        std::size_t end) {
  backward_range(dinp1, dinp2, dout, begin, end);
}
#endif

}  // namespace

void residual_forward(Isa isa, float* out, const float* inp1, const float* inp2, std::size_t n, int num_threads) {
  const auto fn = ZINF_KERNEL_VARIANT(isa, forward);
  parallel::for_each_range(n, kMinParallelElements, kRangeAlign, parallel::resolve_threads(num_threads),
                           [&](std::size_t begin, std::size_t end) { fn(out, inp1, inp2, begin, end); });
}

void residual_backward(Isa isa, float* dinp1, float* dinp2, const float* dout, std::size_t n, int num_threads) {
  const auto fn = ZINF_KERNEL_VARIANT(isa, backward);
  parallel::for_each_range(n, kMinParallelElements, kRangeAlign, parallel::resolve_threads(num_threads),
                           [&](std::size_t begin, std::size_t end) { fn(dinp1, dinp2, dout, begin, end); });
}

void residual_forward(float* out, const float* inp1, const float* inp2, std::size_t n, int num_threads) {
  residual_forward(best_isa(), out, inp1, inp2, n, num_threads);
}

void residual_backward(float* dinp1, float* dinp2, const float* dout, std::size_t n, int num_threads) {
  residual_backward(best_isa(), dinp1, dinp2, dout, n, num_threads);
}

}  // namespace zinf::kernels::cpu
