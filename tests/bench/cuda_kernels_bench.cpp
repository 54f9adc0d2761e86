// The CUDA kernels of the GPT block (kernels/<op>.h, namespace zinf::kernels::cuda) and the cuBLASLt
// GEMMs (kernels/matmul.h), forward and backward, in bf16 at the 1.3B GPT step's shapes: B=8, T=2048,
// C=2048, NH=16 (hs=128), V=50257, F=4C=8192, R=B*T=16384 rows. Attention also runs at GPT-2 small
// (B=4, T=1024, C=768, NH=12) and at TinyLlama-1.1B's (NH=32 with 4 or 32 K/V heads); Adam, sum of squares
// and conversion run over a 64M-parameter slice.
// The GPU twin of kernels_bench.cpp; it checks no results (tests/cuda does that).
//
// Every case reports the bytes the kernel must move at minimum (SetBytesProcessed: reads + writes,
// accumulated (+=) outputs read and written, scratch not counted; the count is written next to each
// case) and a ratio against a bound measured in the same run (docs/architecture.md §9):
//   fraction_of_bandwidth   bytes/s / device-to-device cudaMemcpyAsync bytes/s    (memory-bound kernels)
//   fraction_of_gemm_peak   FLOP/s / bf16 cuBLASLt forward FLOP/s at 8192^3       (attention, GEMMs)
// The copy moves 1 GiB and counts 2 bytes per byte copied (a read and a write); the GEMM goes through
// cuda::matmul_forward like the model's. Each bound is the best of 5 runs after a warm-up, measured
// once, lazily, before the first case that needs it. BM_MemoryBandwidth and BM_GemmPeak time the two
// bounds as cases of their own so the table shows them (their fraction would be 1 by definition).
//
// Timing: one non-blocking stream; each iteration is bracketed by two CUDA events and reported with
// SetIterationTime (UseManualTime), after one untimed warm-up launch. The span starts when the GPU
// reaches the start event, so it includes the host's launch latency (a few microseconds): noticeable
// only for the shortest cases (the [R, C] layernorm and residual run for tens of microseconds).
// Every CUDA call and launcher status is checked; a failure ends the case with SkipWithError naming
// the call.
// Without a usable GPU the binary prints "skipped: no CUDA device (...)" and exits 77 (CTest: skipped).
// The machinery the cases share (errors, events, buffers, the bounds, the timed loop) is in
// cuda_bench_gpu.h; the Llama block's cases (RMSNorm, SwiGLU, RoPE) in cuda_llama_kernels_bench.cpp.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/adam.h"
#include "kernels/attention.h"
#include "kernels/convert.h"
#include "kernels/cross_entropy.h"
#include "kernels/cuda_launch.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/residual.h"
#include "tests/bench/cuda_bench_gpu.h"

