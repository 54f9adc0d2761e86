// Grouped-query attention in the CUDA kernels (kernels/attention.h): the kernels read K/V heads
// shared by a group of query heads in place from the packed q|k|v rows [B, T, (NH + 2 NKV) hs], and
// the dK/dV pass sums each K/V head's gradient over its group. Checked against two references on
// the same rounded inputs:
// - the CPU twin (kernels::cpu::attention_forward/backward with the same NKV), to the tolerances
//   attention_test.cpp uses (fp32 1e-5, 16-bit 1e-2 of the largest reference magnitude);
// - the expand path the CUDA ops used before: cuda::gqa_expand to one K/V per query head, the
//   multi-head kernel, cuda::gqa_reduce. The forward does the same fp32 operations on the same
//   values either way, so out and lse must be equal bit for bit; so must the backward's query
//   columns (dQ is computed per query head either way, onto zero). The K/V columns differ in
//   rounding only: the packed kernel adds the group's contributions in fp32 and rounds once, the
//   expand path rounds each query head's contribution to the element type and then adds them.
// NH/NKV 8/8, 8/2 and 8/1; T not a multiple of any tile (67, 200); hs 64 and 128; fp32 (the general
// path) and bf16 (tensor cores), plus fp16 and 16-bit head sizes without tensor cores (general
// path, hs 80: two output column blocks). Overwritten outputs are poisoned (NaN) first and every
// element is compared; the backward accumulates (+=) onto random values and is run twice (same bits).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/gqa.h"
#include "tests/cuda/cuda_buffer.h"

namespace zinf::cuda_test {
namespace {

struct GqaCase {
  Elem elem;
  std::int64_t batch;
  std::int64_t seq_len;
  std::int64_t heads;
  std::int64_t kv_heads;
  std::int64_t head_size;

  std::int64_t channels() const { return heads * head_size; }
  std::int64_t width() const { return (heads + 2 * kv_heads) * head_size; }  // W, a packed row
  std::size_t qkv_n() const { return static_cast<std::size_t>(batch * seq_len * width()); }
  std::size_t full_n() const { return static_cast<std::size_t>(batch * seq_len * 3 * channels()); }
  std::size_t out_n() const { return static_cast<std::size_t>(batch * seq_len * channels()); }
  std::size_t lse_n() const { return static_cast<std::size_t>(batch * heads * seq_len); }
  kernels::GqaShape gqa() const {
    return {.rows = static_cast<std::size_t>(batch * seq_len),
            .heads = static_cast<std::size_t>(heads),
            .kv_heads = static_cast<std::size_t>(kv_heads),
            .head_dim = static_cast<std::size_t>(head_size)};
  }
};

std::string describe(const GqaCase& c) {
  std::ostringstream s;
  s << (c.elem == Elem::kF32    ? "fp32"
        : c.elem == Elem::kBF16 ? "bf16"
                                : "fp16")
    << " B=" << c.batch << " T=" << c.seq_len << " NH=" << c.heads << " NKV=" << c.kv_heads << " hs=" << c.head_size;
  return s.str();
}

double rel_tolerance(Elem elem) { return elem == Elem::kF32 ? 1e-5 : 1e-2; }
double lse_tolerance(Elem elem) { return elem == Elem::kF32 ? 1e-5 : 1e-3; }
// Packed against expand, K/V columns: the expand path rounds each of the G query heads'
// contributions to the 16-bit type (2^-9 relative in bf16) before adding them, the packed kernel
// only the sum; twice the CPU tolerance covers G = 8 such roundings. fp32: summation order only.
double kv_expand_tolerance(Elem elem) { return elem == Elem::kF32 ? 1e-5 : 2e-2; }

double magnitude_floor(const std::vector<float>& values) {
  double largest = 0.0;
  for (const float v : values) largest = std::max(largest, static_cast<double>(std::abs(v)));
  return largest;
}

void require_same_bits(const std::vector<float>& actual, const std::vector<float>& expected, const char* what) {
  INFO(what);
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (std::memcmp(&actual[i], &expected[i], sizeof(float)) != 0) {
      INFO("element " << i << ": got " << actual[i] << ", expected " << expected[i]);
      REQUIRE(std::memcmp(&actual[i], &expected[i], sizeof(float)) == 0);
    }
  }
}

// Query columns of packed rows bit for bit; K/V columns within `rel` of max(|expected|, floor).
void require_packed_close(const std::vector<float>& actual, const std::vector<float>& expected, const GqaCase& c,
                          double rel, double floor) {
  REQUIRE(actual.size() == expected.size());
  const auto width = static_cast<std::size_t>(c.width());
  const auto q_cols = static_cast<std::size_t>(c.channels());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    const bool query_column = i % width < q_cols;
    const double bound = query_column ? 0.0 : rel * std::max(std::abs(e), floor);
    const bool ok = query_column ? std::memcmp(&actual[i], &expected[i], sizeof(float)) == 0 : std::abs(a - e) <= bound;
    if (!ok) {
      INFO("element " << i << " (row column " << i % width << (query_column ? ", a query column" : ", a K/V column")
                      << "): got " << a << ", expected " << e << " (tolerance " << bound << ")");
      REQUIRE(ok);
    }
  }
}

