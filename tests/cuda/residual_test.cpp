// cuda::residual_forward/backward against the CPU kernels (kernels/residual.h), bit for bit: each
// output is one fp32 addition of values both sides share (inputs rounded to `elem` first), rounded
// once to `elem` by the GPU, so the CPU's fp32 result rounded with round_to must equal it exactly.
// Every element type, odd lengths, a misaligned start (the scalar path), and in place (out == inp1,
// out == inp2).
#include "kernels/residual.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/cuda/cuda_buffer.h"

namespace zinf::cuda_test {
namespace {

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

void require_same_bits(const std::vector<float>& actual, const std::vector<float>& expected, const char* what) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (std::memcmp(&actual[i], &expected[i], sizeof(float)) != 0) {
      INFO(what << " element " << i << ": got " << actual[i] << ", expected " << expected[i]);
      REQUIRE(std::memcmp(&actual[i], &expected[i], sizeof(float)) == 0);
    }
  }
}

void check_residual(Elem elem, std::size_t n, std::size_t offset) {
  INFO("elem " << static_cast<int>(elem) << ", n " << n << ", offset " << offset);
  const auto count = static_cast<std::int64_t>(n);
  const std::vector<float> inp1 = round_to(elem, random_values(n, n + 1, 1.0f));
  const std::vector<float> inp2 = round_to(elem, random_values(n, n + 2, 3.0f));
  std::vector<float> out(n);
  kernels::cpu::residual_forward(out.data(), inp1.data(), inp2.data(), n, 1);
  const std::vector<float> expected_out = round_to(elem, out);

  DeviceArray inp1_d(with_offset(inp1, offset), elem);
  DeviceArray inp2_d(with_offset(inp2, offset), elem);
  DeviceArray out_d(elem, n + offset);
  out_d.poison();
  REQUIRE(kernels::cuda::residual_forward(elem, at(out_d, elem, offset), at(inp1_d, elem, offset),
                                          at(inp2_d, elem, offset), count, nullptr) == 0);
  require_same_bits(without_offset(out_d.download(), offset), expected_out, "out");

  // In place into either input.
  DeviceArray a_d(with_offset(inp1, offset), elem);
  REQUIRE(kernels::cuda::residual_forward(elem, at(a_d, elem, offset), at(a_d, elem, offset), at(inp2_d, elem, offset),
                                          count, nullptr) == 0);
  require_same_bits(without_offset(a_d.download(), offset), expected_out, "out == inp1");
  DeviceArray b_d(with_offset(inp2, offset), elem);
  REQUIRE(kernels::cuda::residual_forward(elem, at(b_d, elem, offset), at(inp1_d, elem, offset), at(b_d, elem, offset),
                                          count, nullptr) == 0);
  require_same_bits(without_offset(b_d.download(), offset), expected_out, "out == inp2");

  const std::vector<float> dout = round_to(elem, random_values(n, n + 3, 1.0f));
  std::vector<float> dinp1 = round_to(elem, random_values(n, n + 4, 1.0f));
  std::vector<float> dinp2 = round_to(elem, random_values(n, n + 5, 2.0f));
  DeviceArray dout_d(with_offset(dout, offset), elem);
  DeviceArray dinp1_d(with_offset(dinp1, offset), elem);
  DeviceArray dinp2_d(with_offset(dinp2, offset), elem);
  REQUIRE(kernels::cuda::residual_backward(elem, at(dinp1_d, elem, offset), at(dinp2_d, elem, offset),
                                           at(dout_d, elem, offset), count, nullptr) == 0);
  kernels::cpu::residual_backward(dinp1.data(), dinp2.data(), dout.data(), n, 1);
  require_same_bits(without_offset(dinp1_d.download(), offset), round_to(elem, dinp1), "dinp1");
  require_same_bits(without_offset(dinp2_d.download(), offset), round_to(elem, dinp2), "dinp2");
}

TEST_CASE("cuda residual: forward (also in place) and backward match the CPU bit for bit", "[cuda][residual]") {
  for (Elem elem : {Elem::kF32, Elem::kBF16, Elem::kF16}) {
    for (std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{7}, std::size_t{8}, std::size_t{9},
                          std::size_t{1000}, std::size_t{100003}}) {
      check_residual(elem, n, 0);
      check_residual(elem, n, 1);
    }
  }
}

TEST_CASE("cuda residual: n == 0 does nothing", "[cuda][residual]") {
  REQUIRE(kernels::cuda::residual_forward(Elem::kF32, nullptr, nullptr, nullptr, 0, nullptr) == 0);
  REQUIRE(kernels::cuda::residual_backward(Elem::kF32, nullptr, nullptr, nullptr, 0, nullptr) == 0);
}

}  // namespace
}  // namespace zinf::cuda_test