namespace zinf::kernels {
namespace {

using cuda::Elem;

// The 1.3B GPT step.
constexpr std::int64_t kB = 8;
constexpr std::int64_t kT = 2048;
constexpr std::int64_t kC = 2048;
constexpr std::int64_t kNH = 16;
constexpr std::int64_t kV = 50257;
constexpr std::int64_t kF = 4 * kC;   // MLP hidden width
constexpr std::int64_t kR = kB * kT;  // rows: every position of every sequence
constexpr std::int64_t kAdamParams = std::int64_t{64} << 20;

constexpr double kBf16 = 2.0;  // bytes per element
constexpr double kF32 = 4.0;
constexpr double kI32 = 4.0;

using cuda_bench::bf16_bytes;
using cuda_bench::Bound;
using cuda_bench::distinct;
using cuda_bench::elem_bytes;
using cuda_bench::Error;
using cuda_bench::f32_bytes;
using cuda_bench::gemm_ok;
using cuda_bench::Gpu;
using cuda_bench::have_bound;
using cuda_bench::kPeakFlops;
using cuda_bench::kPeakN;
using cuda_bench::kProbeBytes;
using cuda_bench::launched;
using cuda_bench::make_tokens;
using cuda_bench::report_compute_bound;
using cuda_bench::report_memory_bound;
using cuda_bench::Setup;
using cuda_bench::timed_loop;

// ---- The bounds as cases -------------------------------------------------------------------------

void BM_MemoryBandwidth(benchmark::State& state, Gpu& gpu) {
  Setup setup(gpu.stream());
  const void* src = setup.values(Elem::kF32, static_cast<std::int64_t>(kProbeBytes / 4));
  void* dst = setup.zeros(kProbeBytes);
  if (!setup.ok(state)) return;
  if (!timed_loop(state, gpu, [&] { return gpu.probe_copy(dst, src); })) return;
  state.SetBytesProcessed(
      static_cast<std::int64_t>(static_cast<double>(state.iterations()) * 2.0 * static_cast<double>(kProbeBytes)));
  state.SetLabel(gpu.label() + " cudaMemcpyAsync 1 GiB device to device");
}

void BM_GemmPeak(benchmark::State& state, Gpu& gpu) {
  Setup setup(gpu.stream());
  const void* inp = setup.values(Elem::kBF16, kPeakN * kPeakN);
  const void* weight = setup.values(Elem::kBF16, kPeakN * kPeakN, -0.05f, 0.05f);
  void* out = setup.zeros(bf16_bytes(kPeakN * kPeakN));
  if (!setup.ok(state)) return;
  if (!timed_loop(state, gpu, [&] { return gpu.peak_gemm(out, inp, weight); })) return;
  state.counters["FLOP/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kPeakFlops, benchmark::Counter::kIsRate);
  state.SetLabel(gpu.label() + " 8192x8192x8192");
}

// ---- LayerNorm [R, C] ----------------------------------------------------------------------------

constexpr float kLayerNormEps = 1e-5f;

void BM_LayerNormForward(benchmark::State& state, Gpu& gpu) {
  const Bound& bound = gpu.bandwidth();
  if (!have_bound(state, bound)) return;
  Setup setup(gpu.stream());
  const void* inp = setup.values(Elem::kBF16, kR * kC);
  const void* weight = setup.values(Elem::kBF16, kC, 0.5f, 1.5f);
  const void* bias = setup.values(Elem::kBF16, kC);
  void* out = setup.zeros(bf16_bytes(kR * kC));
  float* mean = setup.zeros_f32(kR);
  float* rstd = setup.zeros_f32(kR);
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(
        cuda::layernorm_forward(Elem::kBF16, out, mean, rstd, inp, weight, bias, kR, kC, kLayerNormEps, gpu.stream()),
        "cuda::layernorm_forward");
  });
  if (!seconds) return;
  // Read inp [R,C], weight and bias [C] (bf16); write out [R,C] (bf16), mean and rstd [R] (fp32).
  report_memory_bound(state, gpu, *seconds, kBf16 * (2.0 * kR * kC + 2.0 * kC) + kF32 * 2.0 * kR, bound.value);
}

void BM_LayerNormBackward(benchmark::State& state, Gpu& gpu) {
  const Bound& bound = gpu.bandwidth();
  if (!have_bound(state, bound)) return;
  Setup setup(gpu.stream());
  const void* inp = setup.values(Elem::kBF16, kR * kC);
  const void* weight = setup.values(Elem::kBF16, kC, 0.5f, 1.5f);
  const void* dout = setup.values(Elem::kBF16, kR * kC);
  const auto* mean = static_cast<const float*>(setup.values(Elem::kF32, kR, -0.1f, 0.1f));
  const auto* rstd = static_cast<const float*>(setup.values(Elem::kF32, kR, 0.5f, 1.5f));
  void* dinp = setup.zeros(bf16_bytes(kR * kC));
  float* dweight = setup.zeros_f32(kC);
  float* dbias = setup.zeros_f32(kC);
  const std::size_t scratch_bytes = cuda::layernorm_backward_scratch_bytes(kR, kC);
  void* scratch = setup.scratch(scratch_bytes);
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(cuda::layernorm_backward(Elem::kBF16, dinp, dweight, dbias, dout, inp, weight, mean, rstd, kR, kC,
                                             scratch, scratch_bytes, gpu.stream()),
                    "cuda::layernorm_backward");
  });
  if (!seconds) return;
  // Read dout, inp [R,C] and weight [C] (bf16), mean and rstd [R] (fp32); read+write dinp [R,C]
  // (bf16, +=) and dweight, dbias [C] (fp32, +=). The per-block partial sums in scratch are not counted.
  report_memory_bound(state, gpu, *seconds, kBf16 * (4.0 * kR * kC + kC) + kF32 * (2.0 * kR + 4.0 * kC), bound.value);
}

