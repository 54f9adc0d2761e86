// The CPU kernels a Llama-family block adds to the GPT-2 one (kernels/rmsnorm.h, swiglu.h,
// rope.h, and grouped-query attention in kernels/attention.h), forward and backward, at
// TinyLlama-1.1B's widths with B=4, T=256: hidden C=2048, intermediate I=5632, 32 query heads and 4
// K/V heads of 64. Part of kernels_bench.
//
// Memory-bound cases: each is held to the STREAM triad that moves memory the way it does, and counts
// its bytes the way that triad's bytes are counted (SetBytesProcessed; the count is next to each case):
// 4 bytes per fp32 element of every array read, 4 per element written, 8 for an array read and
// written (+=); the write-allocate fetch a plain store pays on a line it does not read is never
// counted, neither in the kernel nor in the triad.
//   - A kernel that only accumulates into (or rewrites in place) arrays it reads — RMSNorm backward,
//     SwiGLU backward, RoPE — against the in-place triad a[i] += s*b[i] (12 bytes per element; no
//     write-allocate), the bound kernels_bench.cpp's memory-bound cases use.
//   - A kernel that writes a fresh array — RMSNorm forward (out), SwiGLU forward (out) — against
//     STREAM's out-of-place triad a[i] = b[i] + s*c[i] (12 bytes counted per element, as STREAM
//     counts them, while the hardware also fetches each line of a before overwriting it): the same
//     write-allocate cost, so the ratio compares like with like.
// fraction_of_bandwidth is the ratio to the case's own triad (the label says which);
// fraction_of_in_place_triad is always the ratio to the in-place triad, so for a fresh-output kernel
// the stricter figure stays visible. BM_MemoryBandwidthOutOfPlace times the out-of-place triad as a
// case of its own (BM_MemoryBandwidth, in kernels_bench.cpp, the in-place one).
//
// The attention cases report FLOP/s and fraction_of_sgemm_peak against the same-process sgemm
// probe, counting kernels_bench.cpp's attention FLOPs (2 per multiply-add, the causal pairs only);
// the RoPE-then-attention case is the forward as the model runs it (a separate RoPE pass over q and
// k, then the attention), next to the same forward with RoPE fused into the attention's Q/K load,
// and likewise for the backward (attention backward then RoPE backward, against the fused backward).
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/attention.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "tests/bench/kernels_bench_support.h"

