// CUDA token + position embedding (kernels/embedding.h), forward and backward.
//
// Forward: a block per position (grid-stride over the B*T positions), its threads across the
// channels: out[b, t, :] = wte[token, :] + wpe[t, :] in fp32, one rounding to `elem`; 16-byte
// accesses when C is a multiple of the vector width and the arrays are 16-byte aligned.
//
// Backward, deterministic and without floating-point atomics:
//   1. positions 0..B*T-1 are sorted by token with cub's radix sort (stable, so every token's
//      positions stay in increasing order) into `scratch`;
//   2. dwte: one block per sorted entry and channel slice; the block at the first entry of a
//      token's run finds the run's end (galloping search over the sorted tokens) and adds the run's
//      dout rows into dwte[token] in position order, 8 rows' loads in flight at a time; the other
//      blocks return at once. Each channel of each token is one thread's running fp32 sum starting
//      from dwte's value, the order the CPU kernel adds in, so fp32 results equal the CPU's bits.
//   3. dwpe: a thread per (t, 4 channels) adds dout[b, t, :] for b = 0..B-1 in order.
// What it is not: a sparse update; every run of a token is summed by one thread per channel, so a
// token repeated thousands of times is a long serial chain (still 8 loads in flight).
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/elem.cuh"
#include "kernels/embedding.h"

