// Parity of the CUDA attention kernels (kernels/attention.h, kernels/cuda/attention.cu) with their
// CPU twins: the forward's out and lse, and the backward's dqkv accumulated onto known values, on
// the tensor-core path (bf16/fp16 with hs 32, 64, 128) and on the general one (fp32, other head
// sizes, unaligned arrays; head sizes above 64 span several output-column blocks); a backward run
// twice gives the same bits; the launchers reject bad arguments. Inputs are rounded to the element
// type first, so both sides see the same numbers.
#include <cuda_runtime_api.h>
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
#include "tests/cuda/cuda_buffer.h"

namespace zinf::cuda_test {
namespace {

constexpr int kInvalidValue = static_cast<int>(cudaErrorInvalidValue);

// A device array whose data() sits `offset` elements past the allocation's start, so that a test
// can hand the kernels pointers that are not 16-byte aligned.
class OffsetArray {
 public:
  OffsetArray(Elem elem, std::size_t n, std::size_t offset) : array_(elem, n + offset), elem_(elem), offset_(offset) {}
  OffsetArray(const std::vector<float>& values, Elem elem, std::size_t offset)
      : OffsetArray(elem, values.size(), offset) {
    upload(values);
  }
  void* data() const { return static_cast<char*>(array_.data()) + offset_ * elem_bytes(elem_); }
  void poison() { array_.poison(); }
  void upload(const std::vector<float>& values) {
    std::vector<float> padded(offset_, 0.0f);
    padded.insert(padded.end(), values.begin(), values.end());
    array_.upload(padded);
  }
  std::vector<float> download() const {
    const std::vector<float> all = array_.download();
    return {all.begin() + static_cast<std::ptrdiff_t>(offset_), all.end()};
  }