namespace zinf::kernels {
namespace {

using bench::filled;
using bench::measure_triads;
using bench::report_compute_bound;
using bench::report_memory_bound;
using bench::sgemm_peak;
using bench::timed_loop;
using bench::Triad;
using bench::zeros;

constexpr std::size_t kB = 4;
constexpr std::size_t kT = 256;
constexpr std::size_t kC = 2048;
constexpr std::size_t kI = 5632;
constexpr std::size_t kNH = 32;
constexpr std::size_t kNKV = 4;
constexpr std::size_t kHd = 64;
constexpr std::size_t kR = kB * kT;
constexpr double kF = 4.0;

// ---- The out-of-place triad, as a case of its own ----------------------------------------------

void BM_MemoryBandwidthOutOfPlace(benchmark::State& state) {
  auto a = zeros(bench::kProbeElements);
  auto b = filled(bench::kProbeElements);
  auto c = filled(bench::kProbeElements);
  float scale = 1e-3f;
  for (auto _ : state) {
    bench::triad_out_of_place(a.get(), b.get(), c.get(), scale, bench::kProbeElements);
    scale = -scale;
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(
      static_cast<std::int64_t>(static_cast<double>(state.iterations()) * static_cast<double>(bench::kProbeElements) *
                                bench::kOutOfPlaceTriadBytesPerElement));
  state.SetLabel(bench::run_label() + " a[i] = b[i] + s*c[i]");
}
BENCHMARK(BM_MemoryBandwidthOutOfPlace)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- RMSNorm [R, C] ------------------------------------------------------------------------------

// Reads inp and weight, writes out and rstd.
void BM_RmsNormForward(benchmark::State& state) {
  measure_triads();
  auto inp = filled(kR * kC);
  auto weight = filled(kC, 0.5f, 1.5f);
  auto out = zeros(kR * kC);
  auto rstd = zeros(kR);
  const double seconds =
      timed_loop(state, [&] { cpu::rmsnorm_forward(out.get(), rstd.get(), inp.get(), weight.get(), kR, kC, 1e-5f); });
  report_memory_bound(state, seconds, kF * (2.0 * kR * kC + kC + kR), Triad::kOutOfPlace);
}
BENCHMARK(BM_RmsNormForward)->Unit(benchmark::kMillisecond)->UseRealTime();

// Reads dout, inp, weight, rstd; dinp and dweight are read and written.
void BM_RmsNormBackward(benchmark::State& state) {
  measure_triads();
  auto inp = filled(kR * kC);
  auto weight = filled(kC, 0.5f, 1.5f);
  auto dout = filled(kR * kC);
  auto out = zeros(kR * kC);
  auto rstd = zeros(kR);
  auto dinp = zeros(kR * kC);
  auto dweight = zeros(kC);
  cpu::rmsnorm_forward(out.get(), rstd.get(), inp.get(), weight.get(), kR, kC, 1e-5f);
  const double seconds = timed_loop(state, [&] {
    cpu::rmsnorm_backward(dinp.get(), dweight.get(), dout.get(), inp.get(), weight.get(), rstd.get(), kR, kC);
  });
  report_memory_bound(state, seconds, kF * (4.0 * kR * kC + 3.0 * kC + kR), Triad::kInPlace);
}
BENCHMARK(BM_RmsNormBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- SwiGLU [R, I] -------------------------------------------------------------------------------

constexpr std::size_t kSwiGluN = kR * kI;

// Reads gate and up, writes out.
void BM_SwiGluForward(benchmark::State& state) {
  measure_triads();
  auto gate = filled(kSwiGluN, -4.0f, 4.0f);
  auto up = filled(kSwiGluN);
  auto out = zeros(kSwiGluN);
  const double seconds = timed_loop(state, [&] { cpu::swiglu_forward(out.get(), gate.get(), up.get(), kSwiGluN); });
  report_memory_bound(state, seconds, kF * 3.0 * kSwiGluN, Triad::kOutOfPlace);
}
BENCHMARK(BM_SwiGluForward)->Unit(benchmark::kMillisecond)->UseRealTime();

// Reads dout, gate and up; dgate and dup are read and written.
void BM_SwiGluBackward(benchmark::State& state) {
  measure_triads();
  auto gate = filled(kSwiGluN, -4.0f, 4.0f);
  auto up = filled(kSwiGluN);
  auto dout = filled(kSwiGluN);
  auto dgate = zeros(kSwiGluN);
  auto dup = zeros(kSwiGluN);
  const double seconds = timed_loop(
      state, [&] { cpu::swiglu_backward(dgate.get(), dup.get(), dout.get(), gate.get(), up.get(), kSwiGluN); });
  report_memory_bound(state, seconds, kF * 7.0 * kSwiGluN, Triad::kInPlace);
}
BENCHMARK(BM_SwiGluBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- RoPE on the fused qkv [R, (NH + 2 NKV) hd], in place ----------------------------------------

constexpr std::size_t kQkvStride = (kNH + 2 * kNKV) * kHd;
constexpr std::size_t kRotated = kR * (kNH + kNKV) * kHd;  // the query and key heads' elements

struct RopeSetup {
  std::unique_ptr<float[]> qkv = filled(kR * kQkvStride);
  std::vector<float> cos = std::vector<float>(kT * kHd / 2);
  std::vector<float> sin = std::vector<float>(kT * kHd / 2);
  cpu::RopeShape shape{kB, kT, kQkvStride, kNH + kNKV, kHd, kHd, 0};

  RopeSetup() {
    RopeFrequencies f;
    f.rotary_dim = kHd;
    std::vector<float> inv(kHd / 2);
    rope_inv_freq(inv.data(), f);
    rope_tables(cos.data(), sin.data(), inv.data(), kHd / 2, kT);
  }
};

// Reads and writes the query and key heads; reads the cos and sin tables once.
double rope_bytes() { return kF * (2.0 * kRotated + 2.0 * kT * kHd / 2); }

void BM_RopeForward(benchmark::State& state) {
  measure_triads();
  RopeSetup s;
  const double seconds =
      timed_loop(state, [&] { cpu::rope_forward(s.qkv.get(), s.qkv.get(), s.cos.data(), s.sin.data(), s.shape); });
  report_memory_bound(state, seconds, rope_bytes(), Triad::kInPlace);
}
BENCHMARK(BM_RopeForward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_RopeBackward(benchmark::State& state) {
  measure_triads();
  RopeSetup s;
  const double seconds =
      timed_loop(state, [&] { cpu::rope_backward(s.qkv.get(), s.qkv.get(), s.cos.data(), s.sin.data(), s.shape); });
  report_memory_bound(state, seconds, rope_bytes(), Triad::kInPlace);
}
BENCHMARK(BM_RopeBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- Grouped-query attention on the packed qkv [R, (NH + 2 NKV) hd] -------------------------------

constexpr std::size_t kAttnC = kNH * kHd;

// FLOPs of one pass: `per_pair_per_hd` times hd for every unmasked (query, key) pair of every
// query head (4 forward: QKᵀ and PV; 10 backward: S, dP, dV, dK, dQ), as kernels_bench.cpp counts.
double gqa_flops(double per_pair_per_hd) {
  const double pairs = static_cast<double>(kT) * static_cast<double>(kT + 1) / 2.0;
  return per_pair_per_hd * static_cast<double>(kHd) * pairs * static_cast<double>(kB * kNH);
}

// Reads qkv, writes out [R, C] and lse.
double gqa_forward_bytes() { return kF * (static_cast<double>(kR * (kQkvStride + kAttnC)) + kB * kNH * kT); }

void BM_GqaAttentionForward(benchmark::State& state) {
  const double peak = sgemm_peak();
  auto qkv = filled(kR * kQkvStride);
  auto out = zeros(kR * kAttnC);
  auto lse = zeros(kB * kNH * kT);
  const double seconds =
      timed_loop(state, [&] { cpu::attention_forward(out.get(), lse.get(), qkv.get(), kB, kT, kAttnC, kNH, kNKV); });
  report_compute_bound(state, seconds, gqa_flops(4.0), gqa_forward_bytes(), peak);
}
BENCHMARK(BM_GqaAttentionForward)->Unit(benchmark::kMillisecond)->UseRealTime();

// The forward as the model runs it with rotary positions: RoPE over the q and k heads in place,
// then the attention. FLOPs counted are the attention's only, so fraction_of_sgemm_peak drops by
// exactly the RoPE pass's share of the time.
void BM_GqaRopeThenAttentionForward(benchmark::State& state) {
  const double peak = sgemm_peak();
  RopeSetup r;
  auto out = zeros(kR * kAttnC);
  auto lse = zeros(kB * kNH * kT);
  const double seconds = timed_loop(state, [&] {
    cpu::rope_forward(r.qkv.get(), r.qkv.get(), r.cos.data(), r.sin.data(), r.shape);
    cpu::attention_forward(out.get(), lse.get(), r.qkv.get(), kB, kT, kAttnC, kNH, kNKV);
  });
  report_compute_bound(state, seconds, gqa_flops(4.0), gqa_forward_bytes() + rope_bytes(), peak);
}
BENCHMARK(BM_GqaRopeThenAttentionForward)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same forward with the rotation fused into the attention's Q/K load (AttentionRope): qkv is
// read unrotated and stays so; no separate pass. Same FLOPs and bytes counted as the case above, so
// the two fractions compare the two ways of running the same forward.
void BM_GqaRopeFusedAttentionForward(benchmark::State& state) {
  const double peak = sgemm_peak();
  RopeSetup r;
  const cpu::AttentionRope rope{r.cos.data(), r.sin.data(), kHd, 0};
  auto out = zeros(kR * kAttnC);
  auto lse = zeros(kB * kNH * kT);
  const double seconds = timed_loop(
      state, [&] { cpu::attention_forward(out.get(), lse.get(), r.qkv.get(), kB, kT, kAttnC, kNH, kNKV, rope); });
  report_compute_bound(state, seconds, gqa_flops(4.0), gqa_forward_bytes() + rope_bytes(), peak);
}
BENCHMARK(BM_GqaRopeFusedAttentionForward)->Unit(benchmark::kMillisecond)->UseRealTime();

// Bytes of the attention's backward: reads dout, out [R, C], qkv and lse; dqkv read and written.
double gqa_backward_bytes() { return kF * (static_cast<double>(kR * (3 * kQkvStride + 2 * kAttnC)) + kB * kNH * kT); }

// The backward as the model ran it with rotary positions before the fusion: the attention's
// backward on the rotated qkv, then RoPE's backward over dqkv's q and k heads in place.
void BM_GqaAttentionThenRopeBackward(benchmark::State& state) {
  const double peak = sgemm_peak();
  RopeSetup r;
  auto out = zeros(kR * kAttnC);
  auto lse = zeros(kB * kNH * kT);
  cpu::rope_forward(r.qkv.get(), r.qkv.get(), r.cos.data(), r.sin.data(), r.shape);
  cpu::attention_forward(out.get(), lse.get(), r.qkv.get(), kB, kT, kAttnC, kNH, kNKV);
  auto dout = filled(kR * kAttnC);
  auto dqkv = zeros(kR * kQkvStride);
  const double seconds = timed_loop(state, [&] {
    cpu::attention_backward(dqkv.get(), dout.get(), r.qkv.get(), out.get(), lse.get(), kB, kT, kAttnC, kNH, kNKV);
    cpu::rope_backward(dqkv.get(), dqkv.get(), r.cos.data(), r.sin.data(), r.shape);
  });
  report_compute_bound(state, seconds, gqa_flops(10.0), gqa_backward_bytes() + rope_bytes(), peak);
}
BENCHMARK(BM_GqaAttentionThenRopeBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same backward with the rotation fused: q and k rotated again as they are loaded, dQ and dK
// turned back on their way into dqkv.
void BM_GqaRopeFusedAttentionBackward(benchmark::State& state) {
  const double peak = sgemm_peak();
  RopeSetup r;
  const cpu::AttentionRope rope{r.cos.data(), r.sin.data(), kHd, 0};
  auto out = zeros(kR * kAttnC);
  auto lse = zeros(kB * kNH * kT);
  cpu::attention_forward(out.get(), lse.get(), r.qkv.get(), kB, kT, kAttnC, kNH, kNKV, rope);
  auto dout = filled(kR * kAttnC);
  auto dqkv = zeros(kR * kQkvStride);
  const double seconds = timed_loop(state, [&] {
    cpu::attention_backward(dqkv.get(), dout.get(), r.qkv.get(), out.get(), lse.get(), kB, kT, kAttnC, kNH, kNKV, rope);
  });
  report_compute_bound(state, seconds, gqa_flops(10.0), gqa_backward_bytes() + rope_bytes(), peak);
}
BENCHMARK(BM_GqaRopeFusedAttentionBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

// Reads dout, out [R, C], qkv and lse; dqkv is read and written (+=).
void BM_GqaAttentionBackward(benchmark::State& state) {
  const double peak = sgemm_peak();
  auto qkv = filled(kR * kQkvStride);
  auto out = zeros(kR * kAttnC);
  auto lse = zeros(kB * kNH * kT);
  cpu::attention_forward(out.get(), lse.get(), qkv.get(), kB, kT, kAttnC, kNH, kNKV);
  auto dout = filled(kR * kAttnC);
  auto dqkv = zeros(kR * kQkvStride);
  const double seconds = timed_loop(state, [&] {
    cpu::attention_backward(dqkv.get(), dout.get(), qkv.get(), out.get(), lse.get(), kB, kT, kAttnC, kNH, kNKV);
  });
  report_compute_bound(state, seconds, gqa_flops(10.0), gqa_backward_bytes(), peak);
}
BENCHMARK(BM_GqaAttentionBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace zinf::kernels
