// CPU token + position embedding, forward and backward (embedding.h has the formulas and the
// threading contract). One plain C++ body per pass, compiled as is (scalar) and inlined into AVX2
// and AVX-512 functions so the compiler vectorises the channel loops. Only additions, in the same
// order in every variant, so the variants agree bit for bit.
#include "kernels/embedding.h"

#include <algorithm>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"

namespace zinf::kernels::cpu {
namespace {

// Below this many elements (B*T*C) a pass runs on the calling thread.
constexpr std::size_t kMinParallelElements = std::size_t{1} << 15;
// Channel ranges of the backward pass start at multiples of this (64 B of fp32: a cache line, so
// two threads never write the same line of a gradient row).
constexpr std::size_t kChannelAlign = 16;

struct Args {
  float* out;        // forward: out [B,T,C]; backward: dwte [V,C]
  float* dwpe;       // backward only
  const float* in;   // forward: wte; backward: dout
  const float* wpe;  // forward only
  const std::int32_t* tokens;
  std::size_t seq_len;
  std::size_t channels;
};

// Positions [begin, end) of the flattened [B*T].
[[gnu::always_inline]] inline void forward_positions(const Args& a, std::size_t begin, std::size_t end) {
  const std::size_t c_count = a.channels;
  for (std::size_t i = begin; i < end; ++i) {
    const float* token_row = a.in + static_cast<std::size_t>(a.tokens[i]) * c_count;
    const float* position_row = a.wpe + (i % a.seq_len) * c_count;
    float* y = a.out + i * c_count;
    for (std::size_t c = 0; c < c_count; ++c) y[c] = token_row[c] + position_row[c];
  }
}

// Channels [begin, end) of every position, in order.
[[gnu::always_inline]] inline void backward_channels(const Args& a, std::size_t positions, std::size_t begin,
                                                     std::size_t end) {
  const std::size_t c_count = a.channels;
  for (std::size_t i = 0; i < positions; ++i) {
    const float* dy = a.in + i * c_count;
    float* dtoken = a.out + static_cast<std::size_t>(a.tokens[i]) * c_count;
    float* dposition = a.dwpe + (i % a.seq_len) * c_count;
    for (std::size_t c = begin; c < end; ++c) {
      dtoken[c] += dy[c];
      dposition[c] += dy[c];
    }
  }
}

void forward_scalar(const Args& a, std::size_t begin, std::size_t end) { forward_positions(a, begin, end); }
void backward_scalar(const Args& a, std::size_t positions, std::size_t begin, std::size_t end) {
  backward_channels(a, positions, begin, end);
}

#if ZINF_KERNELS_X86
ZINF_TARGET_AVX2 void forward_avx2(const Args& a, std::size_t begin, std::size_t end) {
  forward_positions(a, begin, end);
}
ZINF_TARGET_AVX2 void backward_avx2(const Args& a, std::size_t positions, std::size_t begin, std::size_t end) {
  backward_channels(a, positions, begin, end);
}
ZINF_TARGET_AVX512 void forward_avx512(const Args& a, std::size_t begin, std::size_t end) {
  forward_positions(a, begin, end);
}
ZINF_TARGET_AVX512 void backward_avx512(const Args& a, std::size_t positions, std::size_t begin, std::size_t end) {
  backward_channels(a, positions, begin, end);
}
#endif

}  // namespace

void embedding_forward(Isa isa, float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                       std::size_t batch, std::size_t seq_len, std::size_t channels, int num_threads) {
  const auto fn = ZINF_KERNEL_VARIANT(isa, forward);
  const Args args{out, nullptr, wte, wpe, tokens, seq_len, channels};
  const std::size_t min_positions = kMinParallelElements / std::max<std::size_t>(channels, 1) + 1;
  parallel::for_each_range(batch * seq_len, min_positions, 1, parallel::resolve_threads(num_threads),
                           [&](std::size_t begin, std::size_t end) { fn(args, begin, end); });
}

void embedding_backward(Isa isa, float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                        std::size_t batch, std::size_t seq_len, std::size_t channels, int num_threads) {
  const auto fn = ZINF_KERNEL_VARIANT(isa, backward);
  const std::size_t positions = batch * seq_len;
  if (positions == 0) return;
  const Args args{dwte, dwpe, dout, nullptr, tokens, seq_len, channels};
  const int threads = positions * channels < kMinParallelElements ? 1 : parallel::resolve_threads(num_threads);
  parallel::for_each_range(channels, 2, kChannelAlign, threads,
                           [&](std::size_t begin, std::size_t end) { fn(args, positions, begin, end); });
}

void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, std::size_t batch,
                       std::size_t seq_len, std::size_t channels, int num_threads) {
  embedding_forward(best_isa(), out, tokens, wte, wpe, batch, seq_len, channels, num_threads);
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, std::size_t batch,
                        std::size_t seq_len, std::size_t channels, int num_threads) {
  embedding_backward(best_isa(), dwte, dwpe, dout, tokens, batch, seq_len, channels, num_threads);
}

}  // namespace zinf::kernels::cpu