// ---- GELU on [R, F] ------------------------------------------------------------------------------

constexpr std::int64_t kGeluN = kR * kF;

void BM_GeluForward(benchmark::State& state, Gpu& gpu) {
  const Bound& bound = gpu.bandwidth();
  if (!have_bound(state, bound)) return;
  Setup setup(gpu.stream());
  const void* inp = setup.values(Elem::kBF16, kGeluN, -3.0f, 3.0f);
  void* out = setup.zeros(bf16_bytes(kGeluN));
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(cuda::gelu_forward(Elem::kBF16, out, inp, kGeluN, gpu.stream()), "cuda::gelu_forward");
  });
  if (!seconds) return;
  // Read inp, write out: 2N.
  report_memory_bound(state, gpu, *seconds, kBf16 * 2.0 * kGeluN, bound.value);
}

void BM_GeluBackward(benchmark::State& state, Gpu& gpu) {
  const Bound& bound = gpu.bandwidth();
  if (!have_bound(state, bound)) return;
  Setup setup(gpu.stream());
  const void* inp = setup.values(Elem::kBF16, kGeluN, -3.0f, 3.0f);
  const void* dout = setup.values(Elem::kBF16, kGeluN);
  void* dinp = setup.zeros(bf16_bytes(kGeluN));
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(cuda::gelu_backward(Elem::kBF16, dinp, inp, dout, kGeluN, gpu.stream()), "cuda::gelu_backward");
  });
  if (!seconds) return;
  // Read inp, dout; read+write dinp (+=): 4N.
  report_memory_bound(state, gpu, *seconds, kBf16 * 4.0 * kGeluN, bound.value);
}

// ---- Residual on [R, C] --------------------------------------------------------------------------

constexpr std::int64_t kResidualN = kR * kC;

void BM_ResidualForward(benchmark::State& state, Gpu& gpu) {
  const Bound& bound = gpu.bandwidth();
  if (!have_bound(state, bound)) return;
  Setup setup(gpu.stream());
  const void* inp1 = setup.values(Elem::kBF16, kResidualN);
  const void* inp2 = setup.values(Elem::kBF16, kResidualN);
  void* out = setup.zeros(bf16_bytes(kResidualN));
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(cuda::residual_forward(Elem::kBF16, out, inp1, inp2, kResidualN, gpu.stream()),
                    "cuda::residual_forward");
  });
  if (!seconds) return;
  // Read inp1, inp2; write out: 3N.
  report_memory_bound(state, gpu, *seconds, kBf16 * 3.0 * kResidualN, bound.value);
}

void BM_ResidualBackward(benchmark::State& state, Gpu& gpu) {
  const Bound& bound = gpu.bandwidth();
  if (!have_bound(state, bound)) return;
  Setup setup(gpu.stream());
  const void* dout = setup.values(Elem::kBF16, kResidualN);
  void* dinp1 = setup.zeros(bf16_bytes(kResidualN));
  void* dinp2 = setup.zeros(bf16_bytes(kResidualN));
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(cuda::residual_backward(Elem::kBF16, dinp1, dinp2, dout, kResidualN, gpu.stream()),
                    "cuda::residual_backward");
  });
  if (!seconds) return;
  // Read dout; read+write dinp1 and dinp2 (+=): 5N.
  report_memory_bound(state, gpu, *seconds, kBf16 * 5.0 * kResidualN, bound.value);
}

// ---- Embedding: wte [V, C], wpe [T, C] -----------------------------------------------------------

void BM_EmbeddingForward(benchmark::State& state, Gpu& gpu) {
  const Bound& bound = gpu.bandwidth();
  if (!have_bound(state, bound)) return;
  Setup setup(gpu.stream());
  const std::int32_t* tokens = setup.ids(make_tokens(static_cast<std::size_t>(kR), kV));
  const void* wte = setup.values(Elem::kBF16, kV * kC);
  const void* wpe = setup.values(Elem::kBF16, kT * kC);
  void* out = setup.zeros(bf16_bytes(kR * kC));
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(cuda::embedding_forward(Elem::kBF16, out, tokens, wte, wpe, kB, kT, kC, gpu.stream()),
                    "cuda::embedding_forward");
  });
  if (!seconds) return;
  // Read tokens [R] (int32), the R gathered wte rows [R,C] and wpe [T,C]; write out [R,C].
  report_memory_bound(state, gpu, *seconds, kI32 * kR + kBf16 * (2.0 * kR * kC + kT * kC), bound.value);
}

