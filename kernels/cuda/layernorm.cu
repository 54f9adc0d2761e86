// CUDA layer normalisation over the channels (kernels/layernorm.h), forward and backward, on `elem`
// activations and weights with fp32 statistics and fp32 weight gradients.
//
// Forward: one warp per row (4 rows per 128-thread block, grid-stride over rows), no block syncs.
// Two passes in fp32: the mean from the row sum, then the variance from the sum of squared
// deviations from that mean (exact centring, so no cancellation as in E[x^2] - mean^2). Each lane
// keeps its first 8 vectors of the row in registers between the passes (the whole row for C up to
// 256 * the vector width: 1024 fp32, 2048 bf16/fp16 channels); the rest is read again (from cache).
//
// Backward: block b (up to 256 threads across the channels) owns the fixed rows [b * k, (b + 1) * k)
// with k = max(4, ceil(R / 1024)), taking them one at a time: a pass over the row accumulates
// sum(dnorm) and sum(dnorm * norm) (a block reduction in fixed order, one __syncthreads a row with
// double-buffered shared slots) and adds dout * norm and dout into the block's dweight/dbias
// accumulators in shared memory, each channel owned by one thread (no atomics); a second pass adds
// the row's dinp. The block's sums go to scratch [blocks, 2, C]; a second kernel adds them in block
// order in fp64 and adds the result into dweight and dbias. The split depends only on R and C, so
// the results are the same on every run and GPU. The accumulators bound C by one block's shared
// memory (8 bytes a channel, past 48 KiB through the opt-in: about 29 000 channels on an H100);
// a wider C returns cudaErrorInvalidValue.
// Vector accesses (16 bytes) when C is a multiple of the vector width and the arrays are 16-byte
// aligned; one element at a time otherwise.
#include <cstdint>

#include "kernels/cuda/elem.cuh"
#include "kernels/layernorm.h"

namespace zinf::kernels::cuda {
namespace {

using detail::aligned16;
using detail::load_pack;
using detail::Pack;
using detail::store_pack;

constexpr int kForwardWarps = 4;
constexpr int kForwardCacheSlots = 8;
constexpr int kBackwardMaxThreads = 256;
constexpr int kBackwardCacheSlots = 2;
constexpr std::int64_t kBackwardMaxBlocks = 1024;
constexpr std::int64_t kBackwardMinRowsPerBlock = 4;
constexpr int kFinalChannels = 32;
constexpr int kFinalGroups = 8;
constexpr std::size_t kDefaultSharedBytes = 48 * 1024;

// Butterfly sum over the warp: every lane ends with the same bits (each level adds the same two
// values, in either order).
__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xFFFFFFFFu, value, offset);
  return value;
}

// ---- Forward -------------------------------------------------------------------------------------

template <typename T, int kVec>
__global__ void __launch_bounds__(kForwardWarps * 32)
    layernorm_forward_kernel(T* __restrict__ out, float* __restrict__ mean_out, float* __restrict__ rstd_out,
                             const T* __restrict__ inp, const T* __restrict__ weight, const T* __restrict__ bias,
                             std::int64_t rows, int channels, float eps) {
  using P = Pack<T, kVec>;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int vectors = channels / kVec;
  const auto channel_count = static_cast<float>(channels);
  const std::int64_t row_stride = static_cast<std::int64_t>(gridDim.x) * kForwardWarps;
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kForwardWarps + warp; row < rows; row += row_stride) {
    const T* x = inp + row * channels;
    P cache[kForwardCacheSlots];
    float sum = 0.0f;
#pragma unroll
    for (int s = 0; s < kForwardCacheSlots; ++s) {
      const int j = lane + s * 32;
      if (j < vectors) {
        cache[s] = load_pack<T, kVec>(x + j * kVec);
#pragma unroll
        for (int k = 0; k < kVec; ++k) sum += detail::to_f32(cache[s].v[k]);
      }
    }
    for (int j = lane + kForwardCacheSlots * 32; j < vectors; j += 32) {
      const P p = load_pack<T, kVec>(x + j * kVec);
#pragma unroll
      for (int k = 0; k < kVec; ++k) sum += detail::to_f32(p.v[k]);
    }
    const float mean = warp_sum(sum) / channel_count;

    float squares = 0.0f;
#pragma unroll
    for (int s = 0; s < kForwardCacheSlots; ++s) {
      const int j = lane + s * 32;
      if (j < vectors) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          const float d = detail::to_f32(cache[s].v[k]) - mean;
          squares += d * d;
        }
      }
    }
    for (int j = lane + kForwardCacheSlots * 32; j < vectors; j += 32) {
      const P p = load_pack<T, kVec>(x + j * kVec);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float d = detail::to_f32(p.v[k]) - mean;
        squares += d * d;
      }
    }
    const float var = warp_sum(squares) / channel_count;
    const float rstd = 1.0f / sqrtf(var + eps);

    T* y = out + row * channels;
    const auto normalise = [&](int j, const P& p) {
      const P w = load_pack<T, kVec>(weight + j * kVec);
      const P b = load_pack<T, kVec>(bias + j * kVec);
      P result;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float norm = (detail::to_f32(p.v[k]) - mean) * rstd;
        result.v[k] = detail::from_f32<T>(norm * detail::to_f32(w.v[k]) + detail::to_f32(b.v[k]));
      }
      store_pack(y + j * kVec, result);
    };