namespace zinf::kernels::cuda {
namespace {

using detail::aligned;
using detail::load_pack;
using detail::Pack;
using detail::store_pack;

constexpr int kForwardMaxThreads = 256;
constexpr int kBackwardVec = 4;   // channels a backward thread owns (a float4 of the fp32 gradient)
constexpr int kDwteThreads = 64;  // small blocks: more of them share a long run's channels
constexpr int kDwpeThreads = 256;
constexpr int kRowsInFlight = 8;  // dout rows loaded before they are added, in order
constexpr std::size_t kScratchAlign = 256;

std::size_t round_up(std::size_t bytes) { return (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

int threads_for(std::int64_t items, int max_threads) {
  const std::int64_t warps = (items + 31) / 32;
  const std::int64_t threads = warps * 32;
  return static_cast<int>(threads < max_threads ? (threads < 32 ? 32 : threads) : max_threads);
}

// ---- Forward -------------------------------------------------------------------------------------

// kVec elements per access: 16 bytes' worth, or 1 when C or an array's alignment does not allow it.
// wte holds table rows [row_begin, row_begin + rows); positions whose token lies outside are skipped.
template <typename T, int kVec>
__global__ void embedding_forward_kernel(T* __restrict__ out, const std::int32_t* __restrict__ tokens,
                                         const T* __restrict__ wte, std::int64_t row_begin, std::int64_t rows,
                                         const T* __restrict__ wpe, std::int64_t positions, std::int64_t seq_len,
                                         std::int64_t channels) {
  const std::int64_t vectors = channels / kVec;
  for (std::int64_t i = blockIdx.x; i < positions; i += gridDim.x) {
    const std::int64_t row = static_cast<std::int64_t>(tokens[i]) - row_begin;
    if (row < 0 || row >= rows) continue;
    const T* token_row = wte + row * channels;
    const T* position_row = wpe + (i % seq_len) * channels;
    T* y = out + i * channels;
    for (std::int64_t j = threadIdx.x; j < vectors; j += blockDim.x) {
      const auto a = load_pack<T, kVec>(token_row + j * kVec);
      const auto b = load_pack<T, kVec>(position_row + j * kVec);
      Pack<T, kVec> sum;
#pragma unroll
      for (int k = 0; k < kVec; ++k) sum.v[k] = detail::from_f32<T>(detail::to_f32(a.v[k]) + detail::to_f32(b.v[k]));
      store_pack(y + j * kVec, sum);
    }
  }
}

template <typename T>
LaunchStatus launch_forward(void* out, const std::int32_t* tokens, const void* wte, std::int64_t row_begin,
                            std::int64_t rows, const void* wpe, std::int64_t positions, std::int64_t seq_len,
                            std::int64_t channels, cudaStream_t stream) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  const bool vector = channels % kVec == 0 && aligned(out, 16) && aligned(wte, 16) && aligned(wpe, 16);
  const unsigned int blocks = detail::blocks_for(positions, 1);
  if (vector) {
    embedding_forward_kernel<T, kVec><<<blocks, threads_for(channels / kVec, kForwardMaxThreads), 0, stream>>>(
        static_cast<T*>(out), tokens, static_cast<const T*>(wte), row_begin, rows, static_cast<const T*>(wpe),
        positions, seq_len, channels);
  } else {
    embedding_forward_kernel<T, 1><<<blocks, threads_for(channels, kForwardMaxThreads), 0, stream>>>(
        static_cast<T*>(out), tokens, static_cast<const T*>(wte), row_begin, rows, static_cast<const T*>(wpe),
        positions, seq_len, channels);
  }
  return detail::last_launch_status();
}

// ---- Backward ------------------------------------------------------------------------------------

// The scratch regions, each 256-byte aligned: sorted tokens, positions 0..N-1 (the sort's input
// values), positions sorted by token, and cub's temporary storage.
struct ScratchLayout {
  std::size_t sorted_tokens_offset;
  std::size_t positions_offset;
  std::size_t sorted_positions_offset;
  std::size_t cub_offset;
  std::size_t cub_bytes;
  std::size_t total_bytes;
};

// Bits the sort must look at: enough for every token in [0, vocab).
int token_bits(std::int64_t vocab) {
  int bits = 1;
  while (bits < 31 && (std::int64_t{1} << bits) < vocab) ++bits;
  return bits;
}

// cub's temporary-storage size for sorting `count` pairs (a host-side query, no launch).
cudaError_t cub_sort_bytes(std::int64_t count, std::int64_t vocab, std::size_t* bytes) {
  *bytes = 0;
  return cub::DeviceRadixSort::SortPairs(nullptr, *bytes, static_cast<const std::int32_t*>(nullptr),
                                         static_cast<std::int32_t*>(nullptr), static_cast<const std::int32_t*>(nullptr),
                                         static_cast<std::int32_t*>(nullptr), static_cast<int>(count), 0,
                                         token_bits(vocab));
}

ScratchLayout scratch_layout(std::int64_t count, std::size_t cub_bytes) {
  const std::size_t index_bytes = round_up(static_cast<std::size_t>(count) * sizeof(std::int32_t));
  ScratchLayout layout{};
  layout.sorted_tokens_offset = 0;
  layout.positions_offset = index_bytes;
  layout.sorted_positions_offset = 2 * index_bytes;
  layout.cub_offset = 3 * index_bytes;
  layout.cub_bytes = cub_bytes;
  layout.total_bytes = 3 * index_bytes + round_up(cub_bytes);
  return layout;
}

__global__ void iota_kernel(std::int32_t* __restrict__ values, std::int64_t count) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    values[i] = static_cast<std::int32_t>(i);
  }
}

// The index one past the run of `token` that starts at `begin` in the ascending sorted tokens:
// doubling probes bracket the end, a binary search finds it. A run of length 1 costs one load.
__device__ std::int64_t run_end(const std::int32_t* __restrict__ sorted_tokens, std::int64_t count, std::int64_t begin,
                                std::int32_t token) {
  std::int64_t known = begin;  // sorted_tokens[known] == token
  std::int64_t step = 1;
  std::int64_t probe = begin + 1;
  while (probe < count && sorted_tokens[probe] == token) {
    known = probe;
    step *= 2;
    probe = begin + step;
  }
  std::int64_t lo = known + 1;                      // the end lies in [lo, hi]
  std::int64_t hi = probe < count ? probe : count;  // sorted_tokens[hi] != token when hi < count
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (sorted_tokens[mid] == token) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// grad[0..kVec) += the kVec-channel slices at row_at(0), row_at(1), ..., row_at(count - 1), added in
// that order in fp32 (the CPU kernel's order), with up to kRowsInFlight loads in flight.
template <typename T, int kVec, typename RowAt>
__device__ __forceinline__ void add_rows_in_order(float* grad, std::int64_t count, RowAt row_at) {
  float acc[kVec];
  const auto initial = load_pack<float, kVec>(grad);
#pragma unroll
  for (int k = 0; k < kVec; ++k) acc[k] = initial.v[k];
  for (std::int64_t first = 0; first < count; first += kRowsInFlight) {
    const std::int64_t rows = count - first < kRowsInFlight ? count - first : kRowsInFlight;
    Pack<T, kVec> row[kRowsInFlight];
#pragma unroll
    for (int r = 0; r < kRowsInFlight; ++r) {
      if (r < rows) row[r] = load_pack<T, kVec>(row_at(first + r));
    }
#pragma unroll
    for (int r = 0; r < kRowsInFlight; ++r) {
      if (r < rows) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) acc[k] += detail::to_f32(row[r].v[k]);
      }
    }
  }
  Pack<float, kVec> result;
#pragma unroll
  for (int k = 0; k < kVec; ++k) result.v[k] = acc[k];
  store_pack(grad, result);
}

