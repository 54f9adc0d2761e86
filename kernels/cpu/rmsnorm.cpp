// CPU RMS normalisation, forward and backward (rmsnorm.h has the formulas). Built like
// layernorm.cpp: one plain C++ body per pass, compiled as is (scalar) and inlined into AVX2 and
// AVX-512 functions so the compiler vectorises its loops for that instruction set. Row sums go into
// kLanes fixed fp64 lanes (element c into lane c % kLanes, lanes added in order): the loops
// vectorise without reassociation, so every variant gives the same bits (the file is built with
// -ffp-contract=off, so no variant fuses a multiply-add the others do not).
#include "kernels/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"

namespace zinf::kernels::cpu {
namespace {

constexpr std::size_t kLanes = 8;
// Below this many elements (rows * channels) a pass runs on the calling thread.
constexpr std::size_t kMinParallelElements = std::size_t{1} << 15;
// The backward sums dweight over blocks of rows, then adds the blocks' sums in order. A block is
// rows / kMinBlocks rows, at least 1 and at most kMaxRowBlock: a function of the shape alone, not
// of the thread count, so neither are the bits; at least kMinBlocks blocks (when there are that many
// rows) for the threads to share; and a block's partial sums (8C bytes) stay in L1/L2 while its rows
// stream past.
constexpr std::size_t kMinBlocks = 16;
constexpr std::size_t kMaxRowBlock = 64;

std::size_t row_block(std::size_t rows) { return std::clamp<std::size_t>(rows / kMinBlocks, 1, kMaxRowBlock); }

struct ForwardArgs {
  float* out;
  float* rstd;
  const float* inp;
  const float* weight;
  std::size_t channels;
  float eps;
};

struct BackwardArgs {
  float* dinp;
  float* dweight;
  double* partials;  // [ceil(rows / row_block), channels]
  std::size_t row_block;
  const float* dout;
  const float* inp;
  const float* weight;
  const float* rstd;
  std::size_t rows;
  std::size_t channels;
};

[[gnu::always_inline]] inline double add_lanes(const double* lanes) {
  double total = 0.0;
  for (std::size_t lane = 0; lane < kLanes; ++lane) total += lanes[lane];
  return total;
}

[[gnu::always_inline]] inline void forward_rows(const ForwardArgs& a, std::size_t begin, std::size_t end) {
  const std::size_t c_count = a.channels;
  const std::size_t c_body = c_count / kLanes * kLanes;
  for (std::size_t r = begin; r < end; ++r) {
    const float* x = a.inp + r * c_count;
    double lanes[kLanes] = {};
    for (std::size_t c = 0; c < c_body; c += kLanes) {
      for (std::size_t l = 0; l < kLanes; ++l) {
        const auto v = static_cast<double>(x[c + l]);
        lanes[l] += v * v;
      }
    }
    for (std::size_t c = c_body; c < c_count; ++c) {
      const auto v = static_cast<double>(x[c]);
      lanes[c % kLanes] += v * v;
    }
    const double mean_square = add_lanes(lanes) / static_cast<double>(c_count);
    const auto rstd = static_cast<float>(1.0 / std::sqrt(mean_square + static_cast<double>(a.eps)));
    float* y = a.out + r * c_count;
    for (std::size_t c = 0; c < c_count; ++c) y[c] = (x[c] * rstd) * a.weight[c];
    if (a.rstd != nullptr) a.rstd[r] = rstd;
  }
}

// One pass over rows [begin, end) of the blocks [block_begin, block_end): dinp, and each block's
// dweight partial sums (fp64, one per channel, written to a.partials + block * channels). A row's x
// and dout are read twice, the second time from L1/L2 (a row is 2 x 4C bytes), so x and dout cross
// the memory bus once.
[[gnu::always_inline]] inline void backward_blocks(const BackwardArgs& a, std::size_t block_begin,
                                                   std::size_t block_end) {
  const std::size_t c_count = a.channels;
  const std::size_t c_body = c_count / kLanes * kLanes;
  for (std::size_t block = block_begin; block < block_end; ++block) {
    double* dw = a.partials + block * c_count;
    for (std::size_t c = 0; c < c_count; ++c) dw[c] = 0.0;
    const std::size_t row_end = std::min(a.rows, (block + 1) * a.row_block);
    for (std::size_t r = block * a.row_block; r < row_end; ++r) {
      const float* x = a.inp + r * c_count;
      const float* dy = a.dout + r * c_count;
      float* dx = a.dinp + r * c_count;
      const float rstd = a.rstd[r];
      double lanes[kLanes] = {};
      for (std::size_t c = 0; c < c_body; c += kLanes) {
        for (std::size_t l = 0; l < kLanes; ++l) {
          const float norm = x[c + l] * rstd;
          const float dnorm = dy[c + l] * a.weight[c + l];
          lanes[l] += static_cast<double>(dnorm) * static_cast<double>(norm);
        }
      }
      for (std::size_t c = c_body; c < c_count; ++c) {
        const float norm = x[c] * rstd;
        const float dnorm = dy[c] * a.weight[c];
        lanes[c % kLanes] += static_cast<double>(dnorm) * static_cast<double>(norm);
      }
      const auto dnorm_norm_mean = static_cast<float>(add_lanes(lanes) / static_cast<double>(c_count));
      for (std::size_t c = 0; c < c_count; ++c) {
        const float norm = x[c] * rstd;
        const float dnorm = dy[c] * a.weight[c];
        dx[c] += rstd * (dnorm - norm * dnorm_norm_mean);
        dw[c] += static_cast<double>(dy[c]) * static_cast<double>(norm);
      }
    }
  }
}

// dweight for channels [begin, end): the blocks' partial sums added in block order, in fp64.
[[gnu::always_inline]] inline void reduce_channels(const BackwardArgs& a, std::size_t begin, std::size_t end) {
  const std::size_t blocks = (a.rows + a.row_block - 1) / a.row_block;
  for (std::size_t c = begin; c < end; ++c) {
    double sum = 0.0;
    for (std::size_t block = 0; block < blocks; ++block) sum += a.partials[block * a.channels + c];
    a.dweight[c] += static_cast<float>(sum);
  }
}

void forward_rows_scalar(const ForwardArgs& a, std::size_t begin, std::size_t end) { forward_rows(a, begin, end); }
void backward_blocks_scalar(const BackwardArgs& a, std::size_t begin, std::size_t end) {
  backward_blocks(a, begin, end);
}
void reduce_channels_scalar(const BackwardArgs& a, std::size_t begin, std::size_t end) {
  reduce_channels(a, begin, end);
}

#if ZINF_KERNELS_X86
ZINF_TARGET_AVX2 void forward_rows_avx2(const ForwardArgs& a, std::size_t begin, std::size_t end) {
  forward_rows(a, begin, end);
}
ZINF_TARGET_AVX2 void backward_blocks_avx2(const BackwardArgs& a, std::size_t begin, std::size_t end) {
  backward_blocks(a, begin, end);
}
ZINF_TARGET_AVX2 void reduce_channels_avx2(const BackwardArgs& a, std::size_t begin, std::size_t end) {
  reduce_channels(a, begin, end);
}
ZINF_TARGET_AVX512 void forward_rows_avx512(const ForwardArgs& a, std::size_t begin, std::size_t end) {
  forward_rows(a, begin, end);
}
ZINF_TARGET_AVX512 void backward_blocks_avx512(const BackwardArgs& a, std::size_t begin, std::size_t end) {
  backward_blocks(a, begin, end);
}
ZINF_TARGET_AVX512 void reduce_channels_avx512(const BackwardArgs& a, std::size_t begin, std::size_t end) {
  reduce_channels(a, begin, end);
}
#endif

}  // namespace

void rmsnorm_forward(Isa isa, float* out, float* rstd, const float* inp, const float* weight, std::size_t rows,
                     std::size_t channels, float eps, int num_threads) {
  const auto fn = ZINF_KERNEL_VARIANT(isa, forward_rows);
  const ForwardArgs args{out, rstd, inp, weight, channels, eps};
  const std::size_t min_rows = kMinParallelElements / std::max<std::size_t>(channels, 1) + 1;
  parallel::for_each_range(rows, min_rows, 1, parallel::resolve_threads(num_threads),
                           [&](std::size_t begin, std::size_t end) { fn(args, begin, end); });
}

void rmsnorm_backward(Isa isa, float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, std::size_t rows, std::size_t channels, int num_threads) {
  if (rows == 0) return;
  const auto blocks_fn = ZINF_KERNEL_VARIANT(isa, backward_blocks);
  const auto reduce_fn = ZINF_KERNEL_VARIANT(isa, reduce_channels);
  const std::size_t block_rows = row_block(rows);
  const std::size_t blocks = (rows + block_rows - 1) / block_rows;
  // Every element is written by its block before it is read: no zero fill.
  const std::unique_ptr<double[]> partials(new double[blocks * channels]);
  const BackwardArgs args{dinp, dweight, partials.get(), block_rows, dout, inp, weight, rstd, rows, channels};
  const int threads = rows * channels < kMinParallelElements ? 1 : parallel::resolve_threads(num_threads);
  parallel::for_each_range(blocks, 2, 1, threads,
                           [&](std::size_t begin, std::size_t end) { blocks_fn(args, begin, end); });
  parallel::for_each_range(channels, 2, 16, threads,
                           [&](std::size_t begin, std::size_t end) { reduce_fn(args, begin, end); });
}

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, std::size_t rows,
                     std::size_t channels, float eps, int num_threads) {
  rmsnorm_forward(best_isa(), out, rstd, inp, weight, rows, channels, eps, num_threads);
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, std::size_t rows, std::size_t channels, int num_threads) {
  rmsnorm_backward(best_isa(), dinp, dweight, dout, inp, weight, rstd, rows, channels, num_threads);
}

}  // namespace zinf::kernels::cpu
