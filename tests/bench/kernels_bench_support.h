// Shared by the CPU kernel benchmarks compiled into kernels_bench (kernels_bench.cpp: the GPT-2
// block's kernels; llama_kernels_bench.cpp: RMSNorm, SwiGLU, RoPE): deterministic inputs, the timed
// loop, and the bounds every case is reported against (sgemm peak, in-place triad, STREAM's
// out-of-place triad), each measured once per process (function-local statics of inline functions,
// so one measurement serves every source file). kernels_bench.cpp's header comment says what the
// first two are and how byte counts are made; llama_kernels_bench.cpp's which triad a case is held to.
#pragma once

#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/parallel.h"

namespace zinf::kernels::bench {

template <typename T>
std::unique_ptr<T[]> uninitialised(std::size_t n) {
  return std::unique_ptr<T[]>(new T[n]);
}

// Split as the kernels split (kernels/cpu/parallel.h), so each thread first-touches its pages.
template <typename Body>
void split_over_threads(std::size_t n, const Body& body) {
  cpu::parallel::for_each_range(n, std::size_t{1} << 16, 64, omp_get_max_threads(), body);
}

// Deterministic values in [lo, hi).
inline std::unique_ptr<float[]> filled(std::size_t n, float lo = -1.0f, float hi = 1.0f) {
  auto data = uninitialised<float>(n);
  float* p = data.get();
  split_over_threads(n, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const auto h = static_cast<std::uint32_t>(static_cast<std::uint64_t>(i) * 2654435761u);
      p[i] = lo + (hi - lo) * (static_cast<float>(h >> 8) * 0x1p-24f);
    }
  });
  return data;
}

inline std::unique_ptr<float[]> zeros(std::size_t n) { return filled(n, 0.0f, 0.0f); }

inline std::vector<std::int32_t> tokens(std::size_t n, std::size_t vocab) {
  std::vector<std::int32_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = static_cast<std::int32_t>((static_cast<std::uint64_t>(i) * 2654435761u + 12345u) % vocab);
  }
  return out;
}

inline std::string run_label() {
  return "threads=" + std::to_string(omp_get_max_threads()) + " isa=" + std::string(cpu::isa_name(cpu::best_isa()));
}

// ---- Bounds --------------------------------------------------------------------------------------

constexpr std::size_t kProbeElements = std::size_t{32} << 20;  // 2 x 128 MiB: far past any cache
constexpr double kTriadBytesPerElement = 12.0;                 // read a and b, write a
constexpr int kSgemmN = 2048;

inline void triad_in_place(float* a, const float* b, float scale, std::size_t n) {
  split_over_threads(n, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) a[i] += scale * b[i];
  });
}

// STREAM's triad: a fresh array written from two others. A plain store first fetches the line it
// overwrites (write-allocate), so the hardware moves 16 bytes per element while STREAM, and this
// bench, count 12: the reference for kernels that write a fresh output the same way.
constexpr double kOutOfPlaceTriadBytesPerElement = 12.0;  // read b and c, write a

inline void triad_out_of_place(float* a, const float* b, const float* c, float scale, std::size_t n) {
  split_over_threads(n, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) a[i] = b[i] + scale * c[i];
  });
}

inline void sgemm(float* c, const float* a, const float* b) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kSgemmN, kSgemmN, kSgemmN, 1.0f, a, kSgemmN, b, kSgemmN, 0.0f,
              c, kSgemmN);
}

constexpr double kSgemmFlops = 2.0 * kSgemmN * kSgemmN * kSgemmN;

// Bytes per second of the triad: the best of 5 runs after one warm-up.
inline double bandwidth_bound() {
  static const double bound = [] {
    auto a = filled(kProbeElements);
    auto b = filled(kProbeElements);
    triad_in_place(a.get(), b.get(), 1e-3f, kProbeElements);
    double best = 1e30;
    float scale = 1e-3f;
    for (int rep = 0; rep < 5; ++rep) {
      const double start = omp_get_wtime();
      triad_in_place(a.get(), b.get(), scale, kProbeElements);
      benchmark::ClobberMemory();
      best = std::min(best, omp_get_wtime() - start);
      scale = -scale;
    }
    return static_cast<double>(kProbeElements) * kTriadBytesPerElement / best;
  }();
  return bound;
}

