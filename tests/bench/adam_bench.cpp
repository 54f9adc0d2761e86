// CPU Adam/AdamW step throughput against the machine's memory bandwidth. The step reads p, m, v and
// the gradient and writes p, m and v back (plus the bf16 copy when asked): 28 bytes per fp32-gradient
// parameter, 30 with the copy; far too little arithmetic to be compute-bound, so the bound is the
// memory bandwidth, measured with the same threads by an in-place triad a[i] += s * b[i]
// (STREAM-like: two arrays read, one written; in place, as Adam is, so there is no write-allocate
// traffic that the byte count would miss). BM_MemoryBandwidth times the triad alone on 2 x 256 MiB;
// each Adam benchmark of 16M parameters or more also runs one triad after every step (untimed for
// the step) and reports
//   params_per_second        parameters updated per second
//   bytes_per_second         the bytes above per second (SetBytesProcessed)
//   bound_bytes_per_second   the interleaved triads' bytes per second
//   fraction_of_bandwidth    bytes_per_second / bound_bytes_per_second (1.0 = at the bound)
// Threads: omp_get_max_threads() (set OMP_NUM_THREADS); instruction set: the best this CPU has
// (cap it with ZINF_KERNELS_ISA=avx2|scalar). scripts/bench/adam_vs_torch.sh runs this next to
// PyTorch's AdamW and prints the ratios.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/adam.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/parallel.h"
#include "tests/bench/adam_ds_formula.h"

namespace zinf::kernels {
namespace {

// A heap array without value-initialisation: the benchmarks write it in parallel first, so that
// every thread's pages are touched by that thread.
template <typename T>
std::unique_ptr<T[]> uninitialised(std::size_t n) {
  return std::unique_ptr<T[]>(new T[n]);
}

// A deterministic fill, cheap enough for a billion elements: values in [-1, 1).
// Split as the kernels split (kernels/cpu/parallel.h), so each thread first-touches the pages it
// later updates.
template <typename Body>
void split_over_threads(std::size_t n, const Body& body) {
  cpu::parallel::for_each_range(n, std::size_t{1} << 16, 64, omp_get_max_threads(), body);
}

template <typename T, typename Make>
void parallel_fill(T* data, std::size_t n, Make make) {
  split_over_threads(n, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const auto h = static_cast<std::uint32_t>(static_cast<std::uint64_t>(i) * 2654435761u);
      data[i] = make(static_cast<float>(h >> 8) * 0x1p-23f - 1.0f);
    }
  });
}

std::string run_label() {
  return "threads=" + std::to_string(omp_get_max_threads()) + " isa=" + std::string(cpu::isa_name(cpu::best_isa()));
}

// ---- Memory bandwidth probe ----------------------------------------------------------------------

constexpr std::size_t kProbeElements = std::size_t{64} << 20;  // 2 x 256 MiB: far past any cache
constexpr std::int64_t kTriadBytesPerElement = 12;             // read a and b, write a

void triad_in_place(float* a, const float* b, float scale, std::size_t n) {
  split_over_threads(n, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) a[i] += scale * b[i];
  });
}

void BM_MemoryBandwidth(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto a = uninitialised<float>(n);
  auto b = uninitialised<float>(n);
  parallel_fill(a.get(), n, [](float x) { return x; });
  parallel_fill(b.get(), n, [](float x) { return x * 0.5f; });
  float scale = 1e-3f;
  for (auto _ : state) {
    triad_in_place(a.get(), b.get(), scale, n);
    scale = -scale;
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n) *
                          kTriadBytesPerElement);
  state.SetLabel(run_label() + " a[i] += s*b[i]");
}
BENCHMARK(BM_MemoryBandwidth)->Arg(kProbeElements)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- Adam ----------------------------------------------------------------------------------------

// Adam benchmarks at least this large report fraction_of_bandwidth (smaller ones partly fit in cache).
constexpr std::size_t kMinBoundedElements = std::size_t{16} << 20;

// What one Adam benchmark times: zinf's step with fp32 or bf16 gradients, or DeepSpeedCPUAdam's
// formula (adam_ds_formula.h) on the same arrays, as a same-run baseline.
enum class Step { kZinf, kZinfBf16Grad, kDsFormula };

