// cuda::layernorm_forward/backward against the CPU kernels (kernels/layernorm.h).
//
// Inputs are rounded to `elem` first, so both sides normalise the same values; the GPU's statistics
// are fp32 sums where the CPU's are fp64, hence tolerances rather than bits. Shapes cover C = 1,
// odd C (scalar paths), C a multiple of 4 but not 8, C past the register cache (re-read path),
// C large enough for the backward's shared memory to need the opt-in above 48 KiB (6144: dynamic
// 48 KiB exactly, over the limit only with the kernel's static shared memory), R = 1, and R
// large enough that backward blocks own more than the minimum 4 rows.
#include "kernels/layernorm.h"

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

std::vector<float> shifted(std::vector<float> values, float shift) {
  for (float& v : values) v += shift;
  return values;
}

void check_layernorm(Elem elem, const Shape& s) {
  INFO("elem " << static_cast<int>(elem) << ", R " << s.rows << " C " << s.channels);
  const auto r = static_cast<std::size_t>(s.rows);
  const auto c = static_cast<std::size_t>(s.channels);
  // fp32 outputs: 1e-5 of the value. 16-bit outputs: 1e-2 (bf16 keeps 8 significant bits, a
  // rounding error of up to 2^-9 relative).
  const double rel = elem == Elem::kF32 ? 1e-5 : 1e-2;
  // Inputs off-centre (mean 3) so the mean matters; weight and bias O(1).
  const std::vector<float> inp = round_to(elem, shifted(random_values(r * c, 1, 2.0f), 3.0f));
  const std::vector<float> weight = round_to(elem, shifted(random_values(c, 2, 0.5f), 1.0f));
  const std::vector<float> bias = round_to(elem, random_values(c, 3, 0.5f));

  // Forward.
  std::vector<float> out(r * c);
  std::vector<float> mean(r);
  std::vector<float> rstd(r);
  kernels::cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), r, c,
                                  kEps, 1);
  DeviceArray inp_d(inp, elem);
  DeviceArray weight_d(weight, elem);
  DeviceArray bias_d(bias, elem);
  DeviceArray out_d(elem, r * c);
  DeviceArray mean_d(Elem::kF32, r);
  DeviceArray rstd_d(Elem::kF32, r);
  out_d.poison();
  mean_d.poison();
  rstd_d.poison();
  REQUIRE(kernels::cuda::layernorm_forward(elem, out_d.data(), mean_d.f32(), rstd_d.f32(), inp_d.data(),
                                           weight_d.data(), bias_d.data(), s.rows, s.channels, kEps, nullptr) == 0);
  // out = norm * weight + bias is O(1): the floor 1 makes the tolerance absolute near zero, where
  // the fp32 statistics' rounding (not the value) sets the error.
  require_close(out_d.download(), out, rel, 1.0);
  // mean: 1e-5 absolute at the inputs' scale (the fp32 row sum of O(3) values); rstd ~ 0.5: 1e-5
  // relative. Both are fp32 outputs computed from the same inputs on both sides.
  require_close(mean_d.download(), mean, 1e-5, 1.0);
  require_close(rstd_d.download(), rstd, 1e-5, 1e-3);

  // The forward without statistics writes the same out.
  out_d.poison();
  REQUIRE(kernels::cuda::layernorm_forward(elem, out_d.data(), nullptr, nullptr, inp_d.data(), weight_d.data(),
                                           bias_d.data(), s.rows, s.channels, kEps, nullptr) == 0);
  require_close(out_d.download(), out, rel, 1.0);

  // Backward from the CPU's statistics (uploaded), accumulating into random starting gradients.
  const std::vector<float> dout = round_to(elem, random_values(r * c, 4, 1.0f));
  std::vector<float> dinp = round_to(elem, random_values(r * c, 5, 1.0f));
  std::vector<float> dweight = random_values(c, 6, 1.0f);
  std::vector<float> dbias = random_values(c, 7, 1.0f);
  DeviceArray dout_d(dout, elem);
  DeviceArray dinp_d(dinp, elem);
  DeviceArray dweight_d(dweight);
  DeviceArray dbias_d(dbias);
  DeviceArray cpu_mean_d(mean);
  DeviceArray cpu_rstd_d(rstd);
  const std::size_t scratch_bytes = kernels::cuda::layernorm_backward_scratch_bytes(s.rows, s.channels);
  DeviceArray scratch(Elem::kF32, scratch_bytes / 4 + 1);
  scratch.poison();
  REQUIRE(kernels::cuda::layernorm_backward(elem, dinp_d.data(), dweight_d.f32(), dbias_d.f32(), dout_d.data(),
                                            inp_d.data(), weight_d.data(), cpu_mean_d.f32(), cpu_rstd_d.f32(), s.rows,
                                            s.channels, scratch.data(), scratch_bytes, nullptr) == 0);
  kernels::cpu::layernorm_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(),
                                   mean.data(), rstd.data(), r, c, 1);
  // dinp (start + an O(1) gradient, in `elem`): the same rule as out.
  require_close(dinp_d.download(), dinp, rel, 1.0);
  // dweight and dbias are fp32 sums over R rows of O(1) terms with random signs (plus an O(1)
  // start), so their typical size is sqrt(R); the GPU sums in fp32 per block, the CPU in fp64.
  const double sum_floor = std::sqrt(static_cast<double>(s.rows)) + 1.0;
  require_close(dweight_d.download(), dweight, 2e-5, sum_floor);
  require_close(dbias_d.download(), dbias, 2e-5, sum_floor);
}

TEST_CASE("cuda layernorm: forward and backward match the CPU", "[cuda][layernorm]") {
  const Shape shapes[] = {
      {3, 1},      // a single channel: var 0, out = bias
      {1, 7},      // one row, odd C: scalar paths
      {5, 100},    // C % 4 == 0, C % 8 != 0: fp32 vector, 16-bit scalar
      {17, 768},   // GPT-2 small width
      {9, 4100},   // past the forward's register cache; 16-bit scalar re-read path
      {4500, 64},  // backward blocks of 5 rows (900 blocks)
      {2, 6144},   // backward dynamic shared memory exactly 48 KiB: with the static 512 B, past the default
      {2, 10000},  // backward shared memory 80 KB: the opt-in path
  };
  for (Elem elem : {Elem::kF32, Elem::kBF16, Elem::kF16}) {
    for (const Shape& s : shapes) check_layernorm(elem, s);
  }
  check_layernorm(Elem::kBF16, {130, 2048});  // fully cached bf16 rows of the 1.3B model's width
  check_layernorm(Elem::kF32, {33, 2048});    // fp32 rows half cached, half re-read
}

TEST_CASE("cuda layernorm: no rows does nothing", "[cuda][layernorm]") {
  REQUIRE(kernels::cuda::layernorm_forward(Elem::kF32, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, 16,
                                           kEps, nullptr) == 0);
  REQUIRE(kernels::cuda::layernorm_backward(Elem::kF32, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                            nullptr, 0, 16, nullptr, 0, nullptr) == 0);
}

}  // namespace
}  // namespace zinf::cuda_test
