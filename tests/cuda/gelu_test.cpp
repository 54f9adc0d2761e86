// cuda::gelu_forward/backward against the CPU kernels (kernels/gelu.h): every element type, odd
// lengths (vector steps plus a scalar tail), a misaligned start (the scalar path), in place.
//
// The GPU uses tanhf, the CPU its own exp-based tanh with an absolute error of about 1e-7, so the
// two differ by about 1e-7 * |x| in absolute terms, which is large relative to GELU's tiny values
// for x << 0 (0.5 x (1 + tanh u) cancels there). The tolerances are therefore relative with an
// absolute floor: fp32 1e-5 * max(|expected|, 1); 16-bit outputs 1e-2 relative (bf16 rounds to 8
// significant bits) with a floor of 1e-3 for the forward (values near zero keep their relative
// rounding) and 1 for the accumulated backward (an O(1) start plus an O(1) gradient).
#include "kernels/gelu.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "tests/cuda/cuda_buffer.h"

namespace zinf::cuda_test {
namespace {

// Values with `offset` unused elements in front (offset 1 misaligns the array for vector access).
std::vector<float> with_offset(const std::vector<float>& values, std::size_t offset) {
  std::vector<float> padded(values.size() + offset, 0.0f);
  std::copy(values.begin(), values.end(), padded.begin() + static_cast<std::ptrdiff_t>(offset));
  return padded;
}

std::vector<float> without_offset(const std::vector<float>& padded, std::size_t offset) {
  return {padded.begin() + static_cast<std::ptrdiff_t>(offset), padded.end()};
}

void* at(const DeviceArray& array, Elem elem, std::size_t offset) {
  return static_cast<unsigned char*>(array.data()) + offset * elem_bytes(elem);
}

void check_gelu(Elem elem, std::size_t n, std::size_t offset) {
  INFO("elem " << static_cast<int>(elem) << ", n " << n << ", offset " << offset);
  const bool f32 = elem == Elem::kF32;
  const double rel = f32 ? 1e-5 : 1e-2;
  const std::vector<float> inp = round_to(elem, random_values(n, n + 1, 3.0f));
  const auto count = static_cast<std::int64_t>(n);

  std::vector<float> out(n);
  kernels::cpu::gelu_forward(out.data(), inp.data(), n, 1);
  DeviceArray inp_d(with_offset(inp, offset), elem);
  DeviceArray out_d(elem, n + offset);
  out_d.poison();
  REQUIRE(kernels::cuda::gelu_forward(elem, at(out_d, elem, offset), at(inp_d, elem, offset), count, nullptr) == 0);
  require_close(without_offset(out_d.download(), offset), out, rel, f32 ? 1.0 : 1e-3);

  // In place: out == inp.
  DeviceArray inplace_d(with_offset(inp, offset), elem);
  REQUIRE(kernels::cuda::gelu_forward(elem, at(inplace_d, elem, offset), at(inplace_d, elem, offset), count, nullptr) ==
          0);
  require_close(without_offset(inplace_d.download(), offset), out, rel, f32 ? 1.0 : 1e-3);

  const std::vector<float> dout = round_to(elem, random_values(n, n + 2, 1.0f));
  std::vector<float> dinp = round_to(elem, random_values(n, n + 3, 1.0f));
  DeviceArray dout_d(with_offset(dout, offset), elem);
  DeviceArray dinp_d(with_offset(dinp, offset), elem);
  REQUIRE(kernels::cuda::gelu_backward(elem, at(dinp_d, elem, offset), at(inp_d, elem, offset),
                                       at(dout_d, elem, offset), count, nullptr) == 0);
  kernels::cpu::gelu_backward(dinp.data(), inp.data(), dout.data(), n, 1);
  require_close(without_offset(dinp_d.download(), offset), dinp, rel, 1.0);
}

TEST_CASE("cuda gelu: forward (also in place) and backward match the CPU", "[cuda][gelu]") {
  for (Elem elem : {Elem::kF32, Elem::kBF16, Elem::kF16}) {
    for (std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{7}, std::size_t{8}, std::size_t{9},
                          std::size_t{1000}, std::size_t{100003}}) {
      check_gelu(elem, n, 0);
      check_gelu(elem, n, 1);
    }
  }
}

TEST_CASE("cuda gelu: n == 0 does nothing, n < 0 is refused", "[cuda][gelu]") {
  REQUIRE(kernels::cuda::gelu_forward(Elem::kBF16, nullptr, nullptr, 0, nullptr) == 0);
  REQUIRE(kernels::cuda::gelu_backward(Elem::kBF16, nullptr, nullptr, nullptr, 0, nullptr) == 0);
  REQUIRE(kernels::cuda::gelu_forward(Elem::kBF16, nullptr, nullptr, -1, nullptr) != 0);
}

}  // namespace
}  // namespace zinf::cuda_test