template <Step kStep>
void run_adam_benchmark(benchmark::State& state) {
  constexpr bool kHalfGrad = kStep == Step::kZinfBf16Grad;
  const auto n = static_cast<std::size_t>(state.range(0));
  const bool half_copy = state.range(1) != 0;
  auto param = uninitialised<float>(n);
  auto exp_avg = uninitialised<float>(n);
  auto exp_avg_sq = uninitialised<float>(n);
  auto grad_f32 = uninitialised<float>(kHalfGrad ? 0 : n);
  auto grad_half = uninitialised<std::uint16_t>(kHalfGrad ? n : 0);
  auto param_half = uninitialised<std::uint16_t>(half_copy ? n : 0);
  parallel_fill(param.get(), n, [](float x) { return x; });
  parallel_fill(exp_avg.get(), n, [](float x) { return 0.01f * x; });
  parallel_fill(exp_avg_sq.get(), n, [](float x) { return 1e-4f * x * x; });
  if constexpr (kHalfGrad) {
    parallel_fill(grad_half.get(), n, [](float x) {
      return static_cast<std::uint16_t>(0x3C00u + (static_cast<std::uint32_t>((x + 1.0f) * 512.0f) & 0x3FFu));
    });
  } else {
    parallel_fill(grad_f32.get(), n, [](float x) { return x; });
  }
  if (half_copy) parallel_fill(param_half.get(), n, [](float) { return std::uint16_t{0}; });

  AdamSlice slice;
  slice.param = param.get();
  slice.exp_avg = exp_avg.get();
  slice.exp_avg_sq = exp_avg_sq.get();
  slice.n = n;
  slice.param_half = half_copy ? param_half.get() : nullptr;
  slice.param_half_format = HalfFormat::kBF16;
  AdamHyper hyper;
  hyper.weight_decay = 0.01;
  hyper.step = 10;
  if constexpr (kStep == Step::kDsFormula) {
    if (!cpu::isa_supported(cpu::Isa::kAvx2) || n % 64 != 0 || half_copy) {
      state.SkipWithError("DeepSpeed's formula: AVX2, a multiple of 64 parameters and no half copy only");
      return;
    }
  }
  [[maybe_unused]] const bench::DsAdamScalars ds = bench::ds_adam_scalars(
      static_cast<float>(hyper.lr), static_cast<float>(hyper.beta1), static_cast<float>(hyper.beta2),
      static_cast<float>(hyper.eps), static_cast<float>(hyper.weight_decay), static_cast<int>(hyper.step));

  // Timed by hand (UseManualTime): each Adam step is followed by one untimed-for-Adam triad over
  // two of the same arrays (exp_avg += s * exp_avg_sq), so the bound is measured in the same
  // seconds, on the same pages and with the same thread split as the step it bounds. The VM this
  // runs on shows its memory bandwidth drifting by 2x over a minute; a probe taken at another
  // time would make the fraction drift with it.
  const bool bounded = n >= kMinBoundedElements;
  double adam_seconds = 0.0;
  double triad_seconds = 0.0;
  float scale = 1e-6f;
  for (auto _ : state) {
    const double start = omp_get_wtime();
    if constexpr (kStep == Step::kZinfBf16Grad) {
      cpu::adam_step(hyper, slice, grad_half.get(), HalfFormat::kBF16);
    } else if constexpr (kStep == Step::kZinf) {
      cpu::adam_step(hyper, slice, grad_f32.get());
    } else {
#if ZINF_KERNELS_X86
      bench::ds_adamw_step_avx2(ds, slice.param, slice.exp_avg, slice.exp_avg_sq, grad_f32.get(), n);
#endif
    }
    benchmark::ClobberMemory();
    const double seconds = omp_get_wtime() - start;
    state.SetIterationTime(seconds);
    adam_seconds += seconds;
    if (bounded) {
      const double triad_start = omp_get_wtime();
      triad_in_place(exp_avg.get(), exp_avg_sq.get(), scale, n);
      benchmark::ClobberMemory();
      triad_seconds += omp_get_wtime() - triad_start;
      scale = -scale;
    }
  }

  // Read p, m, v (12) and the gradient; write p, m, v (12) and the optional bf16 copy.
  const std::int64_t bytes_per_param = 24 + (kHalfGrad ? 2 : 4) + (half_copy ? 2 : 0);
  const auto iterations = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n) *
                          bytes_per_param);
  state.counters["params_per_second"] =
      benchmark::Counter(iterations * static_cast<double>(n), benchmark::Counter::kIsRate);
  if (bounded) {
    const double achieved = iterations * static_cast<double>(n) * static_cast<double>(bytes_per_param) / adam_seconds;
    const double bound =
        iterations * static_cast<double>(n) * static_cast<double>(kTriadBytesPerElement) / triad_seconds;
    // Binary prefixes, as Google Benchmark prints bytes_per_second, so the two columns compare.
    state.counters["bound_bytes_per_second"] =
        benchmark::Counter(bound, benchmark::Counter::kDefaults, benchmark::Counter::kIs1024);
    state.counters["fraction_of_bandwidth"] = benchmark::Counter(achieved / bound);
  }
  state.SetLabel(run_label() + (half_copy ? " +bf16 copy" : "") +
                 (kStep == Step::kDsFormula ? " DeepSpeed's formula" : ""));
}

void BM_AdamW_f32grad(benchmark::State& state) { run_adam_benchmark<Step::kZinf>(state); }
void BM_AdamW_bf16grad(benchmark::State& state) { run_adam_benchmark<Step::kZinfBf16Grad>(state); }
void BM_AdamW_ds_formula(benchmark::State& state) { run_adam_benchmark<Step::kDsFormula>(state); }

// Arguments: {parameters, bf16 param copy (0/1)}. 1M is the smoke size (mostly cache-resident);
// 16Ki (256 KiB of state, inside one core's L2; run it with OMP_NUM_THREADS=1, since a slice that
// small runs on the calling thread) shows the arithmetic alone; 16Mi is `zinf bench peers`'s
// optimizer size.
BENCHMARK(BM_AdamW_f32grad)
    ->ArgNames({"params", "copy"})
    ->Args({16 << 10, 0})
    ->Args({1 << 20, 0})
    ->Args({16 << 20, 0})
    ->Args({64 << 20, 0})
    ->Args({16 << 20, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK(BM_AdamW_ds_formula)
    ->ArgNames({"params", "copy"})
    ->Args({16 << 10, 0})
    ->Args({16 << 20, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK(BM_AdamW_bf16grad)
    ->ArgNames({"params", "copy"})
    ->Args({16 << 20, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

}  // namespace
}  // namespace zinf::kernels