void check_gqa(const GqaCase& c, std::uint64_t seed) {
  INFO(describe(c));
  const auto b = static_cast<std::size_t>(c.batch);
  const auto t = static_cast<std::size_t>(c.seq_len);
  const auto ch = static_cast<std::size_t>(c.channels());
  const auto nh = static_cast<std::size_t>(c.heads);
  const auto nkv = static_cast<std::size_t>(c.kv_heads);
  const std::vector<float> qkv = round_to(c.elem, random_values(c.qkv_n(), seed));
  const std::vector<float> dout = round_to(c.elem, random_values(c.out_n(), seed + 1));
  const DeviceArray qkv_d(qkv, c.elem);
  const DeviceArray dout_d(dout, c.elem);

  // CPU twin.
  std::vector<float> out_ref(c.out_n());
  std::vector<float> lse_ref(c.lse_n());
  kernels::cpu::attention_forward(out_ref.data(), lse_ref.data(), qkv.data(), b, t, ch, nh, nkv);

  // Forward, packed, into poison.
  DeviceArray out_d(c.elem, c.out_n());
  DeviceArray lse_d(Elem::kF32, c.lse_n());
  out_d.poison();
  lse_d.poison();
  REQUIRE(kernels::cuda::attention_forward(c.elem, out_d.data(), lse_d.f32(), qkv_d.data(), c.batch, c.seq_len,
                                           c.channels(), c.heads, c.kv_heads, nullptr) == 0);
  const std::vector<float> out = out_d.download();
  const std::vector<float> lse = lse_d.download();
  require_close(out, out_ref, rel_tolerance(c.elem), magnitude_floor(out_ref));
  require_close(lse, lse_ref, lse_tolerance(c.elem), 1.0);

  // Forward, expand path: the same bits.
  DeviceArray full_d(c.elem, c.full_n());
  full_d.poison();
  REQUIRE(kernels::cuda::gqa_expand(c.elem, full_d.data(), qkv_d.data(), c.gqa(), nullptr) == 0);
  DeviceArray out_full_d(c.elem, c.out_n());
  DeviceArray lse_full_d(Elem::kF32, c.lse_n());
  out_full_d.poison();
  lse_full_d.poison();
  REQUIRE(kernels::cuda::attention_forward(c.elem, out_full_d.data(), lse_full_d.f32(), full_d.data(), c.batch,
                                           c.seq_len, c.channels(), c.heads, c.heads, nullptr) == 0);
  require_same_bits(out, out_full_d.download(), "out: packed vs expand");
  require_same_bits(lse, lse_full_d.download(), "lse: packed vs expand");

  // Backward inputs: the CPU's out rounded to the element type and its lse, on both sides.
  const std::vector<float> out_in = round_to(c.elem, out_ref);
  const DeviceArray out_in_d(out_in, c.elem);
  const DeviceArray lse_in_d(lse_ref);
  std::vector<float> grad(c.qkv_n(), 0.0f);
  kernels::cpu::attention_backward(grad.data(), dout.data(), qkv.data(), out_in.data(), lse_ref.data(), b, t, ch, nh,
                                   nkv);
  const double grad_floor = magnitude_floor(grad);
  double grad_squares = 0.0;
  for (const float g : grad) grad_squares += static_cast<double>(g) * g;
  const auto grad_rms = static_cast<float>(std::sqrt(grad_squares / static_cast<double>(c.qkv_n())));
  const std::vector<float> initial =
      round_to(c.elem, random_values(c.qkv_n(), seed + 2, grad_rms > 0.0f ? grad_rms : 1.0f));
  std::vector<float> expected = initial;
  kernels::cpu::attention_backward(expected.data(), dout.data(), qkv.data(), out_in.data(), lse_ref.data(), b, t, ch,
                                   nh, nkv);

  const std::size_t scratch_bytes =
      kernels::cuda::attention_backward_scratch_bytes(c.batch, c.seq_len, c.channels(), c.heads);
  REQUIRE(scratch_bytes >= c.lse_n() * sizeof(float));
  DeviceArray scratch(Elem::kF32, scratch_bytes / sizeof(float));

  // Backward, packed, onto random values, twice: the CPU's sums, the same bits both times.
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    DeviceArray dqkv_d(initial, c.elem);
    scratch.poison();
    REQUIRE(kernels::cuda::attention_backward(c.elem, dqkv_d.data(), dout_d.data(), qkv_d.data(), out_in_d.data(),
                                              lse_in_d.f32(), c.batch, c.seq_len, c.channels(), c.heads, c.kv_heads,
                                              scratch.data(), scratch_bytes, nullptr) == 0);
    runs.push_back(dqkv_d.download());
  }
  require_close(runs[0], expected, rel_tolerance(c.elem), grad_floor);
  require_same_bits(runs[1], runs[0], "dqkv: run twice");

  // Backward onto zero, packed and through the expand path.
  DeviceArray dqkv_zero_d(std::vector<float>(c.qkv_n(), 0.0f), c.elem);
  REQUIRE(kernels::cuda::attention_backward(c.elem, dqkv_zero_d.data(), dout_d.data(), qkv_d.data(), out_in_d.data(),
                                            lse_in_d.f32(), c.batch, c.seq_len, c.channels(), c.heads, c.kv_heads,
                                            scratch.data(), scratch_bytes, nullptr) == 0);
  const std::vector<float> packed_grad = dqkv_zero_d.download();
  require_close(packed_grad, grad, rel_tolerance(c.elem), grad_floor);

  DeviceArray dfull_d(std::vector<float>(c.full_n(), 0.0f), c.elem);
  REQUIRE(kernels::cuda::attention_backward(c.elem, dfull_d.data(), dout_d.data(), full_d.data(), out_in_d.data(),
                                            lse_in_d.f32(), c.batch, c.seq_len, c.channels(), c.heads, c.heads,
                                            scratch.data(), scratch_bytes, nullptr) == 0);
  DeviceArray dpacked_d(c.elem, c.qkv_n());
  dpacked_d.poison();
  REQUIRE(kernels::cuda::gqa_reduce(c.elem, dpacked_d.data(), dfull_d.data(), c.gqa(), nullptr) == 0);
  require_packed_close(packed_grad, dpacked_d.download(), c, kv_expand_tolerance(c.elem), grad_floor);
}