// Block (x = sorted entry, y = channel slice). kVec = kBackwardVec when C is a multiple of it and
// the arrays are aligned for it, else 1.
template <typename T, int kVec>
__global__ void __launch_bounds__(kDwteThreads)
    embedding_dwte_kernel(float* __restrict__ dwte, std::int64_t row_begin, std::int64_t rows,
                          const T* __restrict__ dout, const std::int32_t* __restrict__ sorted_tokens,
                          const std::int32_t* __restrict__ sorted_positions, std::int64_t count,
                          std::int64_t channels) {
  const std::int64_t begin = blockIdx.x;
  const std::int32_t token = sorted_tokens[begin];
  if (begin > 0 && sorted_tokens[begin - 1] == token) return;  // not the first entry of its run
  const std::int64_t row = static_cast<std::int64_t>(token) - row_begin;
  if (row < 0 || row >= rows) return;  // a row of another tile
  const std::int64_t c = (static_cast<std::int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * kVec;
  if (c >= channels) return;
  const std::int64_t end = run_end(sorted_tokens, count, begin, token);
  add_rows_in_order<T, kVec>(dwte + row * channels + c, end - begin, [&](std::int64_t i) {
    return dout + static_cast<std::int64_t>(sorted_positions[begin + i]) * channels + c;
  });
}

// A thread per (t, kVec channels): dwpe[t, c] += dout[b, t, c] for b = 0..B-1 in order.
template <typename T, int kVec>
__global__ void __launch_bounds__(kDwpeThreads)
    embedding_dwpe_kernel(float* __restrict__ dwpe, const T* __restrict__ dout, std::int64_t batch,
                          std::int64_t seq_len, std::int64_t channels) {
  const std::int64_t vectors_per_row = channels / kVec;
  const std::int64_t total = seq_len * vectors_per_row;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const std::int64_t t = i / vectors_per_row;
    const std::int64_t c = (i - t * vectors_per_row) * kVec;
    add_rows_in_order<T, kVec>(dwpe + t * channels + c, batch,
                               [&](std::int64_t b) { return dout + (b * seq_len + t) * channels + c; });
  }
}

template <typename T, int kVec>
LaunchStatus launch_gradients(float* dwte, std::int64_t row_begin, std::int64_t rows, float* dwpe, const T* dout,
                              const std::int32_t* sorted_tokens, const std::int32_t* sorted_positions,
                              std::int64_t batch, std::int64_t seq_len, std::int64_t channels, cudaStream_t stream) {
  const std::int64_t count = batch * seq_len;
  const std::int64_t slices = (channels / kVec + kDwteThreads - 1) / kDwteThreads;
  const dim3 grid(static_cast<unsigned int>(count), static_cast<unsigned int>(slices));
  embedding_dwte_kernel<T, kVec><<<grid, kDwteThreads, 0, stream>>>(dwte, row_begin, rows, dout, sorted_tokens,
                                                                    sorted_positions, count, channels);
  const LaunchStatus status = detail::last_launch_status();
  if (status != 0) return status;
  if (dwpe == nullptr) return 0;
  embedding_dwpe_kernel<T, kVec>
      <<<detail::blocks_for(seq_len * (channels / kVec), kDwpeThreads), kDwpeThreads, 0, stream>>>(dwpe, dout, batch,
                                                                                                   seq_len, channels);
  return detail::last_launch_status();
}

}  // namespace

std::size_t embedding_backward_scratch_bytes(std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                                             std::int64_t vocab) {
  if (batch <= 0 || seq_len <= 0 || channels <= 0 || vocab <= 0 || batch * seq_len > INT32_MAX) return 0;
  std::size_t cub_bytes = 0;
  // A failed query leaves cub_bytes 0; the launcher repeats it and reports the error.
  (void)cub_sort_bytes(batch * seq_len, vocab, &cub_bytes);
  return scratch_layout(batch * seq_len, cub_bytes).total_bytes;
}

LaunchStatus embedding_forward_rows(Elem elem, void* out, const std::int32_t* tokens, const void* wte_rows,
                                    std::int64_t row_begin, std::int64_t rows, const void* wpe, std::int64_t batch,
                                    std::int64_t seq_len, std::int64_t channels, Stream stream) {
  if (batch < 0 || seq_len < 0 || channels < 0 || row_begin < 0 || rows < 0) return detail::invalid_argument();
  if (batch == 0 || seq_len == 0 || channels == 0) return 0;
  if (out == nullptr || tokens == nullptr || wte_rows == nullptr || wpe == nullptr) return detail::invalid_argument();
  return detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    return launch_forward<decltype(tag)>(out, tokens, wte_rows, row_begin, rows, wpe, batch * seq_len, seq_len,
                                         channels, detail::native(stream));
  });
}