void BM_EmbeddingBackward(benchmark::State& state, Gpu& gpu) {
  const Bound& bound = gpu.bandwidth();
  if (!have_bound(state, bound)) return;
  const std::vector<std::int32_t> host_tokens = make_tokens(static_cast<std::size_t>(kR), kV);
  const auto rows_touched = static_cast<double>(distinct(host_tokens, kV));
  Setup setup(gpu.stream());
  const std::int32_t* tokens = setup.ids(host_tokens);
  const void* dout = setup.values(Elem::kBF16, kR * kC);
  float* dwte = setup.zeros_f32(kV * kC);
  float* dwpe = setup.zeros_f32(kT * kC);
  const std::size_t scratch_bytes = cuda::embedding_backward_scratch_bytes(kB, kT, kC, kV);
  void* scratch = setup.scratch(scratch_bytes);
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(cuda::embedding_backward(Elem::kBF16, dwte, dwpe, dout, tokens, kB, kT, kC, kV, scratch,
                                             scratch_bytes, gpu.stream()),
                    "cuda::embedding_backward");
  });
  if (!seconds) return;
  // Read tokens [R] (int32) and dout [R,C] (bf16); read+write the distinct dwte rows touched and
  // dwpe [T,C] (fp32, +=). The token sort in scratch is not counted.
  report_memory_bound(state, gpu, *seconds,
                      kI32 * kR + kBf16 * kR * kC + 2.0 * kF32 * (rows_touched * kC + static_cast<double>(kT * kC)),
                      bound.value);
}

// ---- Cross-entropy on logits [R, V] --------------------------------------------------------------

void BM_CrossEntropyForward(benchmark::State& state, Gpu& gpu) {
  const Bound& bound = gpu.bandwidth();
  if (!have_bound(state, bound)) return;
  Setup setup(gpu.stream());
  const std::int32_t* targets = setup.ids(make_tokens(static_cast<std::size_t>(kR), kV));
  const void* logits = setup.values(Elem::kBF16, kR * kV, -4.0f, 4.0f);
  float* losses = setup.zeros_f32(kR);
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(cuda::cross_entropy_forward(Elem::kBF16, losses, logits, targets, kR, kV, gpu.stream()),
                    "cuda::cross_entropy_forward");
  });
  if (!seconds) return;
  // Read logits [R,V] (bf16) and targets [R] (int32); write losses [R] (fp32).
  report_memory_bound(state, gpu, *seconds, kBf16 * static_cast<double>(kR * kV) + (kI32 + kF32) * kR, bound.value);
}

void BM_CrossEntropyBackward(benchmark::State& state, Gpu& gpu) {
  const Bound& bound = gpu.bandwidth();
  if (!have_bound(state, bound)) return;
  Setup setup(gpu.stream());
  const std::int32_t* targets = setup.ids(make_tokens(static_cast<std::size_t>(kR), kV));
  const void* logits = setup.values(Elem::kBF16, kR * kV, -4.0f, 4.0f);
  void* dlogits = setup.zeros(bf16_bytes(kR * kV));
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(cuda::cross_entropy_backward(Elem::kBF16, dlogits, logits, targets, 1.0f, kR, kV, gpu.stream()),
                    "cuda::cross_entropy_backward");
  });
  if (!seconds) return;
  // Read logits [R,V] and targets [R]; write dlogits [R,V] (overwritten, not accumulated).
  report_memory_bound(state, gpu, *seconds, kBf16 * 2.0 * static_cast<double>(kR * kV) + kI32 * kR, bound.value);
}