// NH/NKV 8/8 (multi-head), 8/2 (GQA), 8/1 (MQA); T = 67 and 200 are multiples of no tile (32, 64,
// 128, 16 rows); hs 64 and 128.
void check_matrix(Elem elem, std::uint64_t seed) {
  for (const std::int64_t head_size : {64, 128}) {
    for (const std::int64_t kv_heads : {8, 2, 1}) {
      for (const std::int64_t seq_len : {67, 200}) {
        check_gqa({elem, 2, seq_len, 8, kv_heads, head_size}, seed);
        seed += 10;
      }
    }
  }
}

TEST_CASE("cuda attention gqa: fp32 packed K/V heads match the expand path and the CPU", "[cuda][attention][gqa]") {
  check_matrix(Elem::kF32, 1000);
}

TEST_CASE("cuda attention gqa: bf16 tensor-core packed K/V heads match the expand path and the CPU",
          "[cuda][attention][gqa]") {
  check_matrix(Elem::kBF16, 2000);
}

TEST_CASE("cuda attention gqa: fp16 and 16-bit head sizes off the tensor cores match", "[cuda][attention][gqa]") {
  check_gqa({Elem::kF16, 2, 130, 8, 2, 64}, 3000);  // tensor cores
  check_gqa({Elem::kF16, 1, 67, 4, 1, 128}, 3010);  // tensor cores, MQA
  check_gqa({Elem::kBF16, 2, 67, 8, 2, 80}, 3020);  // general path, two output column blocks
  check_gqa({Elem::kBF16, 1, 45, 6, 3, 24}, 3030);  // general path, G = 2, one partial tile
  check_gqa({Elem::kF32, 2, 33, 6, 2, 12}, 3040);   // hs not a multiple of 8, G = 3
}

}  // namespace
}  // namespace zinf::cuda_test
