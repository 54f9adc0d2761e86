// CudaOps against CpuOps for the Llama operators: RMSNorm, SwiGLU and RoPE (partial rotary, in
// place), forward and backward, in fp32, bf16 and fp16, on the harness of cuda_ops_test.cpp
// (cuda_ops_harness.h): the same rounded inputs on both sides, overwritten outputs poisoned with
// NaN first, accumulated ones starting from random values. Needs a GPU (the binary exits 77
// without one).
#include "tests/cuda/cuda_ops_harness.h"

namespace {

using namespace zinf::cuda_ops_test;

TEST_CASE("cuda ops: rmsnorm forward and backward") {
  Harness h;
  constexpr std::int64_t kC = 90;  // not a multiple of 8
  for (DType dtype : kComputeDtypes) {
    INFO(zinf::dtype_name(dtype));
    auto inp = h.random(dtype, {kB, kT, kC}, 2.0f);
    auto weight = h.random(dtype, {kC});
    auto out = h.poisoned(dtype, {kB, kT, kC});
    auto rstd = h.poisoned(DType::kF32, {kB, kT});
    h.gpu().rmsnorm_forward(out.gpu, rstd.gpu, inp.gpu, weight.gpu, 1e-6f);
    h.cpu().rmsnorm_forward(out.cpu, rstd.cpu, inp.cpu, weight.cpu, 1e-6f);
    h.check(out, tolerance(dtype));
    h.check(rstd, fp32_tolerance(dtype));
    auto dout = h.random(dtype, {kB, kT, kC});
    auto dinp = h.random(dtype, {kB, kT, kC});
    auto dweight = h.random(DType::kF32, {kC});
    h.gpu().rmsnorm_backward(dinp.gpu, dweight.gpu, dout.gpu, inp.gpu, weight.gpu, rstd.gpu);
    h.cpu().rmsnorm_backward(dinp.cpu, dweight.cpu, dout.cpu, inp.cpu, weight.cpu, rstd.cpu);
    h.check(dinp, tolerance(dtype));
    h.check(dweight, fp32_tolerance(dtype));
  }
}

TEST_CASE("cuda ops: swiglu forward and backward") {
  Harness h;
  constexpr std::int64_t kN = 5003;  // not a multiple of the 16-byte packs
  for (DType dtype : kComputeDtypes) {
    INFO(zinf::dtype_name(dtype));
    auto gate = h.random(dtype, {kN}, 3.0f);
    auto up = h.random(dtype, {kN});
    auto out = h.poisoned(dtype, {kN});
    h.gpu().swiglu_forward(out.gpu, gate.gpu, up.gpu);
    h.cpu().swiglu_forward(out.cpu, gate.cpu, up.cpu);
    h.check(out, tolerance(dtype));
    auto dout = h.random(dtype, {kN});
    auto dgate = h.random(dtype, {kN});
    auto dup = h.random(dtype, {kN});
    h.gpu().swiglu_backward(dgate.gpu, dup.gpu, dout.gpu, gate.gpu, up.gpu);
    h.cpu().swiglu_backward(dgate.cpu, dup.cpu, dout.cpu, gate.cpu, up.cpu);
    h.check(dgate, tolerance(dtype));
    h.check(dup, tolerance(dtype));
  }
}

TEST_CASE("cuda ops: rope forward and backward, partial rotary, in place") {
  Harness h;
  // 3 query + 1 key heads of head_dim 10 rotated in rows of (3 + 2) * 10, rotary_dim 6.
  constexpr std::int64_t kHd = 10, kRd = 6, kS = 50;
  const RopeHeads heads{.heads = 4, .head_dim = kHd, .rotary_dim = kRd};
  for (DType dtype : kComputeDtypes) {
    INFO(zinf::dtype_name(dtype));
    auto cos = h.random(DType::kF32, {kT + 3, kRd / 2});
    auto sin = h.random(DType::kF32, {kT + 3, kRd / 2});
    auto inp = h.random(dtype, {kB, kT, kS});
    auto out = h.random(dtype, {kB, kT, kS});  // columns past the heads are left as they are
    h.gpu().rope_forward(out.gpu, inp.gpu, cos.gpu, sin.gpu, heads);
    h.cpu().rope_forward(out.cpu, inp.cpu, cos.cpu, sin.cpu, heads);
    h.check(out, tolerance(dtype));
    // The backward starts from the same values on both sides (the GPU's forward, already rounded
    // to `dtype`): chained from each side's own forward, the GPU's 16-bit rounding of the
    // intermediate (the CPU keeps it in fp32) is carried through a second rotation whose random
    // cos/sin (|cos| + |sin| up to 2, not a rotation) amplify it past one op's tolerance.
    auto grad = h.compute(dtype, {kB, kT, kS}, h.gpu_values(out.gpu));
    h.gpu().rope_backward(grad.gpu, grad.gpu, cos.gpu, sin.gpu, heads);
    h.cpu().rope_backward(grad.cpu, grad.cpu, cos.cpu, sin.cpu, heads);
    h.check(grad, tolerance(dtype));
  }
}

}  // namespace