#pragma unroll
    for (int s = 0; s < kForwardCacheSlots; ++s) {
      const int j = lane + s * 32;
      if (j < vectors) normalise(j, cache[s]);
    }
    for (int j = lane + kForwardCacheSlots * 32; j < vectors; j += 32) normalise(j, load_pack<T, kVec>(x + j * kVec));
    if (lane == 0) {
      if (mean_out != nullptr) mean_out[row] = mean;
      if (rstd_out != nullptr) rstd_out[row] = rstd;
    }
  }
}

// ---- Backward ------------------------------------------------------------------------------------

struct BackwardSplit {
  std::int64_t rows_per_block;
  std::int64_t blocks;
};

BackwardSplit backward_split(std::int64_t rows) {
  std::int64_t rows_per_block = (rows + kBackwardMaxBlocks - 1) / kBackwardMaxBlocks;
  if (rows_per_block < kBackwardMinRowsPerBlock) rows_per_block = kBackwardMinRowsPerBlock;
  return {rows_per_block, (rows + rows_per_block - 1) / rows_per_block};
}

int backward_threads(int vectors) {
  const int threads = (vectors + 31) / 32 * 32;
  return threads < kBackwardMaxThreads ? threads : kBackwardMaxThreads;
}

// Dynamic shared memory: [2][C] fp32 accumulators (dweight, dbias) of the block's rows, element k of
// vector j at k * vectors + j so that consecutive threads touch consecutive words. At least 3 blocks
// of 256 threads per SM (at most 85 registers a thread): fewer leave too few loads in flight.
template <typename T, int kVec>
__global__ void __launch_bounds__(kBackwardMaxThreads, 3)
    layernorm_backward_kernel(T* __restrict__ dinp, float* __restrict__ partials, const T* __restrict__ dout,
                              const T* __restrict__ inp, const T* __restrict__ weight, const float* __restrict__ mean,
                              const float* __restrict__ rstd, std::int64_t rows, int channels,
                              std::int64_t rows_per_block) {
  using P = Pack<T, kVec>;
  extern __shared__ float accumulators[];
  __shared__ float row_sums[2][2][32];  // [row parity][sum dnorm, sum dnorm*norm][warp]
  const int tid = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int warps = threads / 32;
  const int vectors = channels / kVec;
  const auto channel_count = static_cast<float>(channels);
  float* dweight_acc = accumulators;
  float* dbias_acc = accumulators + channels;

  for (int j = tid; j < vectors; j += threads) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      dweight_acc[k * vectors + j] = 0.0f;
      dbias_acc[k * vectors + j] = 0.0f;
    }
  }
  P weight_cache[kBackwardCacheSlots];