// ---- Causal attention on the packed qkv [B, T, (NH + 2 NKV) hs] -----------------------------------
//
// Arguments B, T, C, NH, NKV: the 1.3B step (8, 2048, 2048, 16, 16; hs = 128) and GPT-2 small at its
// full context (4, 1024, 768, 12, 12; hs = 64), multi-head; then TinyLlama-1.1B's attention with its
// grouped K/V heads read in place (8, 2048, 2048, 32, 4; hs = 64) next to the same width with one
// K/V head per query head (NKV = 32), so the two rows show what sharing K/V costs or saves. All on
// the tensor-core path. FLOPs as FlashAttention counts them for a causal mask: forward 2 products
// of 2*T*T*hs per (b, h), halved by the mask, i.e. 2*2*B*NH*T^2*hs/2; backward 2.5x that (five
// products instead of two); NKV does not change them (every query head attends to its T keys). Not
// the CPU bench's T*(T+1)/2 pairs: at these T the two differ by under 0.1%, and this is the count
// GPU papers report.

struct AttentionShape {
  std::int64_t batch;
  std::int64_t seq_len;
  std::int64_t channels;
  std::int64_t heads;
  std::int64_t kv_heads;
  // Width of a packed qkv row: C + 2 NKV hs.
  std::int64_t qkv_width() const { return channels + 2 * kv_heads * (channels / heads); }
};

AttentionShape attention_shape(const benchmark::State& state) {
  return {state.range(0), state.range(1), state.range(2), state.range(3), state.range(4)};
}

double attention_forward_flops(const AttentionShape& s) {
  const double t = static_cast<double>(s.seq_len);
  const double hs = static_cast<double>(s.channels / s.heads);
  return 2.0 * 2.0 * static_cast<double>(s.batch * s.heads) * t * t * hs / 2.0;
}

void BM_AttentionForward(benchmark::State& state, Gpu& gpu) {
  const Bound& peak = gpu.gemm_peak();
  if (!have_bound(state, peak)) return;
  const AttentionShape s = attention_shape(state);
  const std::int64_t rows = s.batch * s.seq_len;
  const std::int64_t lse_n = s.batch * s.heads * s.seq_len;
  Setup setup(gpu.stream());
  const void* qkv = setup.values(Elem::kBF16, rows * s.qkv_width());
  void* out = setup.zeros(bf16_bytes(rows * s.channels));
  float* lse = setup.zeros_f32(lse_n);
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(cuda::attention_forward(Elem::kBF16, out, lse, qkv, s.batch, s.seq_len, s.channels, s.heads,
                                            s.kv_heads, gpu.stream()),
                    "cuda::attention_forward");
  });
  if (!seconds) return;
  // Read qkv [R,W]; write out [R,C] (bf16) and lse [B,NH,T] (fp32).
  const double bytes =
      kBf16 * static_cast<double>(rows * (s.qkv_width() + s.channels)) + kF32 * static_cast<double>(lse_n);
  report_compute_bound(state, gpu, *seconds, attention_forward_flops(s), bytes, peak.value);
}

void BM_AttentionBackward(benchmark::State& state, Gpu& gpu) {
  const Bound& peak = gpu.gemm_peak();
  if (!have_bound(state, peak)) return;
  const AttentionShape s = attention_shape(state);
  const std::int64_t rows = s.batch * s.seq_len;
  const std::int64_t lse_n = s.batch * s.heads * s.seq_len;
  Setup setup(gpu.stream());
  const void* qkv = setup.values(Elem::kBF16, rows * s.qkv_width());
  const void* dout = setup.values(Elem::kBF16, rows * s.channels);
  void* out = setup.zeros(bf16_bytes(rows * s.channels));
  float* lse = setup.zeros_f32(lse_n);
  void* dqkv = setup.zeros(bf16_bytes(rows * s.qkv_width()));
  const std::size_t scratch_bytes = cuda::attention_backward_scratch_bytes(s.batch, s.seq_len, s.channels, s.heads);
  void* scratch = setup.scratch(scratch_bytes);
  if (!setup.ok(state)) return;
  // The backward recomputes P from qkv and lse: give it the forward's real out and lse.
  if (const Error e = launched(cuda::attention_forward(Elem::kBF16, out, lse, qkv, s.batch, s.seq_len, s.channels,
                                                       s.heads, s.kv_heads, gpu.stream()),
                               "cuda::attention_forward (inputs of the backward)")) {
    state.SkipWithError(e.message.c_str());
    return;
  }
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(cuda::attention_backward(Elem::kBF16, dqkv, dout, qkv, out, lse, s.batch, s.seq_len, s.channels,
                                             s.heads, s.kv_heads, scratch, scratch_bytes, gpu.stream()),
                    "cuda::attention_backward");
  });
  if (!seconds) return;
  // Read dout, out [R,C], qkv [R,W] (bf16) and lse [B,NH,T] (fp32); read+write dqkv [R,W] (+=).
  const double bytes =
      kBf16 * static_cast<double>(rows * (2 * s.channels + 3 * s.qkv_width())) + kF32 * static_cast<double>(lse_n);
  report_compute_bound(state, gpu, *seconds, 2.5 * attention_forward_flops(s), bytes, peak.value);
}

