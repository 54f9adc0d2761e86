// CudaOps against CpuOps: the Ops methods on a CUDA device and on the CPU backend, on the same
// random inputs. Activations and parameters are rounded to the compute dtype first and the CPU
// side computes in fp32 on exactly those values, so the tolerance covers only the GPU's own
// rounding: ~1e-5 relative in fp32, ~1e-2 in bf16/fp16. Outputs that a method overwrites are
// poisoned with NaN first; outputs it accumulates into start from random values. Also: matmul
// column blocks of a wider output (with and without bias, dinp overwritten or accumulated), copy's
// conversions bit for bit, sum_squares, adam_step, and scratch/workspace that do not fit the budget
// reported by synchronize(). The Llama operators (RMSNorm, SwiGLU, RoPE) are in
// cuda_ops_llama_test.cpp and grouped-query attention in cuda_ops_gqa_test.cpp, on the same
// harness (cuda_ops_harness.h). Needs a GPU (the binary exits 77 without one).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "kernels/adam.h"
#include "kernels/convert.h"
#include "libengine/tensor/tensor.h"
#include "tests/cuda/cuda_ops_harness.h"

namespace {

using namespace zinf::cuda_ops_test;

TEST_CASE("cuda ops: the compute dtypes CUDA supports") {
  Harness h;
  CHECK(h.gpu().supports_compute_dtype(DType::kF32));
  CHECK(h.gpu().supports_compute_dtype(DType::kBF16));
  CHECK(h.gpu().supports_compute_dtype(DType::kF16));
}

TEST_CASE("cuda ops: matmul_forward writes a column block of a wider output, with and without bias") {
  Harness h;
  constexpr std::int64_t kC = 48, kOC = 40, kWidth = 100;
  enum class BiasKind { kNone, kAligned, kMisaligned };
  // The second round repeats every shape with new tensors of the same alignments: it runs on the
  // cached cuBLASLt plans, so a pointer (the bias epilogue's above all) kept from the first call
  // would show.
  for (int round = 0; round < 2; ++round) {
    for (DType dtype : kComputeDtypes) {
      for (std::int64_t col : {std::int64_t{0}, std::int64_t{24}, std::int64_t{3}}) {
        for (BiasKind bias_kind : {BiasKind::kNone, BiasKind::kAligned, BiasKind::kMisaligned}) {
          INFO("round " << round << ", " << zinf::dtype_name(dtype) << ", columns from " << col << ", bias kind "
                        << static_cast<int>(bias_kind));
          const std::int64_t width = col == 0 ? kOC : kWidth;  // a plain layer: OUT_WIDTH == OC
          auto inp = h.random(dtype, {kB, kT, kC});
          auto weight = h.random(dtype, {kOC, kC}, 0.2f);
          // A misaligned bias is a view starting one element into a buffer, as a bias sliced at an odd
          // tile offset would be (not 16-byte aligned: cuBLASLt's epilogue is not used for it).
          auto bias_storage = h.random(dtype, {kOC + 1});
          const std::size_t skip = bias_kind == BiasKind::kMisaligned ? zinf::dtype_size_bytes(dtype) : 0;
          const Tensor gpu_bias(static_cast<char*>(bias_storage.gpu.data()) + skip, dtype, Shape{kOC}, &h.cuda());
          const Tensor cpu_bias(static_cast<char*>(bias_storage.cpu.data()) + (skip == 0 ? 0 : sizeof(float)),
                                DType::kF32, Shape{kOC});
          const bool with_bias = bias_kind != BiasKind::kNone;
          // Random outside the block (must survive), NaN inside (must be overwritten, never read).
          std::vector<float> before = random_values(static_cast<std::size_t>(kR * width), 7);
          for (std::int64_t r = 0; r < kR; ++r) {
            for (std::int64_t o = col; o < col + kOC; ++o) before[static_cast<std::size_t>(r * width + o)] = kNaN;
          }
          auto out = h.compute(dtype, {kB, kT, width}, before);
          h.gpu().matmul_forward(out.gpu, col, inp.gpu, weight.gpu, with_bias ? &gpu_bias : nullptr);
          h.cpu().matmul_forward(out.cpu, col, inp.cpu, weight.cpu, with_bias ? &cpu_bias : nullptr);
          // A bias added after the product rounds 16-bit outputs twice: one more ulp.
          h.check(out, tolerance(dtype) * (bias_kind == BiasKind::kMisaligned && dtype != DType::kF32 ? 2 : 1));
        }
      }
    }
  }
}

TEST_CASE("cuda ops: matmul_backward overwrites or accumulates dinp and accumulates dweight and dbias") {
  Harness h;
  constexpr std::int64_t kC = 48, kOC = 40, kWidth = 100;
  for (DType dtype : kComputeDtypes) {
    for (std::int64_t col : {std::int64_t{0}, std::int64_t{24}, std::int64_t{3}}) {
      for (GradMode mode : {GradMode::kOverwrite, GradMode::kAccumulate}) {
        for (bool with_bias : {false, true}) {
          INFO(zinf::dtype_name(dtype) << ", columns from " << col
                                       << (mode == GradMode::kOverwrite ? ", dinp =" : ", dinp +=")
                                       << (with_bias ? ", bias" : ", no bias"));
          const std::int64_t width = col == 0 ? kOC : kWidth;
          auto inp = h.random(dtype, {kB, kT, kC});
          auto weight = h.random(dtype, {kOC, kC}, 0.2f);
          auto dout = h.random(dtype, {kB, kT, width});
          auto dinp = mode == GradMode::kOverwrite ? h.poisoned(dtype, {kB, kT, kC}) : h.random(dtype, {kB, kT, kC});
          auto dweight = h.random(DType::kF32, {kOC, kC});
          auto dbias = h.random(DType::kF32, {kOC});
          h.gpu().matmul_backward(dinp.gpu, mode, dweight.gpu, with_bias ? &dbias.gpu : nullptr, dout.gpu, col, inp.gpu,
                                  weight.gpu);
          h.cpu().matmul_backward(dinp.cpu, mode, dweight.cpu, with_bias ? &dbias.cpu : nullptr, dout.cpu, col, inp.cpu,
                                  weight.cpu);
          h.check(dinp, tolerance(dtype));
          h.check(dweight, fp32_tolerance(dtype));
          h.check(dbias, fp32_tolerance(dtype));  // untouched without bias: still equal
        }
      }
    }
  }
}

TEST_CASE("cuda ops: layernorm forward and backward") {
  Harness h;
  constexpr std::int64_t kC = 96;
  for (DType dtype : kComputeDtypes) {
    INFO(zinf::dtype_name(dtype));
    std::vector<float> x = random_values(static_cast<std::size_t>(kR * kC), 11, 2.0f);
    for (float& v : x) v += 0.5f;  // a non-zero mean
    auto inp = h.compute(dtype, {kB, kT, kC}, x);
    auto weight = h.random(dtype, {kC});
    auto bias = h.random(dtype, {kC});
    auto out = h.poisoned(dtype, {kB, kT, kC});
    auto mean = h.poisoned(DType::kF32, {kB, kT});
    auto rstd = h.poisoned(DType::kF32, {kB, kT});
    h.gpu().layernorm_forward(out.gpu, mean.gpu, rstd.gpu, inp.gpu, weight.gpu, bias.gpu, 1e-5f);
    h.cpu().layernorm_forward(out.cpu, mean.cpu, rstd.cpu, inp.cpu, weight.cpu, bias.cpu, 1e-5f);
    h.check(out, tolerance(dtype));
    h.check(mean, fp32_tolerance(dtype));
    h.check(rstd, fp32_tolerance(dtype));

    auto dout = h.random(dtype, {kB, kT, kC});
    auto dinp = h.random(dtype, {kB, kT, kC});
    auto dweight = h.random(DType::kF32, {kC});
    auto dbias = h.random(DType::kF32, {kC});
    h.gpu().layernorm_backward(dinp.gpu, dweight.gpu, dbias.gpu, dout.gpu, inp.gpu, weight.gpu, mean.gpu, rstd.gpu);
    h.cpu().layernorm_backward(dinp.cpu, dweight.cpu, dbias.cpu, dout.cpu, inp.cpu, weight.cpu, mean.cpu, rstd.cpu);
    h.check(dinp, tolerance(dtype));
    h.check(dweight, fp32_tolerance(dtype));
    h.check(dbias, fp32_tolerance(dtype));
  }
}

TEST_CASE("cuda ops: gelu and residual, forward and backward") {
  Harness h;
  constexpr std::int64_t kN = 5000;
  for (DType dtype : kComputeDtypes) {
    INFO(zinf::dtype_name(dtype));
    auto x = h.random(dtype, {kN}, 2.0f);
    auto y = h.random(dtype, {kN});
    auto out = h.poisoned(dtype, {kN});
    h.gpu().gelu_forward(out.gpu, x.gpu);
    h.cpu().gelu_forward(out.cpu, x.cpu);
    h.check(out, tolerance(dtype));
    auto dinp = h.random(dtype, {kN});
    h.gpu().gelu_backward(dinp.gpu, x.gpu, y.gpu);
    h.cpu().gelu_backward(dinp.cpu, x.cpu, y.cpu);
    h.check(dinp, tolerance(dtype));

    auto sum = h.poisoned(dtype, {kN});
    h.gpu().residual_forward(sum.gpu, x.gpu, y.gpu);
    h.cpu().residual_forward(sum.cpu, x.cpu, y.cpu);
    h.check(sum, tolerance(dtype));
    auto da = h.random(dtype, {kN});
    auto db = h.random(dtype, {kN});
    h.gpu().residual_backward(da.gpu, db.gpu, y.gpu);
    h.cpu().residual_backward(da.cpu, db.cpu, y.cpu);
    h.check(da, tolerance(dtype));
    h.check(db, tolerance(dtype));
  }
}

TEST_CASE("cuda ops: embedding forward and backward, with repeated tokens") {
  Harness h;
  constexpr std::int64_t kC = 40, kVocab = 17, kMaxT = 50;  // 66 positions over 17 ids: repeats
  for (DType dtype : kComputeDtypes) {
    INFO(zinf::dtype_name(dtype));
    const auto ids = h.tokens(static_cast<std::size_t>(kR), static_cast<std::int32_t>(kVocab));
    auto wte = h.random(dtype, {kVocab, kC});
    auto wpe = h.random(dtype, {kMaxT, kC});
    auto out = h.poisoned(dtype, {kB, kT, kC});
    h.gpu().embedding_forward(out.gpu, ids.gpu, wte.gpu, wpe.gpu);
    h.cpu().embedding_forward(out.cpu, ids.cpu, wte.cpu, wpe.cpu);
    h.check(out, tolerance(dtype));

    auto dout = h.random(dtype, {kB, kT, kC});
    auto dwte = h.random(DType::kF32, {kVocab, kC});
    auto dwpe = h.random(DType::kF32, {kMaxT, kC});
    h.gpu().embedding_backward(dwte.gpu, dwpe.gpu, dout.gpu, ids.gpu);
    h.cpu().embedding_backward(dwte.cpu, dwpe.cpu, dout.cpu, ids.cpu);
    h.check(dwte, fp32_tolerance(dtype));
    h.check(dwpe, fp32_tolerance(dtype));
  }
}

TEST_CASE("cuda ops: attention forward and backward") {
  Harness h;
  constexpr std::int64_t kC = 64, kHeads = 2;  // head size 32
  for (DType dtype : kComputeDtypes) {
    INFO(zinf::dtype_name(dtype));
    auto qkv = h.random(dtype, {kB, kT, 3 * kC});
    auto out = h.poisoned(dtype, {kB, kT, kC});
    auto lse = h.poisoned(DType::kF32, {kB, kHeads, kT});
    h.gpu().attention_forward(out.gpu, lse.gpu, qkv.gpu);
    h.cpu().attention_forward(out.cpu, lse.cpu, qkv.cpu);
    h.check(out, tolerance(dtype));
    h.check(lse, fp32_tolerance(dtype));

    auto dout = h.random(dtype, {kB, kT, kC});
    auto dqkv = h.random(dtype, {kB, kT, 3 * kC});
    h.gpu().attention_backward(dqkv.gpu, dout.gpu, qkv.gpu, out.gpu, lse.gpu);
    h.cpu().attention_backward(dqkv.cpu, dout.cpu, qkv.cpu, out.cpu, lse.cpu);
    h.check(dqkv, tolerance(dtype));
  }
}

TEST_CASE("cuda ops: cross-entropy loss and its gradient, also in place") {
  Harness h;
  constexpr std::int64_t kVocab = 50;
  for (DType dtype : kComputeDtypes) {
    INFO(zinf::dtype_name(dtype));
    const auto targets = h.tokens(static_cast<std::size_t>(kR), static_cast<std::int32_t>(kVocab));
    auto logits = h.random(dtype, {kB, kT, kVocab}, 2.0f);
    const double gpu_loss = h.gpu().cross_entropy_forward(logits.gpu, targets.gpu);
    const double cpu_loss = h.cpu().cross_entropy_forward(logits.cpu, targets.cpu);
    Harness::require_ok(h.cuda().synchronize());
    CHECK(gpu_loss == Approx(cpu_loss).epsilon(1e-5));

    // dloss = R makes every gradient softmax - onehot, O(1/V) to O(1).
    const auto dloss = static_cast<float>(kR);
    auto dlogits = h.poisoned(dtype, {kB, kT, kVocab});
    h.gpu().cross_entropy_backward(dlogits.gpu, logits.gpu, targets.gpu, dloss);
    h.cpu().cross_entropy_backward(dlogits.cpu, logits.cpu, targets.cpu, dloss);
    h.check(dlogits, tolerance(dtype), 0.1);

    h.gpu().cross_entropy_backward(logits.gpu, logits.gpu, targets.gpu, dloss);  // in place
    h.cpu().cross_entropy_backward(logits.cpu, logits.cpu, targets.cpu, dloss);
    h.check(logits, tolerance(dtype), 0.1);
  }
}

TEST_CASE("cuda ops: zero, and copy converting between fp32, bf16 and fp16 bit for bit") {
  Harness h;
  std::vector<float> values = random_values(3001, 21, 10.0f);
  // Edge cases: past fp16's range, fp16 and bf16 denormals, signed zero, infinities, NaN.
  const float specials[] = {65519.0f,
                            65520.0f,
                            1e5f,
                            -7e4f,
                            1e-7f,
                            -3e-8f,
                            1e-40f,
                            -0.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            kNaN};
  std::copy(std::begin(specials), std::end(specials), values.begin());
  for (DType from : kComputeDtypes) {
    for (DType to : kComputeDtypes) {
      INFO(zinf::dtype_name(from) << " -> " << zinf::dtype_name(to));
      // The source holds what `from` can hold (the CPU's rounding, identical on both sides).
      auto src = h.stored(from, {3001}, round_to(elem_of(from), values));
      auto dst = h.stored(to, {3001}, std::vector<float>(3001, kNaN));
      h.gpu().copy(dst.gpu, src.gpu);
      h.cpu().copy(dst.cpu, src.cpu);
      const std::vector<unsigned char> gpu = h.gpu_bytes(dst.gpu);
      REQUIRE(gpu.size() == dst.cpu.bytes());
      CHECK(std::memcmp(gpu.data(), dst.cpu.data(), gpu.size()) == 0);
    }
  }
  auto cleared = h.stored(DType::kBF16, {777}, round_to(Elem::kBF16, random_values(777, 22)));
  h.gpu().zero(cleared.gpu);
  const std::vector<unsigned char> bytes = h.gpu_bytes(cleared.gpu);
  CHECK(std::all_of(bytes.begin(), bytes.end(), [](unsigned char b) { return b == 0; }));
}

TEST_CASE("cuda ops: sum_squares over tensors of every dtype, inf and NaN propagated") {
  Harness h;
  auto a = h.stored(DType::kF32, {1000}, random_values(1000, 31));
  auto b = h.stored(DType::kBF16, {70000}, round_to(Elem::kBF16, random_values(70000, 32, 3.0f)));
  auto c = h.stored(DType::kF16, {517}, round_to(Elem::kF16, random_values(517, 33)));
  auto empty = h.stored(DType::kF32, {0}, {});
  const Tensor gpu_tensors[] = {a.gpu, b.gpu, empty.gpu, c.gpu};
  const Tensor cpu_tensors[] = {a.cpu, b.cpu, empty.cpu, c.cpu};
  const double gpu_sum = h.gpu().sum_squares(gpu_tensors);
  const double cpu_sum = h.cpu().sum_squares(cpu_tensors);
  Harness::require_ok(h.cuda().synchronize());
  CHECK(gpu_sum == Approx(cpu_sum).epsilon(1e-12));
  CHECK(h.gpu().sum_squares({}) == 0.0);

  std::vector<float> with_inf(100, 1.0f);
  with_inf[57] = std::numeric_limits<float>::infinity();
  auto inf_tensor = h.stored(DType::kF16, {100}, with_inf);
  const Tensor with_inf_tensors[] = {a.gpu, inf_tensor.gpu};
  CHECK(std::isinf(h.gpu().sum_squares(with_inf_tensors)));
  std::vector<float> with_nan(100, 1.0f);
  with_nan[3] = kNaN;
  auto nan_tensor = h.stored(DType::kF32, {100}, with_nan);
  const Tensor with_nan_tensors[] = {nan_tensor.gpu, a.gpu};
  CHECK(std::isnan(h.gpu().sum_squares(with_nan_tensors)));
  Harness::require_ok(h.cuda().synchronize());  // a NaN result is not an error
}

TEST_CASE("cuda ops: adam_step with fp32, bf16 and fp16 gradients, with and without half parameters") {
  Harness h;
  constexpr std::int64_t kN = 10007;
  zinf::kernels::AdamHyper hyper;
  hyper.lr = 1e-2;
  hyper.weight_decay = 0.1;
  hyper.step = 3;
  hyper.grad_scale = 0.5;
  for (DType grad_dtype : kComputeDtypes) {
    for (bool decoupled : {true, false}) {
      for (bool with_half : {false, true}) {
        INFO("grad " << zinf::dtype_name(grad_dtype) << (decoupled ? ", AdamW" : ", Adam")
                     << (with_half ? ", bf16 copy" : ""));
        hyper.decoupled_weight_decay = decoupled;
        auto master = h.stored(DType::kF32, {kN}, random_values(kN, 41));
        auto exp_avg = h.stored(DType::kF32, {kN}, random_values(kN, 42, 0.1f));
        std::vector<float> second = random_values(kN, 43, 0.01f);
        for (float& v : second) v = v * v;
        auto exp_avg_sq = h.stored(DType::kF32, {kN}, second);
        auto grad = h.stored(grad_dtype, {kN}, round_to(elem_of(grad_dtype), random_values(kN, 44)));
        auto half = h.stored(DType::kBF16, {kN}, std::vector<float>(kN, kNaN));
        h.gpu().adam_step(hyper, master.gpu, exp_avg.gpu, exp_avg_sq.gpu, grad.gpu, with_half ? &half.gpu : nullptr);
        h.cpu().adam_step(hyper, master.cpu, exp_avg.cpu, exp_avg_sq.cpu, grad.cpu, with_half ? &half.cpu : nullptr);
        h.check(master, 1e-6);
        h.check(exp_avg, 1e-6);
        h.check(exp_avg_sq, 1e-6);
        if (with_half) h.check(half, 1e-2);  // one bf16 ulp at most, where master differs by an fp32 ulp
      }
    }
  }
}

TEST_CASE("cuda ops: scratch or workspace beyond the budget is reported by synchronize, not a crash") {
  Harness h(std::uint64_t{1} << 20);  // 1 MiB: no room for a 32 MiB cuBLASLt workspace
  auto inp = h.random(DType::kF32, {4, 8});
  auto weight = h.random(DType::kF32, {8, 8});
  auto out = h.poisoned(DType::kF32, {4, 8});
  h.gpu().matmul_forward(out.gpu, 0, inp.gpu, weight.gpu, nullptr);
  Status status = h.cuda().synchronize();
  CHECK(status.code() == ErrorCode::kOutOfMemory);
  CHECK(status.message().find("cuBLASLt workspace") != std::string::npos);
  CHECK(h.cuda().synchronize().is_ok());

  // 2^19 rows need 2 MiB of per-row losses in the scratch: refused before anything is launched, so
  // the views below (far larger than their memory) are never read.
  constexpr std::int64_t kRows = std::int64_t{1} << 19;
  const Tensor huge_logits(inp.gpu.data(), DType::kF32, Shape{kRows, 1}, &h.cuda());
  const std::span<const std::int32_t> huge_targets(static_cast<const std::int32_t*>(inp.gpu.data()),
                                                   static_cast<std::size_t>(kRows));
  CHECK(std::isnan(h.gpu().cross_entropy_forward(huge_logits, huge_targets)));
  status = h.cuda().synchronize();
  CHECK(status.code() == ErrorCode::kOutOfMemory);
  INFO(status.message());
  CHECK(status.message().find("CUDA ops scratch") != std::string::npos);
  CHECK(h.cuda().synchronize().is_ok());
}

}  // namespace
