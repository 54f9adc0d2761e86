// CUDA RMS normalisation over the channels (kernels/rmsnorm.h), forward and backward, on `elem`
// activations and weights with fp32 rstd and fp32 weight gradients. The structure is layernorm.cu's
// without the mean and the bias.
//
// Forward: one warp per row (4 rows per 128-thread block, grid-stride over rows), no block syncs.
// One pass for the fp32 sum of squares; each lane keeps its first 8 vectors of the row in registers
// for the output pass (the whole row for C up to 256 * the vector width); the rest is read again
// (from cache).
//
// Backward: block b (up to 256 threads across the channels) owns the fixed rows [b * k, (b + 1) * k)
// with k = max(4, ceil(R / 1024)), taking them one at a time: a pass over the row accumulates
// sum(dnorm * norm) (a block reduction in fixed order, one __syncthreads a row with double-buffered
// shared slots) and adds dout * norm into the block's dweight accumulators in shared memory, each
// channel owned by one thread (no atomics); a second pass adds the row's dinp. The block's sums go to
// scratch [blocks, C]; a second kernel adds them in block order in fp64 and adds the result into
// dweight. The split depends only on R and C, so results are the same on every run and GPU. The
// accumulators bound C by one block's shared memory (4 bytes a channel, past 48 KiB through the
// opt-in); a wider C returns cudaErrorInvalidValue.
// Vector accesses (16 bytes) when C is a multiple of the vector width and the arrays are 16-byte
// aligned; one element at a time otherwise.
#include <cstdint>

#include "kernels/cuda/elem.cuh"
#include "kernels/rmsnorm.h"

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

// Butterfly sum over the warp: every lane ends with the same bits.
__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xFFFFFFFFu, value, offset);
  return value;
}

// ---- Forward -------------------------------------------------------------------------------------

template <typename T, int kVec>
__global__ void __launch_bounds__(kForwardWarps * 32)
    rmsnorm_forward_kernel(T* __restrict__ out, float* __restrict__ rstd_out, const T* __restrict__ inp,
                           const T* __restrict__ weight, std::int64_t rows, int channels, float eps) {
  using P = Pack<T, kVec>;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int vectors = channels / kVec;
  const auto channel_count = static_cast<float>(channels);
  const std::int64_t row_stride = static_cast<std::int64_t>(gridDim.x) * kForwardWarps;
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kForwardWarps + warp; row < rows; row += row_stride) {
    const T* x = inp + row * channels;
    P cache[kForwardCacheSlots];
    float squares = 0.0f;
#pragma unroll
    for (int s = 0; s < kForwardCacheSlots; ++s) {
      const int j = lane + s * 32;
      if (j < vectors) {
        cache[s] = load_pack<T, kVec>(x + j * kVec);
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          const float v = detail::to_f32(cache[s].v[k]);
          squares += v * v;
        }
      }
    }
    for (int j = lane + kForwardCacheSlots * 32; j < vectors; j += 32) {
      const P p = load_pack<T, kVec>(x + j * kVec);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float v = detail::to_f32(p.v[k]);
        squares += v * v;
      }
    }
    const float rstd = 1.0f / sqrtf(warp_sum(squares) / channel_count + eps);

    T* y = out + row * channels;
    const auto normalise = [&](int j, const P& p) {
      const P w = load_pack<T, kVec>(weight + j * kVec);
      P result;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        result.v[k] = detail::from_f32<T>((detail::to_f32(p.v[k]) * rstd) * detail::to_f32(w.v[k]));
      }
      store_pack(y + j * kVec, result);
    };
#pragma unroll
    for (int s = 0; s < kForwardCacheSlots; ++s) {
      const int j = lane + s * 32;
      if (j < vectors) normalise(j, cache[s]);
    }
    for (int j = lane + kForwardCacheSlots * 32; j < vectors; j += 32) normalise(j, load_pack<T, kVec>(x + j * kVec));
    if (lane == 0 && rstd_out != nullptr) rstd_out[row] = rstd;
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

