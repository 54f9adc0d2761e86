// cuda::rmsnorm_forward/backward against the CPU kernels (kernels/rmsnorm.h).
//
// Inputs are rounded to `elem` first, so both sides normalise the same values; the GPU's sum of
// squares is fp32 where the CPU's is fp64, hence tolerances rather than bits. Shapes as
// layernorm_test.cpp's: C = 1, odd C (scalar paths), C a multiple of 4 but not 8, C past the
// forward's register cache, C needing the backward's shared-memory opt-in (12288 fp32 accumulators:
// 48 KiB exactly, over the default limit with the static slots), R = 1, R large enough that
// backward blocks own more than 4 rows; and TinyLlama's width 2048.
#include "kernels/rmsnorm.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tests/cuda/cuda_buffer.h"

namespace zinf::cuda_test {
namespace {

constexpr float kEps = 1e-5f;

struct Shape {
  std::int64_t rows;
  std::int64_t channels;
};

void check_rmsnorm(Elem elem, const Shape& s) {
  INFO("elem " << static_cast<int>(elem) << ", R " << s.rows << " C " << s.channels);
  const auto r = static_cast<std::size_t>(s.rows);
  const auto c = static_cast<std::size_t>(s.channels);
  // fp32 outputs: 1e-5 of the value; 16-bit outputs: 1e-2 (bf16 keeps 8 significant bits).
  const double rel = elem == Elem::kF32 ? 1e-5 : 1e-2;
  const std::vector<float> inp = round_to(elem, random_values(r * c, 11, 2.0f));
  std::vector<float> weight = random_values(c, 12, 0.5f);
  for (float& w : weight) w += 1.0f;  // O(1) weights around 1
  weight = round_to(elem, weight);

  std::vector<float> out(r * c);
  std::vector<float> rstd(r);
  kernels::cpu::rmsnorm_forward(out.data(), rstd.data(), inp.data(), weight.data(), r, c, kEps, 1);
  DeviceArray inp_d(inp, elem);
  DeviceArray weight_d(weight, elem);
  DeviceArray out_d(elem, r * c);
  DeviceArray rstd_d(Elem::kF32, r);
  out_d.poison();
  rstd_d.poison();
  REQUIRE(kernels::cuda::rmsnorm_forward(elem, out_d.data(), rstd_d.f32(), inp_d.data(), weight_d.data(), s.rows,
                                         s.channels, kEps, nullptr) == 0);
  // out = x * rstd * weight is O(1): the floor 1 makes the tolerance absolute near zero.
  require_close(out_d.download(), out, rel, 1.0);
  require_close(rstd_d.download(), rstd, 1e-5, 1e-3);

  // Without rstd: the same out.
  out_d.poison();
  REQUIRE(kernels::cuda::rmsnorm_forward(elem, out_d.data(), nullptr, inp_d.data(), weight_d.data(), s.rows, s.channels,
                                         kEps, nullptr) == 0);
  require_close(out_d.download(), out, rel, 1.0);

  // Backward from the CPU's rstd (uploaded), accumulating into random starting gradients.
  const std::vector<float> dout = round_to(elem, random_values(r * c, 13, 1.0f));
  std::vector<float> dinp = round_to(elem, random_values(r * c, 14, 1.0f));
  std::vector<float> dweight = random_values(c, 15, 1.0f);
  DeviceArray dout_d(dout, elem);
  DeviceArray dinp_d(dinp, elem);
  DeviceArray dweight_d(dweight);
  DeviceArray cpu_rstd_d(rstd);
  const std::size_t scratch_bytes = kernels::cuda::rmsnorm_backward_scratch_bytes(s.rows, s.channels);
  DeviceArray scratch(Elem::kF32, scratch_bytes / 4 + 1);
  scratch.poison();
  REQUIRE(kernels::cuda::rmsnorm_backward(elem, dinp_d.data(), dweight_d.f32(), dout_d.data(), inp_d.data(),
                                          weight_d.data(), cpu_rstd_d.f32(), s.rows, s.channels, scratch.data(),
                                          scratch_bytes, nullptr) == 0);
  kernels::cpu::rmsnorm_backward(dinp.data(), dweight.data(), dout.data(), inp.data(), weight.data(), rstd.data(), r, c,
                                 1);
  require_close(dinp_d.download(), dinp, rel, 1.0);
  // dweight: fp32 sums over R rows of O(1) terms with random signs (typical size sqrt(R)).
  require_close(dweight_d.download(), dweight, 2e-5, std::sqrt(static_cast<double>(s.rows)) + 1.0);
}

TEST_CASE("cuda rmsnorm: forward and backward match the CPU", "[cuda][rmsnorm]") {
  const Shape shapes[] = {
      {3, 1},      // a single channel
      {1, 7},      // one row, odd C: scalar paths
      {5, 100},    // C % 4 == 0, C % 8 != 0: fp32 vector, 16-bit scalar
      {17, 2048},  // TinyLlama's hidden size
      {9, 4100},   // past the forward's register cache; 16-bit scalar re-read path
      {4500, 64},  // backward blocks of 5 rows (900 blocks)
      {2, 12288},  // backward dynamic shared memory exactly 48 KiB: with the static slots, past the default
      {2, 20000},  // backward shared memory 80 KB: the opt-in path
  };
  for (Elem elem : {Elem::kF32, Elem::kBF16, Elem::kF16}) {
    for (const Shape& s : shapes) check_rmsnorm(elem, s);
  }
}

TEST_CASE("cuda rmsnorm: no rows does nothing, bad arguments are refused", "[cuda][rmsnorm]") {
  REQUIRE(kernels::cuda::rmsnorm_forward(Elem::kF32, nullptr, nullptr, nullptr, nullptr, 0, 16, kEps, nullptr) == 0);
  REQUIRE(kernels::cuda::rmsnorm_backward(Elem::kF32, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, 16,
                                          nullptr, 0, nullptr) == 0);
  REQUIRE(kernels::cuda::rmsnorm_forward(Elem::kF32, nullptr, nullptr, nullptr, nullptr, 1, 0, kEps, nullptr) != 0);
  REQUIRE(kernels::cuda::rmsnorm_forward(Elem::kF32, nullptr, nullptr, nullptr, nullptr, 1, 16, kEps, nullptr) != 0);
}

}  // namespace
}  // namespace zinf::cuda_test