#pragma unroll
  for (int s = 0; s < kBackwardCacheSlots; ++s) {
    const int j = tid + s * threads;
    if (j < vectors) weight_cache[s] = load_pack<T, kVec>(weight + j * kVec);
  }

  const std::int64_t row_begin = static_cast<std::int64_t>(blockIdx.x) * rows_per_block;
  const std::int64_t row_end = row_begin + rows_per_block < rows ? row_begin + rows_per_block : rows;
  int parity = 0;
  for (std::int64_t r = row_begin; r < row_end; ++r, parity ^= 1) {
    const T* x = inp + r * channels;
    const T* dy = dout + r * channels;
    T* dx = dinp + r * channels;
    const float row_mean = mean[r];
    const float row_rstd = rstd[r];

    // Pass 1: the row's two sums, and this row's share of dweight and dbias.
    float dnorm_sum = 0.0f;
    float dnorm_norm_sum = 0.0f;
    const auto accumulate = [&](int j, const P& xp, const P& dyp, const P& wp) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float norm = (detail::to_f32(xp.v[k]) - row_mean) * row_rstd;
        const float g = detail::to_f32(dyp.v[k]);
        // __fmul_rn: dnorm rounded once, never fused into the sums, so pass 2's centring (dnorm -
        // mean(dnorm)) subtracts the very values pass 1 added: exactly 0 for a single channel,
        // where rstd = 1/sqrt(eps) would amplify an FMA's rounding residue 300-fold.
        const float dnorm = __fmul_rn(g, detail::to_f32(wp.v[k]));
        dnorm_sum += dnorm;
        dnorm_norm_sum += dnorm * norm;
        dweight_acc[k * vectors + j] += g * norm;
        dbias_acc[k * vectors + j] += g;
      }
    };
    P x_cache[kBackwardCacheSlots];
    P dy_cache[kBackwardCacheSlots];
#pragma unroll
    for (int s = 0; s < kBackwardCacheSlots; ++s) {
      const int j = tid + s * threads;
      if (j < vectors) {
        x_cache[s] = load_pack<T, kVec>(x + j * kVec);
        dy_cache[s] = load_pack<T, kVec>(dy + j * kVec);
        accumulate(j, x_cache[s], dy_cache[s], weight_cache[s]);
      }
    }
    for (int j = tid + kBackwardCacheSlots * threads; j < vectors; j += threads) {
      accumulate(j, load_pack<T, kVec>(x + j * kVec), load_pack<T, kVec>(dy + j * kVec),
                 load_pack<T, kVec>(weight + j * kVec));
    }

    // The block's sums, added in warp order by every thread. The slots alternate between rows: a
    // thread writes this parity's slots again only after the next row's __syncthreads, which every
    // thread reaches after reading them here.
    dnorm_sum = warp_sum(dnorm_sum);
    dnorm_norm_sum = warp_sum(dnorm_norm_sum);
    if (lane == 0) {
      row_sums[parity][0][warp] = dnorm_sum;
      row_sums[parity][1][warp] = dnorm_norm_sum;
    }
    __syncthreads();
    float total = 0.0f;
    float total_norm = 0.0f;
    for (int w = 0; w < warps; ++w) {
      total += row_sums[parity][0][w];
      total_norm += row_sums[parity][1][w];
    }
    const float dnorm_mean = total / channel_count;
    const float dnorm_norm_mean = total_norm / channel_count;

    // Pass 2: dinp += rstd * ((dnorm - mean(dnorm)) - norm * mean(dnorm * norm)).
    const auto apply = [&](int j, const P& xp, const P& dyp, const P& wp) {
      P d = load_pack<T, kVec>(dx + j * kVec);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float norm = (detail::to_f32(xp.v[k]) - row_mean) * row_rstd;
        const float dnorm = __fmul_rn(detail::to_f32(dyp.v[k]), detail::to_f32(wp.v[k]));  // as pass 1
        d.v[k] =
            detail::from_f32<T>(detail::to_f32(d.v[k]) + row_rstd * ((dnorm - dnorm_mean) - norm * dnorm_norm_mean));
      }
      store_pack(dx + j * kVec, d);
    };