// ---- The model's linear layers: inp [R, C] -> out [R, OC] ----------------------------------------
//
// Arguments C, OC: the QKV projection (C -> 3C), the attention output projection (C -> C), the MLP
// up-projection (C -> 4C) and down-projection (4C -> C), all at R = 16384 rows. Each product is
// 2*R*C*OC FLOPs. The forward includes the bias (the model's layers have one; it goes through the
// cuBLASLt epilogue); the dinp product overwrites (the first contribution to an input gradient, as
// the model issues it); the dweight product accumulates into fp32.

struct LinearShape {
  std::int64_t in;
  std::int64_t out;
  double flops() const { return 2.0 * static_cast<double>(kR) * static_cast<double>(in) * static_cast<double>(out); }
};

LinearShape linear_shape(const benchmark::State& state) { return {state.range(0), state.range(1)}; }

void BM_MatmulForward(benchmark::State& state, Gpu& gpu) {
  const Bound& peak = gpu.gemm_peak();
  if (!have_bound(state, peak)) return;
  const LinearShape s = linear_shape(state);
  Setup setup(gpu.stream());
  const void* inp = setup.values(Elem::kBF16, kR * s.in);
  const void* weight = setup.values(Elem::kBF16, s.out * s.in, -0.05f, 0.05f);
  const void* bias = setup.values(Elem::kBF16, s.out);
  void* out = setup.zeros(bf16_bytes(kR * s.out));
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return gemm_ok(cuda::matmul_forward(gpu.gemm(), Elem::kBF16, out, s.out, inp, weight, bias, kR, s.in, s.out,
                                        gpu.workspace(), cuda::kGemmWorkspaceBytes, gpu.stream()),
                   "cuda::matmul_forward");
  });
  if (!seconds) return;
  // Read inp [R,C], weight [OC,C], bias [OC]; write out [R,OC].
  const double bytes = kBf16 * static_cast<double>(kR * s.in + s.out * s.in + s.out + kR * s.out);
  report_compute_bound(state, gpu, *seconds, s.flops(), bytes, peak.value);
}

void BM_MatmulBackwardInput(benchmark::State& state, Gpu& gpu) {
  const Bound& peak = gpu.gemm_peak();
  if (!have_bound(state, peak)) return;
  const LinearShape s = linear_shape(state);
  Setup setup(gpu.stream());
  const void* dout = setup.values(Elem::kBF16, kR * s.out, -0.01f, 0.01f);
  const void* weight = setup.values(Elem::kBF16, s.out * s.in, -0.05f, 0.05f);
  void* dinp = setup.zeros(bf16_bytes(kR * s.in));
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return gemm_ok(cuda::matmul_backward_input(gpu.gemm(), Elem::kBF16, dinp, false, dout, s.out, weight, kR, s.in,
                                               s.out, gpu.workspace(), cuda::kGemmWorkspaceBytes, gpu.stream()),
                   "cuda::matmul_backward_input");
  });
  if (!seconds) return;
  // Read dout [R,OC], weight [OC,C]; write dinp [R,C] (overwritten).
  const double bytes = kBf16 * static_cast<double>(kR * s.out + s.out * s.in + kR * s.in);
  report_compute_bound(state, gpu, *seconds, s.flops(), bytes, peak.value);
}

