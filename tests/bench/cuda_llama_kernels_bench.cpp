// The CUDA kernels a Llama-family block adds (kernels/rmsnorm.h, swiglu.h, rope.h), forward and
// backward, in bf16 at TinyLlama-1.1B's widths with B=8, T=2048 (R=16384 rows): hidden C=2048,
// intermediate I=5632, 32 query and 4 K/V heads of 64. Part of cuda_kernels_bench, registered by
// its main() through register_llama_cases; timing, byte counting and fraction_of_bandwidth are
// cuda_kernels_bench.cpp's (cuda_bench_gpu.h). Results are not checked here (tests/cuda does that).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <utility>

#include "kernels/cuda_launch.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "tests/bench/cuda_bench_gpu.h"

namespace zinf::kernels::cuda_bench {
namespace {

constexpr std::int64_t kB = 8;
constexpr std::int64_t kT = 2048;
constexpr std::int64_t kC = 2048;
constexpr std::int64_t kI = 5632;
constexpr std::int64_t kNH = 32;
constexpr std::int64_t kNKV = 4;
constexpr std::int64_t kHd = 64;
constexpr std::int64_t kR = kB * kT;
constexpr double kBf16 = 2.0;
constexpr double kF32 = 4.0;
constexpr float kEps = 1e-5f;

// ---- RMSNorm [R, C] ------------------------------------------------------------------------------

void BM_RmsNormForward(benchmark::State& state, Gpu& gpu) {
  const Bound& bound = gpu.bandwidth();
  if (!have_bound(state, bound)) return;
  Setup setup(gpu.stream());
  const void* inp = setup.values(Elem::kBF16, kR * kC);
  const void* weight = setup.values(Elem::kBF16, kC, 0.5f, 1.5f);
  void* out = setup.zeros(bf16_bytes(kR * kC));
  float* rstd = setup.zeros_f32(kR);
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(cuda::rmsnorm_forward(Elem::kBF16, out, rstd, inp, weight, kR, kC, kEps, gpu.stream()),
                    "cuda::rmsnorm_forward");
  });
  if (!seconds) return;
  // Read inp [R,C] and weight [C] (bf16); write out [R,C] (bf16) and rstd [R] (fp32).
  report_memory_bound(state, gpu, *seconds, kBf16 * (2.0 * kR * kC + kC) + kF32 * kR, bound.value);
}

void BM_RmsNormBackward(benchmark::State& state, Gpu& gpu) {
  const Bound& bound = gpu.bandwidth();
  if (!have_bound(state, bound)) return;
  Setup setup(gpu.stream());
  const void* inp = setup.values(Elem::kBF16, kR * kC);
  const void* weight = setup.values(Elem::kBF16, kC, 0.5f, 1.5f);
  const void* dout = setup.values(Elem::kBF16, kR * kC);
  const auto* rstd = static_cast<const float*>(setup.values(Elem::kF32, kR, 0.5f, 1.5f));
  void* dinp = setup.zeros(bf16_bytes(kR * kC));
  float* dweight = setup.zeros_f32(kC);
  const std::size_t scratch_bytes = cuda::rmsnorm_backward_scratch_bytes(kR, kC);
  void* scratch = setup.scratch(scratch_bytes);
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(cuda::rmsnorm_backward(Elem::kBF16, dinp, dweight, dout, inp, weight, rstd, kR, kC, scratch,
                                           scratch_bytes, gpu.stream()),
                    "cuda::rmsnorm_backward");
  });
  if (!seconds) return;
  // Read dout, inp [R,C] and weight [C] (bf16), rstd [R] (fp32); read+write dinp [R,C] (bf16, +=)
  // and dweight [C] (fp32, +=). The per-block partial sums in scratch are not counted.
  report_memory_bound(state, gpu, *seconds, kBf16 * (4.0 * kR * kC + kC) + kF32 * (kR + 2.0 * kC), bound.value);
}

// ---- SwiGLU on [R, I] ----------------------------------------------------------------------------

constexpr std::int64_t kSwiGluN = kR * kI;