LaunchStatus embedding_forward(Elem elem, void* out, const std::int32_t* tokens, const void* wte, const void* wpe,
                               std::int64_t batch, std::int64_t seq_len, std::int64_t channels, Stream stream) {
  return embedding_forward_rows(elem, out, tokens, wte, 0, INT32_MAX, wpe, batch, seq_len, channels, stream);
}

LaunchStatus embedding_backward(Elem elem, float* dwte, float* dwpe, const void* dout, const std::int32_t* tokens,
                                std::int64_t batch, std::int64_t seq_len, std::int64_t channels, std::int64_t vocab,
                                void* scratch, std::size_t scratch_bytes, Stream stream) {
  // No positions is a no-op whatever the pointers, as embedding_backward_rows and the forward are.
  if (batch == 0 || seq_len == 0 || channels == 0)
    return batch < 0 || seq_len < 0 || channels < 0 ? detail::invalid_argument() : 0;
  if (dwpe == nullptr) return detail::invalid_argument();
  return embedding_backward_rows(elem, dwte, 0, vocab, dwpe, dout, tokens, batch, seq_len, channels, vocab, scratch,
                                 scratch_bytes, stream);
}

LaunchStatus embedding_backward_rows(Elem elem, float* dwte, std::int64_t row_begin, std::int64_t rows, float* dwpe,
                                     const void* dout, const std::int32_t* tokens, std::int64_t batch,
                                     std::int64_t seq_len, std::int64_t channels, std::int64_t vocab, void* scratch,
                                     std::size_t scratch_bytes, Stream stream) {
  if (batch < 0 || seq_len < 0 || channels < 0 || row_begin < 0 || rows < 0) return detail::invalid_argument();
  if (batch == 0 || seq_len == 0 || channels == 0) return 0;
  const std::int64_t count = batch * seq_len;
  // The dwte grid's y dimension (channel slices, at most 65535) bounds C.
  if (dwte == nullptr || dout == nullptr || tokens == nullptr || scratch == nullptr || vocab <= 0 ||
      count > INT32_MAX || (channels + kDwteThreads - 1) / kDwteThreads > 65535) {
    return detail::invalid_argument();
  }
  std::size_t cub_bytes = 0;
  const cudaError_t query = cub_sort_bytes(count, vocab, &cub_bytes);
  if (query != cudaSuccess) return static_cast<LaunchStatus>(query);
  const ScratchLayout layout = scratch_layout(count, cub_bytes);
  if (scratch_bytes < layout.total_bytes) return detail::invalid_argument();

  auto* base = static_cast<unsigned char*>(scratch);
  auto* sorted_tokens = reinterpret_cast<std::int32_t*>(base + layout.sorted_tokens_offset);
  auto* positions = reinterpret_cast<std::int32_t*>(base + layout.positions_offset);
  auto* sorted_positions = reinterpret_cast<std::int32_t*>(base + layout.sorted_positions_offset);
  void* cub_storage = base + layout.cub_offset;
  const cudaStream_t native = detail::native(stream);

  iota_kernel<<<detail::blocks_for(count, 256), 256, 0, native>>>(positions, count);
  LaunchStatus status = detail::last_launch_status();
  if (status != 0) return status;
  std::size_t cub_storage_bytes = layout.cub_bytes;
  const cudaError_t sorted =
      cub::DeviceRadixSort::SortPairs(cub_storage, cub_storage_bytes, tokens, sorted_tokens, positions,
                                      sorted_positions, static_cast<int>(count), 0, token_bits(vocab), native);
  if (sorted != cudaSuccess) return static_cast<LaunchStatus>(sorted);
  status = detail::last_launch_status();
  if (status != 0) return status;

  return detail::dispatch_elem(elem, [&](auto tag) -> LaunchStatus {
    using T = decltype(tag);
    const bool vector = channels % kBackwardVec == 0 && aligned(dwte, 16) && (dwpe == nullptr || aligned(dwpe, 16)) &&
                        aligned(dout, sizeof(T) * kBackwardVec);
    const auto* d = static_cast<const T*>(dout);
    if (vector) {
      return launch_gradients<T, kBackwardVec>(dwte, row_begin, rows, dwpe, d, sorted_tokens, sorted_positions, batch,
                                               seq_len, channels, native);
    }
    return launch_gradients<T, 1>(dwte, row_begin, rows, dwpe, d, sorted_tokens, sorted_positions, batch, seq_len,
                                  channels, native);
  });
}

}  // namespace zinf::kernels::cuda
