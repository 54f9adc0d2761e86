// What cuda_kernels_bench.cpp's cases share: errors that name the failing CUDA call, an event pair
// timing a span of stream work, a case's device buffers (Setup), the device state with the two
// bounds every ratio divides by (Gpu: device-to-device copy bandwidth and the bf16 GEMM peak, each
// measured once, lazily), the timed loop and the counters. Used from the benchmark thread only.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/convert.h"
#include "kernels/cuda_launch.h"
#include "kernels/matmul.h"

namespace zinf::kernels::cuda_bench {

using cuda::Elem;

constexpr std::size_t kProbeBytes = std::size_t{1} << 30;  // the bandwidth probe copies 1 GiB
constexpr std::int64_t kPeakN = 8192;                      // the GEMM peak's m = n = k
constexpr double kPeakFlops = 2.0 * kPeakN * kPeakN * kPeakN;
constexpr int kBoundRuns = 5;

inline std::size_t elem_bytes(Elem elem) { return elem == Elem::kF32 ? 4 : 2; }

// ---- Errors --------------------------------------------------------------------------------------

// What went wrong, or nothing (empty message). Converts to true when something did.
struct Error {
  std::string message;
  explicit operator bool() const { return !message.empty(); }
};

inline Error cuda_ok(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return {};
  return {std::string(call) + ": " + cudaGetErrorString(error)};
}

// A launcher's LaunchStatus is a cudaError_t value (kernels/cuda_launch.h).
inline Error launched(cuda::LaunchStatus status, const char* launcher) {
  if (status == 0) return {};
  return {std::string(launcher) + ": " + cudaGetErrorString(static_cast<cudaError_t>(status)) + " (cudaError " +
          std::to_string(status) + ")"};
}

inline Error gemm_ok(const cuda::GemmStatus& status, const char* launcher) {
  if (status.ok()) return {};
  std::string message = std::string(launcher) + ": " + (status.call != nullptr ? status.call : "?") + " at " +
                        (status.file != nullptr ? status.file : "?") + ":" + std::to_string(status.line);
  if (status.cublas_status != 0) {
    message += ": cuBLAS status " + std::to_string(status.cublas_status);
  } else {
    message += ": " + std::string(cudaGetErrorString(static_cast<cudaError_t>(status.cuda_error)));
  }
  return {message};
}

// ---- Events: the GPU time of a span of stream work -----------------------------------------------

class EventPair {
 public:
  EventPair() = default;
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  ~EventPair() {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
  }

  Error create() {
    if (Error e = cuda_ok(cudaEventCreate(&start_), "cudaEventCreate(start)")) return e;
    return cuda_ok(cudaEventCreate(&stop_), "cudaEventCreate(stop)");
  }