#pragma unroll
    for (int s = 0; s < kBackwardCacheSlots; ++s) {
      const int j = tid + s * threads;
      if (j < vectors) apply(j, x_cache[s], dy_cache[s], weight_cache[s]);
    }
    for (int j = tid + kBackwardCacheSlots * threads; j < vectors; j += threads) {
      apply(j, load_pack<T, kVec>(x + j * kVec), load_pack<T, kVec>(dy + j * kVec),
            load_pack<T, kVec>(weight + j * kVec));
    }
  }

  // The block's sums in channel order: other threads' accumulators, hence the barrier.
  __syncthreads();
  float* block_partials = partials + static_cast<std::int64_t>(blockIdx.x) * 2 * channels;
  for (int c = tid; c < channels; c += threads) {
    const int slot = (c % kVec) * vectors + c / kVec;
    block_partials[c] = dweight_acc[slot];
    block_partials[channels + c] = dbias_acc[slot];
  }
}

// dweight[c] += sum over blocks of partials[b, 0, c] (dbias likewise), in fp64: block (32 channels,
// 8 groups), group g adding blocks g, g + 8, ... in order, then the groups in order.
__global__ void __launch_bounds__(kFinalChannels* kFinalGroups)
    layernorm_param_grad_kernel(float* __restrict__ dweight, float* __restrict__ dbias,
                                const float* __restrict__ partials, std::int64_t blocks, int channels) {
  __shared__ double sums[2][kFinalGroups][kFinalChannels];
  const int c = static_cast<int>(blockIdx.x) * kFinalChannels + static_cast<int>(threadIdx.x);
  const int group = static_cast<int>(threadIdx.y);
  double dw = 0.0;
  double db = 0.0;
  if (c < channels) {
    for (std::int64_t b = group; b < blocks; b += kFinalGroups) {
      dw += static_cast<double>(partials[b * 2 * channels + c]);
      db += static_cast<double>(partials[b * 2 * channels + channels + c]);
    }
  }
  sums[0][group][threadIdx.x] = dw;
  sums[1][group][threadIdx.x] = db;
  __syncthreads();
  if (group == 0 && c < channels) {
    double total_dw = 0.0;
    double total_db = 0.0;
    for (int g = 0; g < kFinalGroups; ++g) {
      total_dw += sums[0][g][threadIdx.x];
      total_db += sums[1][g][threadIdx.x];
    }
    dweight[c] += static_cast<float>(total_dw);
    dbias[c] += static_cast<float>(total_db);
  }
}

template <typename T, int kVec>
LaunchStatus launch_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,
                             const float* mean, const float* rstd, std::int64_t rows, int channels, float* partials,
                             cudaStream_t stream) {
  const BackwardSplit split = backward_split(rows);
  const std::size_t shared_bytes = 2 * static_cast<std::size_t>(channels) * sizeof(float);
  const auto kernel = layernorm_backward_kernel<T, kVec>;
  // Without the opt-in a block gets 48 KiB of shared memory in all, the kernel's static row_sums
  // included: comparing the dynamic size alone with 48 KiB would skip the opt-in for C in
  // (6080, 6144] (6144: 48 KiB dynamic + 512 B static) and that launch would fail. The opt-in is
  // set to the device's whole per-block maximum rather than to this launch's size, so launches with
  // different C (from several host threads) never lower one another's limit.
  cudaFuncAttributes attributes{};
  cudaError_t error = cudaFuncGetAttributes(&attributes, kernel);
  if (error != cudaSuccess) return static_cast<LaunchStatus>(error);
  if (attributes.sharedSizeBytes + shared_bytes > kDefaultSharedBytes ||
      shared_bytes > static_cast<std::size_t>(attributes.maxDynamicSharedSizeBytes)) {
    int device = 0;
    int optin_bytes = 0;
    error = cudaGetDevice(&device);
    if (error == cudaSuccess) {
      error = cudaDeviceGetAttribute(&optin_bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    }
    if (error != cudaSuccess) return static_cast<LaunchStatus>(error);
    // C too wide for one block's shared memory (about 29 000 channels on an H100).
    if (attributes.sharedSizeBytes + shared_bytes > static_cast<std::size_t>(optin_bytes)) {
      return detail::invalid_argument();
    }
    error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 optin_bytes - static_cast<int>(attributes.sharedSizeBytes));
    if (error != cudaSuccess) return static_cast<LaunchStatus>(error);
  }
  kernel<<<static_cast<unsigned int>(split.blocks), backward_threads(channels / kVec), shared_bytes, stream>>>(
      dinp, partials, dout, inp, weight, mean, rstd, rows, channels, split.rows_per_block);
  const LaunchStatus status = detail::last_launch_status();
  if (status != 0) return status;
  const unsigned int grid = static_cast<unsigned int>((channels + kFinalChannels - 1) / kFinalChannels);
  layernorm_param_grad_kernel<<<grid, dim3(kFinalChannels, kFinalGroups), 0, stream>>>(dweight, dbias, partials,
                                                                                       split.blocks, channels);
  return detail::last_launch_status();
}