// Dynamic shared memory: [C] fp32 dweight accumulators of the block's rows, element k of vector j
// at k * vectors + j so that consecutive threads touch consecutive words.
template <typename T, int kVec>
__global__ void __launch_bounds__(kBackwardMaxThreads, 3)
    rmsnorm_backward_kernel(T* __restrict__ dinp, float* __restrict__ partials, const T* __restrict__ dout,
                            const T* __restrict__ inp, const T* __restrict__ weight, const float* __restrict__ rstd,
                            std::int64_t rows, int channels, std::int64_t rows_per_block) {
  using P = Pack<T, kVec>;
  extern __shared__ float dweight_acc[];
  __shared__ float row_sums[2][32];  // [row parity][warp]
  const int tid = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int warps = threads / 32;
  const int vectors = channels / kVec;
  const auto channel_count = static_cast<float>(channels);

  for (int j = tid; j < vectors; j += threads) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) dweight_acc[k * vectors + j] = 0.0f;
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
    const float row_rstd = rstd[r];

    // Pass 1: the row's sum of dnorm * norm, and this row's share of dweight.
    float dnorm_norm_sum = 0.0f;
    const auto accumulate = [&](int j, const P& xp, const P& dyp, const P& wp) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float norm = detail::to_f32(xp.v[k]) * row_rstd;
        const float g = detail::to_f32(dyp.v[k]);
        dnorm_norm_sum += g * detail::to_f32(wp.v[k]) * norm;
        dweight_acc[k * vectors + j] += g * norm;
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

    // The block's sum, added in warp order by every thread; the slots alternate between rows (a
    // thread writes this parity's slot again only after the next row's __syncthreads).
    dnorm_norm_sum = warp_sum(dnorm_norm_sum);
    if (lane == 0) row_sums[parity][warp] = dnorm_norm_sum;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < warps; ++w) total += row_sums[parity][w];
    const float dnorm_norm_mean = total / channel_count;

    // Pass 2: dinp += rstd * (dnorm - norm * mean(dnorm * norm)).
    const auto apply = [&](int j, const P& xp, const P& dyp, const P& wp) {
      P d = load_pack<T, kVec>(dx + j * kVec);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float norm = detail::to_f32(xp.v[k]) * row_rstd;
        const float dnorm = detail::to_f32(dyp.v[k]) * detail::to_f32(wp.v[k]);
        d.v[k] = detail::from_f32<T>(detail::to_f32(d.v[k]) + row_rstd * (dnorm - norm * dnorm_norm_mean));
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
  float* block_partials = partials + static_cast<std::int64_t>(blockIdx.x) * channels;
  for (int c = tid; c < channels; c += threads) block_partials[c] = dweight_acc[(c % kVec) * vectors + c / kVec];
}

// dweight[c] += sum over blocks of partials[b, c], in fp64: block (32 channels, 8 groups), group g
// adding blocks g, g + 8, ... in order, then the groups in order.
__global__ void __launch_bounds__(kFinalChannels* kFinalGroups)
    rmsnorm_param_grad_kernel(float* __restrict__ dweight, const float* __restrict__ partials, std::int64_t blocks,
                              int channels) {
  __shared__ double sums[kFinalGroups][kFinalChannels];
  const int c = static_cast<int>(blockIdx.x) * kFinalChannels + static_cast<int>(threadIdx.x);
  const int group = static_cast<int>(threadIdx.y);
  double dw = 0.0;
  if (c < channels) {
    for (std::int64_t b = group; b < blocks; b += kFinalGroups) dw += static_cast<double>(partials[b * channels + c]);
  }
  sums[group][threadIdx.x] = dw;
  __syncthreads();
  if (group == 0 && c < channels) {
    double total = 0.0;
    for (int g = 0; g < kFinalGroups; ++g) total += sums[g][threadIdx.x];
    dweight[c] += static_cast<float>(total);
  }
}