  // Records start, runs `launch` (which enqueues work on `stream` and returns an Error), records
  // stop and waits for it; *seconds is the GPU time between the two events.
  template <typename Launch>
  Error time(cudaStream_t stream, const Launch& launch, double* seconds) {
    if (Error e = cuda_ok(cudaEventRecord(start_, stream), "cudaEventRecord(start)")) return e;
    if (Error e = launch()) return e;
    if (Error e = cuda_ok(cudaEventRecord(stop_, stream), "cudaEventRecord(stop)")) return e;
    if (Error e = cuda_ok(cudaEventSynchronize(stop_), "cudaEventSynchronize(stop)")) return e;
    float ms = 0.0f;
    if (Error e = cuda_ok(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime")) return e;
    *seconds = static_cast<double>(ms) * 1e-3;
    return {};
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

// ---- Setup: a case's device buffers ---------------------------------------------------------------

// Deterministic values in [lo, hi) (the same hash as kernels_bench.cpp).
inline float hashed(std::size_t i, float lo, float hi) {
  const auto h = static_cast<std::uint32_t>(static_cast<std::uint64_t>(i) * 2654435761u);
  return lo + (hi - lo) * (static_cast<float>(h >> 8) * 0x1p-24f);
}

// Token ids in [0, vocab): an affine map modulo vocab, so the ids are distinct while n <= vocab
// (the multiplier is coprime with 50257).
inline std::vector<std::int32_t> make_tokens(std::size_t n, std::int64_t vocab) {
  std::vector<std::int32_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = static_cast<std::int32_t>((static_cast<std::uint64_t>(i) * 2654435761u + 12345u) %
                                       static_cast<std::uint64_t>(vocab));
  }
  return out;
}

inline std::size_t distinct(const std::vector<std::int32_t>& ids, std::int64_t vocab) {
  std::vector<bool> seen(static_cast<std::size_t>(vocab), false);
  std::size_t count = 0;
  for (const std::int32_t id : ids) {
    if (!seen[static_cast<std::size_t>(id)]) {
      seen[static_cast<std::size_t>(id)] = true;
      ++count;
    }
  }
  return count;
}

inline std::size_t bf16_bytes(std::int64_t n) { return static_cast<std::size_t>(n) * 2; }
inline std::size_t f32_bytes(std::int64_t n) { return static_cast<std::size_t>(n) * 4; }

// Allocates and fills a case's device arrays, keeping the first error so that a case lists its
// buffers one per line and checks once (ok() or finish()); after an error every call returns
// nullptr. Owns the memory until destroyed. Fills run on the given stream.
class Setup {
 public:
  explicit Setup(cudaStream_t stream) : stream_(stream) {}
  Setup(const Setup&) = delete;
  Setup& operator=(const Setup&) = delete;
  ~Setup() {
    // A case that failed mid-loop can leave work queued that still uses these buffers.
    cudaStreamSynchronize(stream_);
    for (void* p : owned_) cudaFree(p);
  }

  // n elements of `elem` with values in [lo, hi). Only a 1 Mi-element pattern is computed on the
  // host and uploaded; the device then doubles it until the array is full, so gigabytes of inputs
  // take milliseconds to set up. The repetition does not change how fast the kernels run.
  void* values(Elem elem, std::int64_t n, float lo = -1.0f, float hi = 1.0f) {
    const auto count = static_cast<std::size_t>(n);
    const std::size_t width = elem_bytes(elem);
    auto* base = static_cast<unsigned char*>(allocate(count * width));
    if (base == nullptr) return nullptr;
    const std::size_t pattern = std::min(count, kPatternElements);
    std::vector<float> f32(pattern);
    for (std::size_t i = 0; i < pattern; ++i) f32[i] = hashed(i, lo, hi);
    std::vector<std::uint16_t> half;
    const void* host = f32.data();
    if (elem != Elem::kF32) {
      half.resize(pattern);
      cpu::f32_to_half(elem == Elem::kBF16 ? HalfFormat::kBF16 : HalfFormat::kF16, f32.data(), half.data(), pattern);
      host = half.data();
    }
    if (!check(cuda_ok(cudaMemcpyAsync(base, host, pattern * width, cudaMemcpyHostToDevice, stream_),
                       "cudaMemcpyAsync(fill pattern, host to device)"))) {
      return nullptr;
    }
    for (std::size_t done = pattern; done < count;) {
      const std::size_t chunk = std::min(done, count - done);
      if (!check(cuda_ok(cudaMemcpyAsync(base + done * width, base, chunk * width, cudaMemcpyDeviceToDevice, stream_),
                         "cudaMemcpyAsync(fill, device to device)"))) {
        return nullptr;
      }
      done += chunk;
    }
    // The host pattern is freed on return: wait until the upload has read it.
    if (!check(cuda_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (fill)"))) return nullptr;
    return base;
  }

  void* zeros(std::size_t bytes) {
    void* p = allocate(bytes);
    if (p == nullptr) return nullptr;
    if (!check(cuda_ok(cudaMemsetAsync(p, 0, bytes, stream_), "cudaMemsetAsync(zeros)"))) return nullptr;
    return p;
  }

  float* zeros_f32(std::int64_t n) { return static_cast<float*>(zeros(f32_bytes(n))); }

  // Uninitialised device memory (kernel scratch). At least one byte, so that a size of 0 still
  // gives the non-null pointer the launchers require.
  void* scratch(std::size_t bytes) { return allocate(std::max<std::size_t>(bytes, 1)); }

  const std::int32_t* ids(const std::vector<std::int32_t>& host) {
    const std::size_t bytes = host.size() * sizeof(std::int32_t);
    void* p = allocate(bytes);
    if (p == nullptr) return nullptr;
    if (!check(cuda_ok(cudaMemcpyAsync(p, host.data(), bytes, cudaMemcpyHostToDevice, stream_),
                       "cudaMemcpyAsync(ids, host to device)")) ||
        !check(cuda_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (ids)"))) {
      return nullptr;
    }
    return static_cast<const std::int32_t*>(p);
  }

  // Waits for the fills and returns the first error, if any.
  Error finish() {
    check(cuda_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (setup)"));
    return error_;
  }

  // finish(), skipping the case with the error when there was one.
  bool ok(benchmark::State& state) {
    const Error e = finish();
    if (!e) return true;
    state.SkipWithError(e.message.c_str());
    return false;
  }

 private:
  static constexpr std::size_t kPatternElements = std::size_t{1} << 20;

  bool check(Error e) {
    if (e && !error_) error_ = std::move(e);
    return !error_;
  }

  void* allocate(std::size_t bytes) {
    if (error_) return nullptr;
    void* p = nullptr;
    if (!check(cuda_ok(cudaMalloc(&p, bytes), "cudaMalloc"))) return nullptr;
    owned_.push_back(p);
    return p;
  }

  cudaStream_t stream_;
  std::vector<void*> owned_;
  Error error_;
};

// ---- The shared device state and the two bounds --------------------------------------------------

struct Bound {
  double value = 0.0;  // bytes/s or FLOP/s
  Error error;
};

// What every case shares: the stream it runs on, the GEMM context and its workspace, the device's
// name, and the two bounds, each measured on first use and then kept. Owned by main() and handed
// to every case; used from the benchmark thread only.
class Gpu {
 public:
  Gpu() = default;
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;
  ~Gpu() {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    if (workspace_ != nullptr) cudaFree(workspace_);
    cuda::gemm_context_destroy(gemm_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Error init() {
    int device = 0;
    if (Error e = cuda_ok(cudaGetDevice(&device), "cudaGetDevice")) return e;
    cudaDeviceProp properties{};
    if (Error e = cuda_ok(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties")) return e;
    label_ = std::string(properties.name) + " bf16";
    // Non-blocking, so that nothing on the legacy default stream serialises with the timed work.
    if (Error e = cuda_ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags")) {
      return e;
    }
    if (Error e = gemm_ok(cuda::gemm_context_create(&gemm_), "cuda::gemm_context_create")) return e;
    return cuda_ok(cudaMalloc(&workspace_, cuda::kGemmWorkspaceBytes), "cudaMalloc(GEMM workspace)");
  }

  cudaStream_t stream() const { return stream_; }
  cuda::GemmContext* gemm() const { return gemm_; }
  void* workspace() const { return workspace_; }
  const std::string& label() const { return label_; }

  // Bytes/s of the 1 GiB device-to-device copy, counting a read and a write per byte copied.
  const Bound& bandwidth() {
    if (!bandwidth_) bandwidth_ = measure_bandwidth();
    return *bandwidth_;
  }

  // FLOP/s of the bf16 cuBLASLt forward product at 8192^3 (no bias).
  const Bound& gemm_peak() {
    if (!gemm_peak_) gemm_peak_ = measure_gemm_peak();
    return *gemm_peak_;
  }

  // The probe's copy and the peak's product, shared with the cases that time them.
  Error probe_copy(void* dst, const void* src) const {
    return cuda_ok(cudaMemcpyAsync(dst, src, kProbeBytes, cudaMemcpyDeviceToDevice, stream_),
                   "cudaMemcpyAsync(bandwidth probe)");
  }
  Error peak_gemm(void* out, const void* inp, const void* weight) const {
    return gemm_ok(cuda::matmul_forward(gemm_, Elem::kBF16, out, kPeakN, inp, weight, nullptr, kPeakN, kPeakN, kPeakN,
                                        workspace_, cuda::kGemmWorkspaceBytes, stream_),
                   "cuda::matmul_forward (8192^3)");
  }

 private:
  // per_run (bytes or FLOPs) over the best of kBoundRuns timed runs of `launch`, after one untimed.
  template <typename Launch>
  Bound best_rate(const Launch& launch, double per_run) const {
    EventPair events;
    if (Error e = events.create()) return {0.0, std::move(e)};
    double seconds = 0.0;
    if (Error e = events.time(stream_, launch, &seconds)) return {0.0, std::move(e)};
    double best = 1e30;
    for (int run = 0; run < kBoundRuns; ++run) {
      if (Error e = events.time(stream_, launch, &seconds)) return {0.0, std::move(e)};
      best = std::min(best, seconds);
    }
    return {per_run / best, {}};
  }

  Bound measure_bandwidth() const {
    Setup setup(stream_);
    const void* src = setup.values(Elem::kF32, static_cast<std::int64_t>(kProbeBytes / 4));
    void* dst = setup.zeros(kProbeBytes);
    if (Error e = setup.finish()) return {0.0, std::move(e)};
    return best_rate([&] { return probe_copy(dst, src); }, 2.0 * static_cast<double>(kProbeBytes));
  }

  Bound measure_gemm_peak() const {
    Setup setup(stream_);
    const void* inp = setup.values(Elem::kBF16, kPeakN * kPeakN);
    const void* weight = setup.values(Elem::kBF16, kPeakN * kPeakN, -0.05f, 0.05f);
    void* out = setup.zeros(bf16_bytes(kPeakN * kPeakN));
    if (Error e = setup.finish()) return {0.0, std::move(e)};
    return best_rate([&] { return peak_gemm(out, inp, weight); }, kPeakFlops);
  }

  cudaStream_t stream_ = nullptr;
  cuda::GemmContext* gemm_ = nullptr;
  void* workspace_ = nullptr;
  std::string label_;
  std::optional<Bound> bandwidth_;
  std::optional<Bound> gemm_peak_;
};

// ---- Timing and counters -------------------------------------------------------------------------

// The bound a case divides by; false (the case skipped) when it could not be measured.
inline bool have_bound(benchmark::State& state, const Bound& bound) {
  if (!bound.error) return true;
  state.SkipWithError(("bound: " + bound.error.message).c_str());
  return false;
}

// Runs `launch` once untimed (first-launch costs: module loading, cuBLASLt's heuristic query), then
// once per iteration between two events, reporting each iteration's GPU time. Returns the summed
// seconds, or nothing after SkipWithError.
template <typename Launch>
std::optional<double> timed_loop(benchmark::State& state, const Gpu& gpu, const Launch& launch) {
  EventPair events;
  double seconds = 0.0;
  Error e = events.create();
  if (!e) e = events.time(gpu.stream(), launch, &seconds);
  if (e) {
    state.SkipWithError(("warm-up: " + e.message).c_str());
    return std::nullopt;
  }
  double total = 0.0;
  for (auto _ : state) {
    if (Error failed = events.time(gpu.stream(), launch, &seconds)) {
      state.SkipWithError(failed.message.c_str());
      break;
    }
    state.SetIterationTime(seconds);
    total += seconds;
  }
  if (state.error_occurred()) return std::nullopt;
  return total;
}

// Counters for a memory-bound case moving `bytes` per iteration in `seconds` all told.
inline void report_memory_bound(benchmark::State& state, const Gpu& gpu, double seconds, double bytes,
                                double bandwidth) {
  const auto iterations = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(iterations * bytes));
  state.counters["fraction_of_bandwidth"] = benchmark::Counter(iterations * bytes / seconds / bandwidth);
  state.SetLabel(gpu.label());
}

// Counters for a compute-bound case doing `flops` and moving `bytes` per iteration.
inline void report_compute_bound(benchmark::State& state, const Gpu& gpu, double seconds, double flops, double bytes,
                                 double peak) {
  const auto iterations = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(iterations * bytes));
  state.counters["FLOP/s"] = benchmark::Counter(iterations * flops, benchmark::Counter::kIsRate);
  state.counters["fraction_of_gemm_peak"] = benchmark::Counter(iterations * flops / seconds / peak);
  state.SetLabel(gpu.label());
}

// Registers the Llama block's cases (RMSNorm, SwiGLU, RoPE; cuda_llama_kernels_bench.cpp) on `gpu`,
// which must outlive them.
void register_llama_cases(Gpu& gpu);

}  // namespace zinf::kernels::cuda_bench
