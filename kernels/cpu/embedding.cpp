// CPU token + position embedding, forward and backward (embedding.h has the formulas and the
// threading contract). One plain C++ body per pass, compiled as is (scalar) and inlined into AVX2
// and AVX-512 functions so the compiler vectorises the channel loops. Only additions, in the same
// order in every variant, so the variants agree bit for bit.
#include "kernels/embedding.h"

#include <algorithm>
#include <cstdint>
#include <limits>

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
  float* out;        // forward: out [B,T,C]; backward: dwte rows [rows,C]
  float* dwpe;       // backward only; null: not accumulated
  const float* in;   // forward: wte rows; backward: dout
  const float* wpe;  // forward only
  const std::int32_t* tokens;
  std::size_t seq_len;
  std::size_t channels;
  std::size_t row_begin;  // the table rows [row_begin, row_begin + rows) that `in`/`out` hold
  std::size_t rows;
};

// The row of `token` in the range, or `rows` when it lies outside. Unsigned wrap-around makes a
// token below row_begin huge, so one comparison covers both sides.
[[gnu::always_inline]] inline std::size_t row_of(const Args& a, std::int32_t token) {
  const std::size_t row = static_cast<std::size_t>(token) - a.row_begin;
  return row < a.rows ? row : a.rows;
}

// Positions [begin, end) of the flattened [B*T].
[[gnu::always_inline]] inline void forward_positions(const Args& a, std::size_t begin, std::size_t end) {
  const std::size_t c_count = a.channels;
  for (std::size_t i = begin; i < end; ++i) {
    const std::size_t row = row_of(a, a.tokens[i]);
    if (row == a.rows) continue;
    const float* token_row = a.in + row * c_count;
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
    const std::size_t row = row_of(a, a.tokens[i]);
    if (row != a.rows) {
      float* dtoken = a.out + row * c_count;
      for (std::size_t c = begin; c < end; ++c) dtoken[c] += dy[c];
    }
    if (a.dwpe != nullptr) {
      float* dposition = a.dwpe + (i % a.seq_len) * c_count;
      for (std::size_t c = begin; c < end; ++c) dposition[c] += dy[c];
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

void run_forward(Isa isa, const Args& args, std::size_t positions, int num_threads) {
  const auto fn = ZINF_KERNEL_VARIANT(isa, forward);
  const std::size_t min_positions = kMinParallelElements / std::max<std::size_t>(args.channels, 1) + 1;
  parallel::for_each_range(positions, min_positions, 1, parallel::resolve_threads(num_threads),
                           [&](std::size_t begin, std::size_t end) { fn(args, begin, end); });
}

void run_backward(Isa isa, const Args& args, std::size_t positions, int num_threads) {
  const auto fn = ZINF_KERNEL_VARIANT(isa, backward);
  if (positions == 0) return;
  const int threads = positions * args.channels < kMinParallelElements ? 1 : parallel::resolve_threads(num_threads);
  parallel::for_each_range(args.channels, 2, kChannelAlign, threads,
                           [&](std::size_t begin, std::size_t end) { fn(args, positions, begin, end); });
}

// The whole table: every token id is a row of it.
constexpr std::size_t kAllRows = static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()) + 1;

}  // namespace

void embedding_forward(Isa isa, float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                       std::size_t batch, std::size_t seq_len, std::size_t channels, int num_threads) {
  run_forward(isa, Args{out, nullptr, wte, wpe, tokens, seq_len, channels, 0, kAllRows}, batch * seq_len, num_threads);
}

void embedding_backward(Isa isa, float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                        std::size_t batch, std::size_t seq_len, std::size_t channels, int num_threads) {
  run_backward(isa, Args{dwte, dwpe, dout, nullptr, tokens, seq_len, channels, 0, kAllRows}, batch * seq_len,
               num_threads);
}

void embedding_forward_rows(float* out, const std::int32_t* tokens, const float* wte_rows, std::size_t row_begin,
                            std::size_t rows, const float* wpe, std::size_t batch, std::size_t seq_len,
                            std::size_t channels, int num_threads) {
  run_forward(best_isa(), Args{out, nullptr, wte_rows, wpe, tokens, seq_len, channels, row_begin, rows},
              batch * seq_len, num_threads);
}

void embedding_backward_rows(float* dwte_rows, std::size_t row_begin, std::size_t rows, float* dwpe, const float* dout,
                             const std::int32_t* tokens, std::size_t batch, std::size_t seq_len, std::size_t channels,
                             int num_threads) {
  run_backward(best_isa(), Args{dwte_rows, dwpe, dout, nullptr, tokens, seq_len, channels, row_begin, rows},
               batch * seq_len, num_threads);
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