void BM_MatmulBackwardWeight(benchmark::State& state, Gpu& gpu) {
  const Bound& peak = gpu.gemm_peak();
  if (!have_bound(state, peak)) return;
  const LinearShape s = linear_shape(state);
  Setup setup(gpu.stream());
  const void* dout = setup.values(Elem::kBF16, kR * s.out, -0.01f, 0.01f);
  const void* inp = setup.values(Elem::kBF16, kR * s.in);
  float* dweight = setup.zeros_f32(s.out * s.in);
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return gemm_ok(cuda::matmul_backward_weight(gpu.gemm(), Elem::kBF16, dweight, dout, s.out, inp, kR, s.in, s.out,
                                                gpu.workspace(), cuda::kGemmWorkspaceBytes, gpu.stream()),
                   "cuda::matmul_backward_weight");
  });
  if (!seconds) return;
  // Read dout [R,OC], inp [R,C] (bf16); read+write dweight [OC,C] (fp32, +=).
  const double bytes =
      kBf16 * static_cast<double>(kR * s.out + kR * s.in) + 2.0 * kF32 * static_cast<double>(s.out * s.in);
  report_compute_bound(state, gpu, *seconds, s.flops(), bytes, peak.value);
}

// ---- Optimizer: a 64M-parameter slice ------------------------------------------------------------

void BM_AdamStep(benchmark::State& state, Gpu& gpu) {
  const Bound& bound = gpu.bandwidth();
  if (!have_bound(state, bound)) return;
  constexpr std::int64_t n = kAdamParams;
  Setup setup(gpu.stream());
  AdamSlice slice;
  slice.param = static_cast<float*>(setup.values(Elem::kF32, n));
  slice.exp_avg = static_cast<float*>(setup.values(Elem::kF32, n, -1e-3f, 1e-3f));
  slice.exp_avg_sq = static_cast<float*>(setup.values(Elem::kF32, n, 0.0f, 1e-6f));
  slice.n = static_cast<std::size_t>(n);
  slice.param_half = static_cast<std::uint16_t*>(setup.zeros(bf16_bytes(n)));
  slice.param_half_format = HalfFormat::kBF16;
  const void* grad = setup.values(Elem::kBF16, n, -1e-2f, 1e-2f);
  if (!setup.ok(state)) return;
  AdamHyper hyper;
  hyper.lr = 1e-4;
  hyper.weight_decay = 0.1;
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(cuda::adam_step(hyper, slice, grad, Elem::kBF16, gpu.stream()), "cuda::adam_step");
  });
  if (!seconds) return;
  // Read+write param, m, v (fp32); read grad (bf16); write the bf16 copy: 28 bytes per parameter.
  report_memory_bound(state, gpu, *seconds, (2.0 * 3.0 * kF32 + 2.0 * kBf16) * static_cast<double>(n), bound.value);
}

void BM_SumSquares(benchmark::State& state, Gpu& gpu) {
  const Bound& bound = gpu.bandwidth();
  if (!have_bound(state, bound)) return;
  constexpr std::int64_t n = kAdamParams;
  Setup setup(gpu.stream());
  const void* grad = setup.values(Elem::kBF16, n, -1e-2f, 1e-2f);
  auto* accumulator = static_cast<double*>(setup.zeros(sizeof(double)));
  const std::size_t scratch_bytes = cuda::sum_squares_scratch_bytes(n);
  void* scratch = setup.scratch(scratch_bytes);
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(cuda::sum_squares(Elem::kBF16, grad, n, accumulator, scratch, scratch_bytes, gpu.stream()),
                    "cuda::sum_squares");
  });
  if (!seconds) return;
  // Read the bf16 gradients; read+write the fp64 accumulator. The per-block partials are not counted.
  report_memory_bound(state, gpu, *seconds, kBf16 * static_cast<double>(n) + 2.0 * 8.0, bound.value);
}

// dst = src converted over the 64M slice: fp32 -> bf16 (the master weights' half copy) and
// bf16 -> fp32 (gradients widened for the optimizer).
void convert_case(benchmark::State& state, Gpu& gpu, Elem dst_elem, Elem src_elem) {
  const Bound& bound = gpu.bandwidth();
  if (!have_bound(state, bound)) return;
  constexpr std::int64_t n = kAdamParams;
  Setup setup(gpu.stream());
  const void* src = setup.values(src_elem, n);
  void* dst = setup.zeros(static_cast<std::size_t>(n) * elem_bytes(dst_elem));
  if (!setup.ok(state)) return;
  const auto seconds = timed_loop(state, gpu, [&] {
    return launched(cuda::convert(dst_elem, dst, src_elem, src, n, gpu.stream()), "cuda::convert");
  });
  if (!seconds) return;
  // Read src, write dst.
  report_memory_bound(state, gpu, *seconds,
                      static_cast<double>(elem_bytes(dst_elem) + elem_bytes(src_elem)) * static_cast<double>(n),
                      bound.value);
}