template <typename T, int kVec>
LaunchStatus launch_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, const float* rstd,
                             std::int64_t rows, int channels, float* partials, cudaStream_t stream) {
  const BackwardSplit split = backward_split(rows);
  const std::size_t shared_bytes = static_cast<std::size_t>(channels) * sizeof(float);
  const auto kernel = rmsnorm_backward_kernel<T, kVec>;
  // As layernorm.cu: the opt-in past 48 KiB counts the kernel's static shared memory too, and is set
  // to the device's whole per-block maximum so launches with different C never lower each other's.
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
    if (attributes.sharedSizeBytes + shared_bytes > static_cast<std::size_t>(optin_bytes)) {
      return detail::invalid_argument();
    }
    error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 optin_bytes - static_cast<int>(attributes.sharedSizeBytes));
    if (error != cudaSuccess) return static_cast<LaunchStatus>(error);
  }
  kernel<<<static_cast<unsigned int>(split.blocks), backward_threads(channels / kVec), shared_bytes, stream>>>(
      dinp, partials, dout, inp, weight, rstd, rows, channels, split.rows_per_block);
  const LaunchStatus status = detail::last_launch_status();
  if (status != 0) return status;
  const unsigned int grid = static_cast<unsigned int>((channels + kFinalChannels - 1) / kFinalChannels);
  rmsnorm_param_grad_kernel<<<grid, dim3(kFinalChannels, kFinalGroups), 0, stream>>>(dweight, partials, split.blocks,
                                                                                     channels);
  return detail::last_launch_status();
}

bool valid_channels(std::int64_t channels) { return channels >= 1 && channels <= INT32_MAX; }

}  // namespace

std::size_t rmsnorm_backward_scratch_bytes(std::int64_t rows, std::int64_t channels) {
  if (rows <= 0 || !valid_channels(channels)) return 0;
  return static_cast<std::size_t>(backward_split(rows).blocks) * static_cast<std::size_t>(channels) * sizeof(float);
}

LaunchStatus rmsnorm_forward(Elem elem, void* out, float* rstd, const void* inp, const void* weight, std::int64_t rows,
                             std::int64_t channels, float eps, Stream stream) {
  if (rows < 0 || !valid_channels(channels) || !(eps > 0.0f)) return detail::invalid_argument();
  if (rows == 0) return 0;
  if (out == nullptr || inp == nullptr || weight == nullptr) return detail::invalid_argument();
  const unsigned int blocks = detail::blocks_for(rows, kForwardWarps);
  const auto c = static_cast<int>(channels);
  return detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    using T = decltype(tag);
    constexpr int kVec = 16 / static_cast<int>(sizeof(T));
    const bool vector = c % kVec == 0 && aligned16(out) && aligned16(inp) && aligned16(weight);
    if (vector) {
      rmsnorm_forward_kernel<T, kVec><<<blocks, kForwardWarps * 32, 0, detail::native(stream)>>>(
          static_cast<T*>(out), rstd, static_cast<const T*>(inp), static_cast<const T*>(weight), rows, c, eps);
    } else {
      rmsnorm_forward_kernel<T, 1><<<blocks, kForwardWarps * 32, 0, detail::native(stream)>>>(
          static_cast<T*>(out), rstd, static_cast<const T*>(inp), static_cast<const T*>(weight), rows, c, eps);
    }
    return detail::last_launch_status();
  });
}

LaunchStatus rmsnorm_backward(Elem elem, void* dinp, float* dweight, const void* dout, const void* inp,
                              const void* weight, const float* rstd, std::int64_t rows, std::int64_t channels,
                              void* scratch, std::size_t scratch_bytes, Stream stream) {
  if (rows < 0 || !valid_channels(channels)) return detail::invalid_argument();
  if (rows == 0) return 0;
  if (dinp == nullptr || dweight == nullptr || dout == nullptr || inp == nullptr || weight == nullptr ||
      rstd == nullptr || scratch == nullptr || scratch_bytes < rmsnorm_backward_scratch_bytes(rows, channels)) {
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
      return launch_backward<T, kVec>(dx, dweight, dy, x, w, rstd, rows, c, partials, detail::native(stream));
    }
    return launch_backward<T, 1>(dx, dweight, dy, x, w, rstd, rows, c, partials, detail::native(stream));
  });
}

}  // namespace zinf::kernels::cuda