// Bytes per second of STREAM's out-of-place triad (bytes counted as STREAM counts them, 12 per
// element): the best of 5 runs after one warm-up, on three arrays of the in-place probe's size.
inline double out_of_place_bandwidth_bound() {
  static const double bound = [] {
    auto a = zeros(kProbeElements);
    auto b = filled(kProbeElements);
    auto c = filled(kProbeElements);
    triad_out_of_place(a.get(), b.get(), c.get(), 1e-3f, kProbeElements);
    double best = 1e30;
    float scale = 1e-3f;
    for (int rep = 0; rep < 5; ++rep) {
      const double start = omp_get_wtime();
      triad_out_of_place(a.get(), b.get(), c.get(), scale, kProbeElements);
      benchmark::ClobberMemory();
      best = std::min(best, omp_get_wtime() - start);
      scale = -scale;
    }
    return static_cast<double>(kProbeElements) * kOutOfPlaceTriadBytesPerElement / best;
  }();
  return bound;
}

// FLOP/s of cblas_sgemm 2048^3: the best of 3 runs after one warm-up.
inline double sgemm_peak() {
  static const double peak = [] {
    const auto n = static_cast<std::size_t>(kSgemmN) * kSgemmN;
    auto a = filled(n);
    auto b = filled(n);
    auto c = zeros(n);
    sgemm(c.get(), a.get(), b.get());
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      const double start = omp_get_wtime();
      sgemm(c.get(), a.get(), b.get());
      benchmark::ClobberMemory();
      best = std::min(best, omp_get_wtime() - start);
    }
    return kSgemmFlops / best;
  }();
  return peak;
}

// Runs the timed loop, `body` then ClobberMemory per iteration, and returns its wall-clock seconds
// (the same span Google Benchmark's real time measures, up to the loop's own overhead), so the
// fractions below are plain ratios rather than rates.
template <typename Body>
double timed_loop(benchmark::State& state, const Body& body) {
  const double start = omp_get_wtime();
  for (auto _ : state) {
    body();
    benchmark::ClobberMemory();
  }
  return omp_get_wtime() - start;
}

// Counters for a memory-bound case moving `bytes` per iteration in `seconds` all told.
inline void report_memory_bound(benchmark::State& state, double seconds, double bytes, double bound) {
  const auto iterations = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(iterations * bytes));
  state.counters["fraction_of_bandwidth"] = benchmark::Counter(iterations * bytes / seconds / bound);
  state.SetLabel(run_label());
}

// Which triad a memory-bound case is held to: a kernel that only accumulates into arrays it also
// reads (+=, in place) against the in-place triad; a kernel that writes a fresh array (paying the
// write-allocate fetch, as the out-of-place triad does) against STREAM's out-of-place triad. Either
// way the case counts its bytes as its reference does: 4 per fp32 element of every array read, 4 per
// element written, 8 for one read and written; never a write-allocate fetch.
enum class Triad { kInPlace, kOutOfPlace };

// Measures both triads (each once per process), so a case can take them before allocating its own
// arrays and outside its timed loop.
inline void measure_triads() {
  bandwidth_bound();
  out_of_place_bandwidth_bound();
}

// report_memory_bound against the case's own reference (fraction_of_bandwidth), with the ratio to
// the in-place triad kept as fraction_of_in_place_triad (equal to it for in-place cases), so a
// case held to the out-of-place triad still shows the stricter figure. The label names the bound.
inline void report_memory_bound(benchmark::State& state, double seconds, double bytes, Triad reference) {
  const double in_place = bandwidth_bound();
  const double bound = reference == Triad::kInPlace ? in_place : out_of_place_bandwidth_bound();
  const auto iterations = static_cast<double>(state.iterations());
  report_memory_bound(state, seconds, bytes, bound);
  state.counters["fraction_of_in_place_triad"] = benchmark::Counter(iterations * bytes / seconds / in_place);
  state.SetLabel(run_label() +
                 (reference == Triad::kInPlace ? " bound=triad a[i]+=s*b[i]" : " bound=triad a[i]=b[i]+s*c[i]"));
}

// Counters for a compute-bound case doing `flops` and moving `bytes` per iteration.
inline void report_compute_bound(benchmark::State& state, double seconds, double flops, double bytes, double peak) {
  const auto iterations = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(iterations * bytes));
  state.counters["FLOP/s"] = benchmark::Counter(iterations * flops, benchmark::Counter::kIsRate);
  state.counters["fraction_of_sgemm_peak"] = benchmark::Counter(iterations * flops / seconds / peak);
  state.SetLabel(run_label());
}

}  // namespace zinf::kernels::bench