void BM_ConvertF32ToBF16(benchmark::State& state, Gpu& gpu) { convert_case(state, gpu, Elem::kBF16, Elem::kF32); }
void BM_ConvertBF16ToF32(benchmark::State& state, Gpu& gpu) { convert_case(state, gpu, Elem::kF32, Elem::kBF16); }

// ---- Registration --------------------------------------------------------------------------------

using Case = void (*)(benchmark::State&, Gpu&);

// Registered at run time rather than with BENCHMARK() so that every case gets the Gpu main() owns.
benchmark::internal::Benchmark* add(const char* name, Case run, Gpu& gpu) {
  return benchmark::RegisterBenchmark(name, [run, &gpu](benchmark::State& state) { run(state, gpu); })
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
}

void register_cases(Gpu& gpu) {
  add("BM_MemoryBandwidth", BM_MemoryBandwidth, gpu);
  add("BM_GemmPeak", BM_GemmPeak, gpu);
  add("BM_LayerNormForward", BM_LayerNormForward, gpu);
  add("BM_LayerNormBackward", BM_LayerNormBackward, gpu);
  add("BM_GeluForward", BM_GeluForward, gpu);
  add("BM_GeluBackward", BM_GeluBackward, gpu);
  add("BM_ResidualForward", BM_ResidualForward, gpu);
  add("BM_ResidualBackward", BM_ResidualBackward, gpu);
  add("BM_EmbeddingForward", BM_EmbeddingForward, gpu);
  add("BM_EmbeddingBackward", BM_EmbeddingBackward, gpu);
  add("BM_CrossEntropyForward", BM_CrossEntropyForward, gpu);
  add("BM_CrossEntropyBackward", BM_CrossEntropyBackward, gpu);
  const std::pair<const char*, Case> attention[] = {{"BM_AttentionForward", BM_AttentionForward},
                                                    {"BM_AttentionBackward", BM_AttentionBackward}};
  for (const auto& [name, run] : attention) {
    add(name, run, gpu)
        ->ArgNames({"B", "T", "C", "NH", "NKV"})
        ->Args({kB, kT, kC, kNH, kNH})
        ->Args({4, 1024, 768, 12, 12})
        ->Args({kB, kT, kC, 32, 4})    // TinyLlama-1.1B: grouped K/V heads read in place
        ->Args({kB, kT, kC, 32, 32});  // the same width, one K/V head per query head
  }
  const std::pair<const char*, Case> linears[] = {{"BM_MatmulForward", BM_MatmulForward},
                                                  {"BM_MatmulBackwardInput", BM_MatmulBackwardInput},
                                                  {"BM_MatmulBackwardWeight", BM_MatmulBackwardWeight}};
  for (const auto& [name, run] : linears) {
    add(name, run, gpu)->ArgNames({"C", "OC"})->Args({kC, 3 * kC})->Args({kC, kC})->Args({kC, kF})->Args({kF, kC});
  }
  add("BM_AdamStep", BM_AdamStep, gpu);
  add("BM_SumSquares", BM_SumSquares, gpu);
  add("BM_ConvertF32ToBF16", BM_ConvertF32ToBF16, gpu);
  add("BM_ConvertBF16ToF32", BM_ConvertBF16ToF32, gpu);
  cuda_bench::register_llama_cases(gpu);
}

}  // namespace
}  // namespace zinf::kernels

int main(int argc, char** argv) {
  // Before anything touches CUDA further: without a usable device, say why and report "skipped".
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    std::printf("skipped: no CUDA device (%s)\n",
                error != cudaSuccess ? cudaGetErrorString(error) : "cudaGetDeviceCount found 0 devices");
    return 77;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  int status = 0;
  {
    // Scoped so that the device state is released before Shutdown().
    zinf::kernels::Gpu gpu;
    if (const zinf::kernels::Error e = gpu.init()) {
      std::fprintf(stderr, "error: %s\n", e.message.c_str());
      status = 1;
    } else {
      zinf::kernels::register_cases(gpu);
      benchmark::RunSpecifiedBenchmarks();
      // The registered cases refer to gpu: drop them before it goes.
      benchmark::ClearRegisteredBenchmarks();
    }
  }
  benchmark::Shutdown();
  return status;
}
