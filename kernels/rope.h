// Rotary position embedding (RoPE) of the query and key heads, HF transformers' layout
// (`rotate_half`: dimension i of a head pairs with i + rotary_dim/2, not with i + 1), forward and
// backward, on raw fp32 arrays; the cos/sin tables with HF's `default`, `linear` and `llama3`
// frequency rules; `partial_rotary_factor` (only the first rotary_dim dimensions of each head
// rotate, the rest pass through). CPU variants, and the CUDA ones at the end.
//
// Dimension legend: B batch, T sequence, S row stride (elements from one position's row to the
// next), H heads rotated per row, hd head size, rd rotary dimensions (even, <= hd), h = rd/2 pairs,
// P table positions.
//
// Layout: head k of position (b, t) is the hd elements at x[(b*T + t)*S + k*hd]. In the attention
// kernel's fused qkv [B, T, 3C] (kernels/attention.h: q at columns 0..C, k at C..2C), the query
// and key heads are contiguous, so one call with x = qkv, S = 3C, H = 2*NH rotates both; with
// grouped K/V heads (NKV of them right after the NH query heads) H = NH + NKV.
//
// Forward, per head, pair i < h, at position p = pos_offset + t (cos/sin read at [p, i]):
//   out[i]     = x[i] * cos - x[i + h] * sin
//   out[i + h] = x[i + h] * cos + x[i] * sin
// which is HF's q * cos + rotate_half(q) * sin, in the same fp32 operations (no fused multiply-add),
// so with HF's tables the bits are HF's. Backward: the rotation by -theta (the transpose):
//   dinp[i]     = dout[i] * cos + dout[i + h] * sin
//   dinp[i + h] = dout[i + h] * cos - dout[i] * sin
// Both write (=), they do not accumulate: the attention's backward accumulates into dqkv, and the
// rotation then turns that gradient in place. Dimensions rd..hd-1 are copied when out != inp and
// left alone in place; elements of a row outside the H heads are never touched.
//
// Threads: rows (b, t) are split into one contiguous range per OpenMP thread (`num_threads`; 0
// means omp_get_max_threads()); small problems run on the calling thread. Every variant and thread
// count gives the same bits.
//
// Preconditions (not checked): (B*T - 1)*S + H*hd elements behind inp and out; P*h elements
// behind cos and sin with P >= pos_offset + T; rd even and 2 <= rd <= hd; out is inp (in place)
// or overlaps no input.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cuda_launch.h"

namespace zinf::kernels {

// HF's `rope_type`s whose inverse frequencies rope_inv_freq computes (`rope_scaling` / `rope_parameters`).
enum class RopeScaling { kDefault, kLinear, kLlama3 };

struct RopeFrequencies {
  std::size_t rotary_dim = 0;  // rope_rotary_dim(head_dim, partial_rotary_factor): even
  double theta = 10000.0;      // rope_theta
  RopeScaling scaling = RopeScaling::kDefault;
  double factor = 1.0;  // linear and llama3
  // llama3 only (Llama-3.1: 1, 4, 8192).
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192.0;
};

// HF's dim = int(head_dim * partial_rotary_factor): the product in double, truncated.
std::size_t rope_rotary_dim(std::size_t head_dim, double partial_rotary_factor);

// inv_freq [rd/2], the fp32 values HF's rope init functions compute (`_compute_default_rope_parameters`,
// `_compute_linear_scaling_rope_parameters`, `_compute_llama3_parameters`), with their fp32
// operations in their order (torch evaluates `a / tensor` as reciprocal(tensor) * a, so does this);
// theta ** (2i/rd) is pow in double rounded once, within an ulp of torch's fp32 pow.
// Precondition: f.rotary_dim even and >= 2; the llama3 fields positive, high > low.
void rope_inv_freq(float* inv_freq /*[rd/2]*/, const RopeFrequencies& f);

// cos, sin [P, h] for positions 0..P-1: angle = float(p) * inv_freq[i] rounded to fp32 (HF's
// position_ids.float() * inv_freq), then cos and sin of that fp32 angle computed in double and
// rounded once. HF's attention_scaling is 1 for these three types, so none is applied.
void rope_tables(float* cos /*[P,h]*/, float* sin /*[P,h]*/, const float* inv_freq /*[h]*/, std::size_t half,
                 std::size_t positions);

}  // namespace zinf::kernels

namespace zinf::kernels::cpu {

// The shape of one call: which rows, which heads, which part of each head, which positions.
struct RopeShape {
  std::size_t batch = 0;       // B
  std::size_t seq_len = 0;     // T
  std::size_t row_stride = 0;  // S
  std::size_t heads = 0;       // H
  std::size_t head_dim = 0;    // hd
  std::size_t rotary_dim = 0;  // rd
  std::size_t pos_offset = 0;  // position of t = 0
};

void rope_forward(float* out /*[B,T,S]*/, const float* inp /*[B,T,S]*/, const float* cos /*[P,h]*/,
                  const float* sin /*[P,h]*/, const RopeShape& shape, int num_threads = 0);
void rope_backward(float* dinp /*[B,T,S]*/, const float* dout /*[B,T,S]*/, const float* cos /*[P,h]*/,
                   const float* sin /*[P,h]*/, const RopeShape& shape, int num_threads = 0);

// One instruction-set variant on purpose, for tests and benchmarks. Precondition: isa_supported(isa).
void rope_forward(Isa isa, float* out /*[B,T,S]*/, const float* inp /*[B,T,S]*/, const float* cos /*[P,h]*/,
                  const float* sin /*[P,h]*/, const RopeShape& shape, int num_threads);
void rope_backward(Isa isa, float* dinp /*[B,T,S]*/, const float* dout /*[B,T,S]*/, const float* cos /*[P,h]*/,
                   const float* sin /*[P,h]*/, const RopeShape& shape, int num_threads);

}  // namespace zinf::kernels::cpu

namespace zinf::kernels::cuda {
// Same formulas and layout on `elem` arrays (fp32 tables, fp32 arithmetic in explicitly unfused
// operations: fp32 results equal the CPU's bit for bit). One thread per pair; in place allowed.
// The shape is passed as the CPU's cpu::RopeShape.
LaunchStatus rope_forward(Elem elem, void* out /*[B,T,S]*/, const void* inp /*[B,T,S]*/, const float* cos /*[P,h]*/,
                          const float* sin /*[P,h]*/, const cpu::RopeShape& shape, Stream stream);
LaunchStatus rope_backward(Elem elem, void* dinp /*[B,T,S]*/, const void* dout /*[B,T,S]*/, const float* cos /*[P,h]*/,
                           const float* sin /*[P,h]*/, const cpu::RopeShape& shape, Stream stream);
}  // namespace zinf::kernels::cuda