 private:
  DeviceArray array_;
  Elem elem_;
  std::size_t offset_;
};

struct Case {
  Elem elem;
  std::int64_t batch;
  std::int64_t seq_len;
  std::int64_t heads;
  std::int64_t head_size;
  std::size_t offset = 0;  // elements by which qkv, out, dout and dqkv are shifted off alignment
};

std::string describe(const Case& c) {
  std::ostringstream s;
  s << (c.elem == Elem::kF32    ? "fp32"
        : c.elem == Elem::kBF16 ? "bf16"
                                : "fp16")
    << " B=" << c.batch << " T=" << c.seq_len << " NH=" << c.heads << " hs=" << c.head_size << " offset=" << c.offset;
  return s.str();
}

// Errors are judged as |actual - expected| <= rel * max(|expected|, floor), the floor being the
// largest magnitude in the reference (for dqkv: in the gradient alone): an element near zero, a
// cancellation inside out or a gradient, carries the absolute error of the terms that cancelled,
// which are as large as the array's values. fp32 differs from the CPU only in summation order and
// exp/log rounding, a few 1e-6 of the floor at the worst element, so rel is 1e-5. The 16-bit paths
// round P and dS to the element type before the second product (bf16: 2^-9 per term), up to about
// 4e-3 of the floor, so rel is 1e-2. A wrong row, mask or index is off by the values' whole size.
double magnitude_floor(const std::vector<float>& values) {
  double largest = 0.0;
  for (const float v : values) largest = std::max(largest, static_cast<double>(std::abs(v)));
  return largest;
}

double rel_tolerance(Elem elem) { return elem == Elem::kF32 ? 1e-5 : 1e-2; }

// lse is an fp32 log-sum of fp32 scores on every path (16-bit inputs multiply exactly), so even the
// 16-bit paths hold it close; its floor is 1 (an absolute error for values below 1).
double lse_tolerance(Elem elem) { return elem == Elem::kF32 ? 1e-5 : 1e-3; }

void check_case(const Case& c, std::uint64_t seed) {
  INFO(describe(c));
  const std::int64_t channels = c.heads * c.head_size;
  const auto b = static_cast<std::size_t>(c.batch);
  const auto t = static_cast<std::size_t>(c.seq_len);
  const auto ch = static_cast<std::size_t>(channels);
  const auto nh = static_cast<std::size_t>(c.heads);
  const std::size_t qkv_n = b * t * 3 * ch;
  const std::size_t out_n = b * t * ch;
  const std::size_t lse_n = b * nh * t;

  const std::vector<float> qkv = round_to(c.elem, random_values(qkv_n, seed));
  const std::vector<float> dout = round_to(c.elem, random_values(out_n, seed + 1));
  std::vector<float> out_ref(out_n);
  std::vector<float> lse_ref(lse_n);
  kernels::cpu::attention_forward(out_ref.data(), lse_ref.data(), qkv.data(), b, t, ch, nh, nh);

  // Forward, into poisoned outputs: an element the kernel fails to write reads back NaN.
  const OffsetArray qkv_d(qkv, c.elem, c.offset);
  OffsetArray out_d(c.elem, out_n, c.offset);
  DeviceArray lse_d(Elem::kF32, lse_n);
  out_d.poison();
  lse_d.poison();
  REQUIRE(kernels::cuda::attention_forward(c.elem, out_d.data(), lse_d.f32(), qkv_d.data(), c.batch, c.seq_len,
                                           channels, c.heads, c.heads, nullptr) == 0);
  require_close(out_d.download(), out_ref, rel_tolerance(c.elem), magnitude_floor(out_ref));
  require_close(lse_d.download(), lse_ref, lse_tolerance(c.elem), 1.0);

  // Backward. Both sides take the same out (the CPU's, rounded to the element type) and lse, and
  // add onto the same random dqkv, about as large as the gradient so that neither hides the other.
  const std::vector<float> out_in = round_to(c.elem, out_ref);
  std::vector<float> grad(qkv_n, 0.0f);
  kernels::cpu::attention_backward(grad.data(), dout.data(), qkv.data(), out_in.data(), lse_ref.data(), b, t, ch, nh,
                                   nh);
  double grad_squares = 0.0;
  for (const float g : grad) grad_squares += static_cast<double>(g) * g;
  const auto grad_rms = static_cast<float>(std::sqrt(grad_squares / static_cast<double>(qkv_n)));
  const std::vector<float> initial =
      round_to(c.elem, random_values(qkv_n, seed + 2, grad_rms > 0.0f ? grad_rms : 1.0f));
  std::vector<float> expected = initial;
  kernels::cpu::attention_backward(expected.data(), dout.data(), qkv.data(), out_in.data(), lse_ref.data(), b, t, ch,
                                   nh, nh);

  const OffsetArray dout_d(dout, c.elem, c.offset);
  const OffsetArray out_in_d(out_in, c.elem, c.offset);
  const DeviceArray lse_in_d(lse_ref);
  const std::size_t scratch_bytes =
      kernels::cuda::attention_backward_scratch_bytes(c.batch, c.seq_len, channels, c.heads);
  REQUIRE(scratch_bytes >= lse_n * sizeof(float));
  REQUIRE(scratch_bytes % 256 == 0);
  DeviceArray scratch(Elem::kF32, scratch_bytes / sizeof(float));
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    OffsetArray dqkv_d(initial, c.elem, c.offset);
    scratch.poison();  // the kernels must not depend on the scratch's previous contents
    REQUIRE(kernels::cuda::attention_backward(c.elem, dqkv_d.data(), dout_d.data(), qkv_d.data(), out_in_d.data(),
                                              lse_in_d.f32(), c.batch, c.seq_len, channels, c.heads, c.heads,
                                              scratch.data(), scratch_bytes, nullptr) == 0);
    runs.push_back(dqkv_d.download());
  }
  require_close(runs[0], expected, rel_tolerance(c.elem), magnitude_floor(grad));
  // Deterministic: no atomics, fixed summation order.
  REQUIRE(std::memcmp(runs[0].data(), runs[1].data(), qkv_n * sizeof(float)) == 0);
}

TEST_CASE("cuda attention: fp32 (general path) matches the CPU", "[cuda][attention]") {
  std::uint64_t seed = 100;
  // 80: three reduction chunks of 32 (the last partial) and two output blocks of 64 (grid z = 2).
  for (const std::int64_t head_size : {8, 24, 64, 80}) {
    for (const std::int64_t seq_len : {1, 17, 67, 130}) {
      check_case({Elem::kF32, 2, seq_len, 3, head_size}, seed);
      seed += 10;
    }
  }
}

TEST_CASE("cuda attention: bf16 tensor-core path matches the CPU", "[cuda][attention]") {
  std::uint64_t seed = 200;
  std::int64_t heads = 2;
  for (const std::int64_t head_size : {32, 64, 128}) {
    for (const std::int64_t seq_len : {64, 127, 200, 256}) {
      check_case({Elem::kBF16, 2, seq_len, heads, head_size}, seed);
      heads = heads == 4 ? 2 : heads + 1;
      seed += 10;
    }
  }
}

TEST_CASE("cuda attention: fp16 tensor-core path matches the CPU", "[cuda][attention]") {
  std::uint64_t seed = 300;
  for (const std::int64_t head_size : {32, 64, 128}) {
    for (const std::int64_t seq_len : {127, 256}) {
      check_case({Elem::kF16, 2, seq_len, 3, head_size}, seed);
      seed += 10;
    }
  }
}

TEST_CASE("cuda attention: 16-bit head sizes without tensor cores take the general path", "[cuda][attention]") {
  check_case({Elem::kBF16, 2, 67, 3, 16}, 400);
  check_case({Elem::kBF16, 1, 130, 2, 16}, 410);
  check_case({Elem::kF16, 2, 67, 2, 48}, 420);
  check_case({Elem::kF16, 1, 130, 2, 96}, 430);  // two output blocks, the second half full
}

TEST_CASE("cuda attention: unaligned 16-bit arrays take the general path", "[cuda][attention]") {
  check_case({Elem::kBF16, 2, 67, 2, 64, 1}, 500);
  check_case({Elem::kF16, 1, 130, 3, 32, 3}, 510);
  check_case({Elem::kBF16, 1, 67, 2, 128, 1}, 520);  // a tensor-core head size, two output blocks
}

TEST_CASE("cuda attention: the forward without lse writes the same out", "[cuda][attention]") {
  for (const Elem elem : {Elem::kBF16, Elem::kF32}) {
    const std::int64_t batch = 2, seq_len = 127, heads = 2, head_size = 64, channels = heads * head_size;
    const std::size_t out_n = static_cast<std::size_t>(batch * seq_len * channels);
    const DeviceArray qkv(round_to(elem, random_values(3 * out_n, 600)), elem);
    DeviceArray with_lse(elem, out_n);
    DeviceArray without_lse(elem, out_n);
    DeviceArray lse(Elem::kF32, static_cast<std::size_t>(batch * heads * seq_len));
    with_lse.poison();
    without_lse.poison();
    REQUIRE(kernels::cuda::attention_forward(elem, with_lse.data(), lse.f32(), qkv.data(), batch, seq_len, channels,
                                             heads, heads, nullptr) == 0);
    REQUIRE(kernels::cuda::attention_forward(elem, without_lse.data(), nullptr, qkv.data(), batch, seq_len, channels,
                                             heads, heads, nullptr) == 0);
    const std::vector<float> a = with_lse.download();
    const std::vector<float> b = without_lse.download();
    REQUIRE(std::memcmp(a.data(), b.data(), out_n * sizeof(float)) == 0);
  }
}

TEST_CASE("cuda attention: launchers reject invalid arguments", "[cuda][attention]") {
  using kernels::cuda::attention_backward;
  using kernels::cuda::attention_backward_scratch_bytes;
  using kernels::cuda::attention_forward;
  DeviceArray any(Elem::kF32, 4096);
  void* const p = any.data();
  float* const f = any.f32();
  const std::size_t scratch_bytes = attention_backward_scratch_bytes(1, 8, 64, 2);
  REQUIRE(scratch_bytes == 256);  // 2 heads x 8 positions x 4 bytes, rounded up to 256

  CHECK(attention_forward(Elem::kBF16, p, f, p, 1, 8, 63, 2, 2, nullptr) == kInvalidValue);  // 63 % 2 != 0
  CHECK(attention_forward(Elem::kBF16, p, f, p, 0, 8, 64, 2, 2, nullptr) == kInvalidValue);
  CHECK(attention_forward(Elem::kBF16, p, f, p, 1, 0, 64, 2, 2, nullptr) == kInvalidValue);
  CHECK(attention_forward(Elem::kBF16, p, f, p, 1, 8, 0, 2, 2, nullptr) == kInvalidValue);
  CHECK(attention_forward(Elem::kBF16, p, f, p, 1, 8, 64, 0, 1, nullptr) == kInvalidValue);
  CHECK(attention_forward(Elem::kF32, nullptr, f, p, 1, 8, 64, 2, 2, nullptr) == kInvalidValue);
  CHECK(attention_forward(Elem::kF32, p, f, nullptr, 1, 8, 64, 2, 2, nullptr) == kInvalidValue);
  // K/V heads: at least one, at most NH, dividing NH.
  CHECK(attention_forward(Elem::kBF16, p, f, p, 1, 8, 64, 2, 0, nullptr) == kInvalidValue);
  CHECK(attention_forward(Elem::kBF16, p, f, p, 1, 8, 64, 2, -2, nullptr) == kInvalidValue);
  CHECK(attention_forward(Elem::kBF16, p, f, p, 1, 8, 64, 2, 4, nullptr) == kInvalidValue);
  CHECK(attention_forward(Elem::kBF16, p, f, p, 1, 8, 64, 4, 3, nullptr) == kInvalidValue);

  CHECK(attention_backward_scratch_bytes(1, 8, 63, 2) == 0);
  CHECK(attention_backward(Elem::kBF16, p, p, p, p, f, 1, 8, 63, 2, 2, p, scratch_bytes, nullptr) == kInvalidValue);
  CHECK(attention_backward(Elem::kBF16, p, p, p, p, f, 1, 8, 64, -1, 1, p, scratch_bytes, nullptr) == kInvalidValue);
  CHECK(attention_backward(Elem::kBF16, p, p, p, p, f, 1, 8, 64, 2, 2, p, scratch_bytes - 4, nullptr) == kInvalidValue);
  CHECK(attention_backward(Elem::kBF16, p, p, p, p, f, 1, 8, 64, 2, 2, nullptr, scratch_bytes, nullptr) ==
        kInvalidValue);
  CHECK(attention_backward(Elem::kBF16, p, p, p, p, nullptr, 1, 8, 64, 2, 2, p, scratch_bytes, nullptr) ==
        kInvalidValue);
  CHECK(attention_backward(Elem::kBF16, nullptr, p, p, p, f, 1, 8, 64, 2, 2, p, scratch_bytes, nullptr) ==
        kInvalidValue);
  CHECK(attention_backward(Elem::kBF16, p, p, p, p, f, 1, 8, 64, 4, 3, p, scratch_bytes, nullptr) == kInvalidValue);
  CHECK(attention_backward(Elem::kBF16, p, p, p, p, f, 1, 8, 64, 2, 0, p, scratch_bytes, nullptr) == kInvalidValue);
  // Nothing was launched, so nothing is left for the next launch's status.
  REQUIRE(cudaGetLastError() == cudaSuccess);
}

}  // namespace
}  // namespace zinf::cuda_test
