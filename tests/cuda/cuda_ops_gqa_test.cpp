// CudaOps against CpuOps for grouped-query attention: the expand/reduce pair with attention over
// the expansion, and attention reading grouped K/V heads in place from packed q|k|v, forward and
// backward (+=), in fp32, bf16 and fp16, on the harness of cuda_ops_test.cpp (cuda_ops_harness.h).
// The kernels themselves against the CPU twin: attention_gqa_test.cpp. Needs a GPU (the binary
// exits 77 without one).
#include <cmath>
#include <cstdint>

#include "tests/cuda/cuda_ops_harness.h"

namespace {

using namespace zinf::cuda_ops_test;

TEST_CASE("cuda ops: grouped-query expand and reduce, then attention over the expansion") {
  Harness h;
  constexpr std::int64_t kHeads = 4, kKv = 2, kHd = 12;  // head_dim not a multiple of 8
  for (std::int64_t kv : {kKv, std::int64_t{1}}) {
    for (DType dtype : kComputeDtypes) {
      INFO(zinf::dtype_name(dtype) << " kv_heads " << kv);
      auto packed = h.random(dtype, {kB, kT, (kHeads + 2 * kv) * kHd});
      auto full = h.poisoned(dtype, {kB, kT, 3 * kHeads * kHd});
      h.gpu().gqa_expand(full.gpu, packed.gpu, kHeads, kv);
      h.cpu().gqa_expand(full.cpu, packed.cpu, kHeads, kv);
      h.check(full, 0.0);
      auto out = h.poisoned(dtype, {kB, kT, kHeads * kHd});
      auto lse = h.poisoned(DType::kF32, {kB, kHeads, kT});
      h.gpu().attention_forward(out.gpu, lse.gpu, full.gpu);
      h.cpu().attention_forward(out.cpu, lse.cpu, full.cpu);
      h.check(out, tolerance(dtype));
      auto dfull = h.random(dtype, {kB, kT, 3 * kHeads * kHd});
      auto dpacked = h.poisoned(dtype, {kB, kT, (kHeads + 2 * kv) * kHd});
      h.gpu().gqa_reduce(dpacked.gpu, dfull.gpu, kHeads, kv);
      h.cpu().gqa_reduce(dpacked.cpu, dfull.cpu, kHeads, kv);
      h.check(dpacked, tolerance(dtype));
    }
  }
}

TEST_CASE("cuda ops: attention over packed q|k|v with grouped K/V heads, forward and backward (+=)") {
  // Both kernels read the groups in place and sum the K/V gradients over each group, in different
  // fixed fp32 orders: the same attention, to the dtype's tolerance.
  Harness h;
  constexpr std::int64_t kHeads = 8, kHd = 12;  // head_dim not a multiple of 8
  for (std::int64_t kv : {std::int64_t{4}, std::int64_t{1}, kHeads}) {
    for (DType dtype : kComputeDtypes) {
      INFO(zinf::dtype_name(dtype) << " kv_heads " << kv);
      auto qkv = h.random(dtype, {kB, kT, (kHeads + 2 * kv) * kHd});
      auto out = h.poisoned(dtype, {kB, kT, kHeads * kHd});
      auto lse = h.poisoned(DType::kF32, {kB, kHeads, kT});
      h.gpu().attention_forward(out.gpu, lse.gpu, qkv.gpu);
      h.cpu().attention_forward(out.cpu, lse.cpu, qkv.cpu);
      h.check(out, tolerance(dtype));
      h.check(lse, fp32_tolerance(dtype));
      auto dout = h.random(dtype, {kB, kT, kHeads * kHd});
      auto dqkv = h.random(dtype, {kB, kT, (kHeads + 2 * kv) * kHd});  // accumulated into
      h.gpu().attention_backward(dqkv.gpu, dout.gpu, qkv.gpu, out.gpu, lse.gpu);
      h.cpu().attention_backward(dqkv.cpu, dout.cpu, qkv.cpu, out.cpu, lse.cpu);
      // A K/V head's gradient sums its group's heads/kv query heads, each carrying the 16-bit
      // kernel's own rounding (P and dS in bf16 on the tensor cores; the CPU twin stays in fp32):
      // independent errors, so the bound grows as sqrt(group). Measured on an H200, bf16, a group
      // of 8: 0.0112 against the single-head 0.01.
      h.check(dqkv, tolerance(dtype) * std::sqrt(static_cast<double>(kHeads / kv)));
    }
  }
}

}  // namespace