void BM_SwiGluForward(benchmark::State& state, Gpu& gpu) {
  const Bound& bound = gpu.bandwidth();
  if (!have_bound(state, bound)) return;
  Setup setup(gpu.stream());
  const void* gate = setup.values(Elem::kBF16, kSwiGluN, -4.0f, 4.0f);
  const void* up = setup.values(Elem::kBF16, kSwiGluN);
  void* out = setup.zeros(bf16_bytes(kSwiGluN));
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(cuda::swiglu_forward(Elem::kBF16, out, gate, up, kSwiGluN, gpu.stream()), "cuda::swiglu_forward");
  });
  if (!seconds) return;
  // Read gate and up, write out: 3N.
  report_memory_bound(state, gpu, *seconds, kBf16 * 3.0 * kSwiGluN, bound.value);
}

void BM_SwiGluBackward(benchmark::State& state, Gpu& gpu) {
  const Bound& bound = gpu.bandwidth();
  if (!have_bound(state, bound)) return;
  Setup setup(gpu.stream());
  const void* gate = setup.values(Elem::kBF16, kSwiGluN, -4.0f, 4.0f);
  const void* up = setup.values(Elem::kBF16, kSwiGluN);
  const void* dout = setup.values(Elem::kBF16, kSwiGluN);
  void* dgate = setup.zeros(bf16_bytes(kSwiGluN));
  void* dup = setup.zeros(bf16_bytes(kSwiGluN));
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(cuda::swiglu_backward(Elem::kBF16, dgate, dup, dout, gate, up, kSwiGluN, gpu.stream()),
                    "cuda::swiglu_backward");
  });
  if (!seconds) return;
  // Read dout, gate, up; read+write dgate and dup (+=): 7N.
  report_memory_bound(state, gpu, *seconds, kBf16 * 7.0 * kSwiGluN, bound.value);
}

// ---- RoPE on the fused qkv [R, (NH + 2 NKV) hd], in place ----------------------------------------

constexpr std::int64_t kQkvStride = (kNH + 2 * kNKV) * kHd;
constexpr std::int64_t kRotated = kR * (kNH + kNKV) * kHd;

template <bool kForward>
void rope_case(benchmark::State& state, Gpu& gpu) {
  const Bound& bound = gpu.bandwidth();
  if (!have_bound(state, bound)) return;
  Setup setup(gpu.stream());
  void* qkv = setup.values(Elem::kBF16, kR * kQkvStride);
  const auto* cos = static_cast<const float*>(setup.values(Elem::kF32, kT * kHd / 2));
  const auto* sin = static_cast<const float*>(setup.values(Elem::kF32, kT * kHd / 2));
  if (!setup.ok(state)) return;
  const cpu::RopeShape shape{kB, kT, kQkvStride, kNH + kNKV, kHd, kHd, 0};
  const auto seconds = timed_loop(state, gpu, [&] {
    return kForward ? launched(cuda::rope_forward(Elem::kBF16, qkv, qkv, cos, sin, shape, gpu.stream()),
                               "cuda::rope_forward")
                    : launched(cuda::rope_backward(Elem::kBF16, qkv, qkv, cos, sin, shape, gpu.stream()),
                               "cuda::rope_backward");
  });
  if (!seconds) return;
  // Read and write the query and key heads (bf16); read the cos and sin tables [T, hd/2] (fp32) once.
  report_memory_bound(state, gpu, *seconds, kBf16 * 2.0 * kRotated + kF32 * 2.0 * kT * kHd / 2, bound.value);
}

void BM_RopeForward(benchmark::State& state, Gpu& gpu) { rope_case<true>(state, gpu); }
void BM_RopeBackward(benchmark::State& state, Gpu& gpu) { rope_case<false>(state, gpu); }

}  // namespace

void register_llama_cases(Gpu& gpu) {
  using Case = void (*)(benchmark::State&, Gpu&);
  const std::pair<const char*, Case> cases[] = {
      {"BM_RmsNormForward", BM_RmsNormForward}, {"BM_RmsNormBackward", BM_RmsNormBackward},
      {"BM_SwiGluForward", BM_SwiGluForward},   {"BM_SwiGluBackward", BM_SwiGluBackward},
      {"BM_RopeForward", BM_RopeForward},       {"BM_RopeBackward", BM_RopeBackward},
  };
  for (const auto& [name, run] : cases) {
    benchmark::RegisterBenchmark(name, [run, &gpu](benchmark::State& state) { run(state, gpu); })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace zinf::kernels::cuda_bench
