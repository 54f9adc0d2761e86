// Grouped-query attention's K/V sharing as two layout kernels around the causal attention kernel
// (kernels/attention.h), forward and backward, on raw arrays. CPU variants, and the CUDA ones at
// the end.
//
// Dimension legend: R rows (B*T), NH query heads, NKV key/value heads (NH a multiple of NKV,
// G = NH/NKV query heads per K/V head), hd head size.
//
// Layouts: `packed` [R, (NH + 2 NKV) hd] is what the fused q|k|v projection writes: q heads
// (NH*hd), then k heads (NKV*hd), then v heads (NKV*hd), row by row. `full` [R, 3 NH hd] is the
// attention kernel's layout with one K and one V per query head. Query head h reads K/V head h / G
// (HF transformers' repeat_kv: K/V head g serves query heads g*G .. g*G + G - 1).
//
//   gqa_expand:  full.q = packed.q;  full.k[h] = packed.k[h / G];  full.v[h] = packed.v[h / G]
//   gqa_reduce:  dpacked.q = dfull.q; dpacked.k[g] = sum_{j<G} dfull.k[g*G + j] (j increasing);
//                the same for v. Written (=), not accumulated; the sums are fp32 in a fixed order,
//                so the bits do not depend on the thread count or the backend's launch shape.
// With NKV == NH both are plain copies. The expansion is what lets the one attention kernel serve
// MHA, GQA and MQA; its cost is a copy of K and V per group, not a K/V tile reused in registers.
//
// Threads: rows are split into one contiguous range per OpenMP thread (`num_threads`; 0 means
// omp_get_max_threads()); small problems run on the calling thread.
// Preconditions (not checked): the sizes above behind every pointer; outputs overlap no input;
// NH, NKV, hd >= 1 and NH % NKV == 0.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda_launch.h"

namespace zinf::kernels {

struct GqaShape {
  std::size_t rows = 0;      // R
  std::size_t heads = 0;     // NH
  std::size_t kv_heads = 0;  // NKV
  std::size_t head_dim = 0;  // hd
};

}  // namespace zinf::kernels

namespace zinf::kernels::cpu {

void gqa_expand(float* full /*[R,3*NH*hd]*/, const float* packed /*[R,(NH+2NKV)*hd]*/, const GqaShape& shape,
                int num_threads = 0);
void gqa_reduce(float* dpacked /*[R,(NH+2NKV)*hd]*/, const float* dfull /*[R,3*NH*hd]*/, const GqaShape& shape,
                int num_threads = 0);

}  // namespace zinf::kernels::cpu

namespace zinf::kernels::cuda {
// Same layouts and formulas on `elem` arrays (the group sums in fp32, in the same order: fp32
// results equal the CPU's bit for bit). One thread per output element.
LaunchStatus gqa_expand(Elem elem, void* full, const void* packed, const GqaShape& shape, Stream stream);
LaunchStatus gqa_reduce(Elem elem, void* dpacked, const void* dfull, const GqaShape& shape, Stream stream);
}  // namespace zinf::kernels::cuda
