// The CPU kernels of the GPT-2 block (kernels/*.h), forward and backward, at GPT-2-small-like sizes:
// B=4, T=256, C=768, NH=12 (hs=64), V=50257 (cross-entropy also at V=8192; attention at shapes of
// its own, see its section). Every case reports the bytes the kernel must move (SetBytesProcessed;
// the count is documented next to each case) and a ratio against a bound measured in the same run
// (docs/architecture.md §8-§9):
//   fraction_of_sgemm_peak  FLOP/s / cblas_sgemm FLOP/s on 2048x2048x2048   (matmul, attention)
//   fraction_of_bandwidth   bytes/s / in-place triad bytes/s (a[i] += s*b[i]) (memory-bound kernels)
// The two bounds are measured once, lazily (function-local statics), before the first case that
// needs them, with the same threads as the kernels (omp_get_max_threads(); OpenBLAS uses its own
// pool, OPENBLAS_NUM_THREADS). BM_SgemmPeak and BM_MemoryBandwidth also time the bounds as cases of
// their own so the table shows them. Byte counts are lower bounds: 4 bytes per fp32 element read or
// written once; accumulated (+=) outputs count a read and a write; gathered/scattered rows count once.
// All cases use real time (the kernels are multi-threaded). Some working sets fit in a large L3
// (residual [B,T,C] is 3 x 3 MiB; embedding forward touches ~7 MiB), so their fraction_of_bandwidth
// can exceed 1: the DRAM triad is then not their bound, and the ratio says "cache-resident".
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/copy.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/random.h"
#include "kernels/residual.h"
#include "tests/bench/kernels_bench_support.h"