bool valid_channels(std::int64_t channels) { return channels >= 1 && channels <= INT32_MAX; }

}  // namespace

std::size_t layernorm_backward_scratch_bytes(std::int64_t rows, std::int64_t channels) {
  if (rows <= 0 || !valid_channels(channels)) return 0;
  return static_cast<std::size_t>(backward_split(rows).blocks) * 2 * static_cast<std::size_t>(channels) * sizeof(float);
}

LaunchStatus layernorm_forward(Elem elem, void* out, float* mean, float* rstd, const void* inp, const void* weight,
                               const void* bias, std::int64_t rows, std::int64_t channels, float eps, Stream stream) {
  if (rows < 0 || !valid_channels(channels) || !(eps > 0.0f)) return detail::invalid_argument();
  if (rows == 0) return 0;
  if (out == nullptr || inp == nullptr || weight == nullptr || bias == nullptr) return detail::invalid_argument();
  const unsigned int blocks = detail::blocks_for(rows, kForwardWarps);
  const auto c = static_cast<int>(channels);
  return detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    using T = decltype(tag);
    constexpr int kVec = 16 / static_cast<int>(sizeof(T));
    const bool vector = c % kVec == 0 && aligned16(out) && aligned16(inp) && aligned16(weight) && aligned16(bias);
    if (vector) {
      layernorm_forward_kernel<T, kVec><<<blocks, kForwardWarps * 32, 0, detail::native(stream)>>>(
          static_cast<T*>(out), mean, rstd, static_cast<const T*>(inp), static_cast<const T*>(weight),
          static_cast<const T*>(bias), rows, c, eps);
    } else {
      layernorm_forward_kernel<T, 1><<<blocks, kForwardWarps * 32, 0, detail::native(stream)>>>(
          static_cast<T*>(out), mean, rstd, static_cast<const T*>(inp), static_cast<const T*>(weight),
          static_cast<const T*>(bias), rows, c, eps);
    }
    return detail::last_launch_status();
  });
}

LaunchStatus layernorm_backward(Elem elem, void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                                const void* weight, const float* mean, const float* rstd, std::int64_t rows,
                                std::int64_t channels, void* scratch, std::size_t scratch_bytes, Stream stream) {
  if (rows < 0 || !valid_channels(channels)) return detail::invalid_argument();
  if (rows == 0) return 0;
  if (dinp == nullptr || dweight == nullptr || dbias == nullptr || dout == nullptr || inp == nullptr ||
      weight == nullptr || mean == nullptr || rstd == nullptr || scratch == nullptr ||
      scratch_bytes < layernorm_backward_scratch_bytes(rows, channels)) {
    return detail::invalid_argument();
  }
  const auto c = static_cast<int>(channels);
  auto* partials = static_cast<float*>(scratch);
  return detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    using T = decltype(tag);
    constexpr int kVec = 16 / static_cast<int>(sizeof(T));
    const bool vector = c % kVec == 0 && aligned16(dinp) && aligned16(dout) && aligned16(inp) && aligned16(weight);
    auto* dx = static_cast<T*>(dinp);
    const auto* dy = static_cast<const T*>(dout);
    const auto* x = static_cast<const T*>(inp);
    const auto* w = static_cast<const T*>(weight);
    if (vector) {
      return launch_backward<T, kVec>(dx, dweight, dbias, dy, x, w, mean, rstd, rows, c, partials,
                                      detail::native(stream));
    }
    return launch_backward<T, 1>(dx, dweight, dbias, dy, x, w, mean, rstd, rows, c, partials, detail::native(stream));
  });
}

}  // namespace zinf::kernels::cuda