namespace zinf::kernels {
namespace {

constexpr std::size_t kB = 4;
constexpr std::size_t kT = 256;
constexpr std::size_t kC = 768;
constexpr std::size_t kNH = 12;
constexpr std::size_t kV = 50257;
constexpr std::size_t kR = kB * kT;  // rows: every position of every sequence
constexpr double kF = 4.0;           // bytes per fp32 element

// The helpers and bounds (kernels_bench_support.h).
using bench::bandwidth_bound;
using bench::filled;
using bench::kProbeElements;
using bench::kSgemmFlops;
using bench::kSgemmN;
using bench::kTriadBytesPerElement;
using bench::report_compute_bound;
using bench::report_memory_bound;
using bench::run_label;
using bench::sgemm;
using bench::sgemm_peak;
using bench::split_over_threads;
using bench::timed_loop;
using bench::tokens;
using bench::triad_in_place;
using bench::uninitialised;
using bench::zeros;

void BM_SgemmPeak(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(kSgemmN) * kSgemmN;
  auto a = filled(n);
  auto b = filled(n);
  auto c = zeros(n);
  for (auto _ : state) {
    sgemm(c.get(), a.get(), b.get());
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kSgemmFlops, benchmark::Counter::kIsRate);
  state.SetLabel("2048x2048x2048 " + run_label());
}
BENCHMARK(BM_SgemmPeak)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_MemoryBandwidth(benchmark::State& state) {
  auto a = filled(kProbeElements);
  auto b = filled(kProbeElements);
  float scale = 1e-3f;
  for (auto _ : state) {
    triad_in_place(a.get(), b.get(), scale, kProbeElements);
    scale = -scale;
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(static_cast<double>(state.iterations()) *
                                                    static_cast<double>(kProbeElements) * kTriadBytesPerElement));
  state.SetLabel(run_label() + " a[i] += s*b[i]");
}
BENCHMARK(BM_MemoryBandwidth)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- Weight initialisation: the counter-based normal fill ---------------------------------------

// Compute-bound (libm's log and cos in double): elements per second, against one thread of the
// same fill in the same run (the ratio is the threads' speed-up; 1.0 on one core).
void BM_CounterNormalFill(benchmark::State& state) {
  const auto threads = static_cast<int>(state.range(0));
  constexpr std::size_t kElements = std::size_t{1} << 22;
  auto out = zeros(kElements);
  const double seconds =
      timed_loop(state, [&] { cpu::counter_normal_fill(out.get(), kElements, 0x1234, 0, 0.02, threads); });
  state.counters["elements/s"] = static_cast<double>(kElements) * static_cast<double>(state.iterations()) / seconds;
  state.SetLabel(run_label() + (threads == 0 ? " compute threads" : " 1 thread"));
}
BENCHMARK(BM_CounterNormalFill)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- LayerNorm [R, C] ----------------------------------------------------------------------------

void BM_LayerNormForward(benchmark::State& state) {
  const double bound = bandwidth_bound();
  auto inp = filled(kR * kC);
  auto weight = filled(kC);
  auto bias = filled(kC);
  auto out = zeros(kR * kC);
  auto mean = zeros(kR);
  auto rstd = zeros(kR);
  const double seconds = timed_loop(state, [&] {
    cpu::layernorm_forward(out.get(), mean.get(), rstd.get(), inp.get(), weight.get(), bias.get(), kR, kC);
  });
  // Read inp [R,C], weight and bias [C]; write out [R,C], mean and rstd [R].
  report_memory_bound(state, seconds, kF * (2.0 * kR * kC + 2.0 * kC + 2.0 * kR), bound);
}
BENCHMARK(BM_LayerNormForward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_LayerNormBackward(benchmark::State& state) {
  const double bound = bandwidth_bound();
  auto inp = filled(kR * kC);
  auto weight = filled(kC);
  auto dout = filled(kR * kC);
  auto mean = filled(kR, -0.1f, 0.1f);
  auto rstd = filled(kR, 0.5f, 1.5f);
  auto dinp = zeros(kR * kC);
  auto dweight = zeros(kC);
  auto dbias = zeros(kC);
  const double seconds = timed_loop(state, [&] {
    cpu::layernorm_backward(dinp.get(), dweight.get(), dbias.get(), dout.get(), inp.get(), weight.get(), mean.get(),
                            rstd.get(), kR, kC);
  });
  // Read dout, inp [R,C], weight [C], mean, rstd [R]; read+write dinp [R,C], dweight, dbias [C].
  report_memory_bound(state, seconds, kF * (4.0 * kR * kC + 5.0 * kC + 2.0 * kR), bound);
}
BENCHMARK(BM_LayerNormBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- GELU on [B, T, 4C] --------------------------------------------------------------------------

constexpr std::size_t kGeluN = kR * 4 * kC;

void BM_GeluForward(benchmark::State& state) {
  const double bound = bandwidth_bound();
  auto inp = filled(kGeluN, -3.0f, 3.0f);
  auto out = zeros(kGeluN);
  const double seconds = timed_loop(state, [&] { cpu::gelu_forward(out.get(), inp.get(), kGeluN); });
  // Read inp, write out: N each.
  report_memory_bound(state, seconds, kF * 2.0 * kGeluN, bound);
}
BENCHMARK(BM_GeluForward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_GeluBackward(benchmark::State& state) {
  const double bound = bandwidth_bound();
  auto inp = filled(kGeluN, -3.0f, 3.0f);
  auto dout = filled(kGeluN);
  auto dinp = zeros(kGeluN);
  const double seconds = timed_loop(state, [&] { cpu::gelu_backward(dinp.get(), inp.get(), dout.get(), kGeluN); });
  // Read inp, dout; read+write dinp (+=): 4N.
  report_memory_bound(state, seconds, kF * 4.0 * kGeluN, bound);
}
BENCHMARK(BM_GeluBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- Residual on [B, T, C] -----------------------------------------------------------------------

constexpr std::size_t kResN = kR * kC;

void BM_ResidualForward(benchmark::State& state) {
  const double bound = bandwidth_bound();
  auto inp1 = filled(kResN);
  auto inp2 = filled(kResN);
  auto out = zeros(kResN);
  const double seconds = timed_loop(state, [&] { cpu::residual_forward(out.get(), inp1.get(), inp2.get(), kResN); });
  // Read inp1, inp2; write out: 3N.
  report_memory_bound(state, seconds, kF * 3.0 * kResN, bound);
}
BENCHMARK(BM_ResidualForward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ResidualBackward(benchmark::State& state) {
  const double bound = bandwidth_bound();
  auto dout = filled(kResN);
  auto dinp1 = zeros(kResN);
  auto dinp2 = zeros(kResN);
  const double seconds =
      timed_loop(state, [&] { cpu::residual_backward(dinp1.get(), dinp2.get(), dout.get(), kResN); });
  // Read dout; read+write dinp1 and dinp2 (+=): 5N.
  report_memory_bound(state, seconds, kF * 5.0 * kResN, bound);
}
BENCHMARK(BM_ResidualBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- Embedding: wte [V, C], wpe [T, C] -----------------------------------------------------------

void BM_EmbeddingForward(benchmark::State& state) {
  const double bound = bandwidth_bound();
  const auto tok = tokens(kR, kV);
  auto wte = filled(kV * kC);
  auto wpe = filled(kT * kC);
  auto out = zeros(kR * kC);
  const double seconds =
      timed_loop(state, [&] { cpu::embedding_forward(out.get(), tok.data(), wte.get(), wpe.get(), kB, kT, kC); });
  // Read tokens [R] (4 bytes each), the R gathered wte rows [R,C] and wpe [T,C]; write out [R,C].
  report_memory_bound(state, seconds, kF * (kR + 2.0 * kR * kC + kT * kC), bound);
}
BENCHMARK(BM_EmbeddingForward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_EmbeddingBackward(benchmark::State& state) {
  const double bound = bandwidth_bound();
  const auto tok = tokens(kR, kV);
  auto dout = filled(kR * kC);
  auto dwte = zeros(kV * kC);
  auto dwpe = zeros(kT * kC);
  const double seconds =
      timed_loop(state, [&] { cpu::embedding_backward(dwte.get(), dwpe.get(), dout.get(), tok.data(), kB, kT, kC); });
  // Read tokens [R] and dout [R,C]; read+write the R scattered dwte rows [R,C] (the tokens here are
  // almost all distinct) and dwpe [T,C].
  report_memory_bound(state, seconds, kF * (kR + 3.0 * kR * kC + 2.0 * kT * kC), bound);
}
BENCHMARK(BM_EmbeddingBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- Cross-entropy on logits [R, V] --------------------------------------------------------------

void BM_CrossEntropyForward(benchmark::State& state) {
  const double bound = bandwidth_bound();
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const auto tgt = tokens(kR, vocab);
  auto logits = filled(kR * vocab, -4.0f, 4.0f);
  auto losses = zeros(kR);
  double loss = 0.0;
  const double seconds =
      timed_loop(state, [&] { loss += cpu::cross_entropy_forward(losses.get(), logits.get(), tgt.data(), kR, vocab); });
  benchmark::DoNotOptimize(loss);
  // Read logits [R,V] and targets [R]; write losses [R].
  report_memory_bound(state, seconds, kF * (static_cast<double>(kR) * static_cast<double>(vocab) + 2.0 * kR), bound);
}
BENCHMARK(BM_CrossEntropyForward)->ArgName("V")->Arg(8192)->Arg(kV)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_CrossEntropyBackward(benchmark::State& state) {
  const double bound = bandwidth_bound();
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const auto tgt = tokens(kR, vocab);
  auto logits = filled(kR * vocab, -4.0f, 4.0f);
  auto dlogits = zeros(kR * vocab);
  const double seconds = timed_loop(state, [&] {
    cpu::cross_entropy_backward(dlogits.get(), logits.get(), tgt.data(), 1.0f / static_cast<float>(kR), kR, vocab);
  });
  // Read logits [R,V] and targets [R]; write dlogits [R,V] (overwritten, not accumulated).
  report_memory_bound(state, seconds, kF * (2.0 * static_cast<double>(kR) * static_cast<double>(vocab) + kR), bound);
}
BENCHMARK(BM_CrossEntropyBackward)->ArgName("V")->Arg(8192)->Arg(kV)->Unit(benchmark::kMillisecond)->UseRealTime();

// Both passes in one (what the CPU training step calls): compare its time with the forward's plus
// the backward's above. Out of place, as the model calls it.
void BM_CrossEntropyForwardBackward(benchmark::State& state) {
  const double bound = bandwidth_bound();
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const auto tgt = tokens(kR, vocab);
  auto logits = filled(kR * vocab, -4.0f, 4.0f);
  auto dlogits = zeros(kR * vocab);
  double loss = 0.0;
  const double seconds = timed_loop(state, [&] {
    loss += cpu::cross_entropy_forward_backward(dlogits.get(), logits.get(), tgt.data(), 1.0f / static_cast<float>(kR),
                                                kR, vocab);
  });
  benchmark::DoNotOptimize(loss);
  // Read logits [R,V] and targets [R]; write dlogits [R,V]: the backward's bytes alone.
  report_memory_bound(state, seconds, kF * (2.0 * static_cast<double>(kR) * static_cast<double>(vocab) + kR), bound);
}
BENCHMARK(BM_CrossEntropyForwardBackward)
    ->ArgName("V")
    ->Arg(8192)
    ->Arg(kV)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// ---- Causal attention on qkv [B, T, 3C] ----------------------------------------------------------
//
// Own shapes, given as arguments: GPT-2 small at its full context (B=4, T=1024, C=768, NH=12,
// hs=64) and a wider, shorter one (B=8, T=256, C=1024, NH=16, hs=64).
// FLOPs counted per (b, h): the causal mask leaves T*(T+1)/2 (query, key) pairs, and each costs
//   forward   S = Q Kᵀ and O = P V: 2*hs + 2*hs = 4*hs
//   backward  S = Q Kᵀ recomputed, dP = dO Vᵀ, dV = Pᵀ dO, dQ = dS K, dK = dSᵀ Q: 5 * 2*hs = 10*hs
// (2.5x the forward). The exp per pair and the softmax bookkeeping are not counted.

struct AttentionShape {
  std::size_t batch;
  std::size_t seq_len;
  std::size_t channels;
  std::size_t heads;
};

AttentionShape attention_shape(const benchmark::State& state) {
  return {static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)),
          static_cast<std::size_t>(state.range(2)), static_cast<std::size_t>(state.range(3))};
}

// Multiply-add FLOPs of one pass: `per_pair_per_hs` times hs for each unmasked (query, key) pair.
double attention_flops(const AttentionShape& s, double per_pair_per_hs) {
  const double pairs = static_cast<double>(s.seq_len) * static_cast<double>(s.seq_len + 1) / 2.0;
  const double hs = static_cast<double>(s.channels / s.heads);
  return per_pair_per_hs * hs * pairs * static_cast<double>(s.batch * s.heads);
}

void BM_AttentionForward(benchmark::State& state) {
  const double peak = sgemm_peak();
  const AttentionShape s = attention_shape(state);
  const std::size_t rows = s.batch * s.seq_len;
  auto qkv = filled(rows * 3 * s.channels);
  auto out = zeros(rows * s.channels);
  auto lse = zeros(s.batch * s.heads * s.seq_len);
  const double seconds = timed_loop(state, [&] {
    cpu::attention_forward(out.get(), lse.get(), qkv.get(), s.batch, s.seq_len, s.channels, s.heads, s.heads);
  });
  // Read qkv [R,3C]; write out [R,C] and lse [B,NH,T].
  const double bytes =
      kF * (4.0 * static_cast<double>(rows * s.channels) + static_cast<double>(s.batch * s.heads * s.seq_len));
  report_compute_bound(state, seconds, attention_flops(s, 4.0), bytes, peak);
}
BENCHMARK(BM_AttentionForward)
    ->ArgNames({"B", "T", "C", "NH"})
    ->Args({4, 1024, 768, 12})
    ->Args({8, 256, 1024, 16})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_AttentionBackward(benchmark::State& state) {
  const double peak = sgemm_peak();
  const AttentionShape s = attention_shape(state);
  const std::size_t rows = s.batch * s.seq_len;
  auto qkv = filled(rows * 3 * s.channels);
  auto out = zeros(rows * s.channels);
  auto lse = zeros(s.batch * s.heads * s.seq_len);
  cpu::attention_forward(out.get(), lse.get(), qkv.get(), s.batch, s.seq_len, s.channels, s.heads, s.heads);
  auto dout = filled(rows * s.channels);
  auto dqkv = zeros(rows * 3 * s.channels);
  const double seconds = timed_loop(state, [&] {
    cpu::attention_backward(dqkv.get(), dout.get(), qkv.get(), out.get(), lse.get(), s.batch, s.seq_len, s.channels,
                            s.heads, s.heads);
  });
  // Read dout, out [R,C], qkv [R,3C], lse [B,NH,T]; read+write dqkv [R,3C] (+=).
  const double bytes =
      kF * (11.0 * static_cast<double>(rows * s.channels) + static_cast<double>(s.batch * s.heads * s.seq_len));
  report_compute_bound(state, seconds, attention_flops(s, 10.0), bytes, peak);
}
BENCHMARK(BM_AttentionBackward)
    ->ArgNames({"B", "T", "C", "NH"})
    ->Args({4, 1024, 768, 12})
    ->Args({8, 256, 1024, 16})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// ---- Matmul: inp [R, C] -> out [R, OC]; OC = 3C (QKV projection) or 4C (MLP up-projection) -------

void BM_MatmulForward(benchmark::State& state) {
  const double peak = sgemm_peak();
  const auto oc = static_cast<std::size_t>(state.range(0));
  auto inp = filled(kR * kC);
  auto weight = filled(oc * kC, -0.05f, 0.05f);
  auto bias = filled(oc);
  auto out = zeros(kR * oc);
  const double seconds =
      timed_loop(state, [&] { cpu::matmul_forward(out.get(), inp.get(), weight.get(), bias.get(), kR, kC, oc); });
  // 2*R*C*OC FLOPs. Read inp [R,C], weight [OC,C], bias [OC]; write out [R,OC].
  const double r = kR;
  const double c = kC;
  const double o = static_cast<double>(oc);
  report_compute_bound(state, seconds, 2.0 * r * c * o, kF * (r * c + o * c + o + r * o), peak);
}
BENCHMARK(BM_MatmulForward)->ArgName("OC")->Arg(3 * kC)->Arg(4 * kC)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_MatmulBackward(benchmark::State& state) {
  const double peak = sgemm_peak();
  const auto oc = static_cast<std::size_t>(state.range(0));
  auto inp = filled(kR * kC);
  auto weight = filled(oc * kC, -0.05f, 0.05f);
  auto dout = filled(kR * oc, -0.01f, 0.01f);
  auto dinp = zeros(kR * kC);
  auto dweight = zeros(oc * kC);
  auto dbias = zeros(oc);
  const double seconds = timed_loop(state, [&] {
    cpu::matmul_backward(dinp.get(), dweight.get(), dbias.get(), dout.get(), inp.get(), weight.get(), kR, kC, oc);
  });
  // 4*R*C*OC FLOPs (dinp and dweight products; dbias is O(R*OC)). Read dout [R,OC], inp [R,C],
  // weight [OC,C]; read+write dinp [R,C], dweight [OC,C], dbias [OC] (+=).
  const double r = kR;
  const double c = kC;
  const double o = static_cast<double>(oc);
  report_compute_bound(state, seconds, 4.0 * r * c * o, kF * (r * o + 3.0 * r * c + 3.0 * o * c + 2.0 * o), peak);
}
BENCHMARK(BM_MatmulBackward)->ArgName("OC")->Arg(3 * kC)->Arg(4 * kC)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- Bulk copies (kernels/copy.h) ----------------------------------------------------------------
//
// Blocks of `size` bytes copied one after another through 64 MiB (cache-cold, as the engine's
// parameter and gradient copies are), by copy_bytes over the compute threads. Ratios: against the
// triad bound, and against one thread's memcpy over the same blocks measured in the same run (the
// copy copy_bytes replaces), best of 3.

constexpr std::size_t kCopySpanBytes = std::size_t{64} << 20;

template <typename Copy>
double copy_walk_seconds(unsigned char* dst, const unsigned char* src, std::size_t size, const Copy& copy) {
  const double start = omp_get_wtime();
  for (std::size_t at = 0; at + size <= kCopySpanBytes; at += size) copy(dst + at, src + at, size);
  benchmark::ClobberMemory();
  return omp_get_wtime() - start;
}

void BM_CopyBytes(benchmark::State& state) {
  const double bound = bandwidth_bound();
  const auto size = static_cast<std::size_t>(state.range(0));
  auto src = uninitialised<unsigned char>(kCopySpanBytes);
  auto dst = uninitialised<unsigned char>(kCopySpanBytes);
  cpu::zero_bytes(dst.get(), kCopySpanBytes);
  for (std::size_t i = 0; i < kCopySpanBytes; ++i) src[i] = static_cast<unsigned char>(i * 131u);
  const auto one_thread = [](unsigned char* d, const unsigned char* s, std::size_t n) { std::memcpy(d, s, n); };
  const auto split = [](unsigned char* d, const unsigned char* s, std::size_t n) { cpu::copy_bytes(d, s, n); };
  double memcpy_best = 1e30;
  for (int rep = 0; rep < 4; ++rep) {
    const double seconds = copy_walk_seconds(dst.get(), src.get(), size, one_thread);
    if (rep > 0) memcpy_best = std::min(memcpy_best, seconds);
  }
  const double walked = static_cast<double>(kCopySpanBytes / size * size);
  const double seconds = timed_loop(state, [&] { copy_walk_seconds(dst.get(), src.get(), size, split); });
  // Read and write every byte once.
  report_memory_bound(state, seconds, 2.0 * walked, bound);
  const double per_walk = seconds / static_cast<double>(state.iterations());
  state.counters["vs_one_thread_memcpy"] = benchmark::Counter(memcpy_best / per_walk);
}
BENCHMARK(BM_CopyBytes)
    ->ArgName("block")
    ->Arg(std::int64_t{64} << 10)
    ->Arg(std::int64_t{256} << 10)
    ->Arg(std::int64_t{1} << 20)
    ->Arg(std::int64_t{4} << 20)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace zinf::kernels
