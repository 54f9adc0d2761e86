// cuda::swiglu_forward/backward against the CPU kernels (kernels/swiglu.h): every element type, odd
// lengths (vector steps plus a scalar tail, and 5632 * 3 + 37), a misaligned start (the scalar
// path), in place on gate and on up.
//
// The GPU uses expf, the CPU exp_approx (relative error <= 2e-7), so fp32 results agree to about
// 1e-6 relative: tolerance 1e-5 * max(|expected|, 1). 16-bit outputs: 1e-2 relative with a floor of
// 1e-3 for the forward and 1 for the accumulated backward (an O(1) start plus an O(1) gradient).
#include "kernels/swiglu.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
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

void check_swiglu(Elem elem, std::size_t n, std::size_t offset) {
  INFO("elem " << static_cast<int>(elem) << ", n " << n << ", offset " << offset);
  const bool f32 = elem == Elem::kF32;
  const double rel = f32 ? 1e-5 : 1e-2;
  const std::vector<float> gate = round_to(elem, random_values(n, n + 1, 3.0f));
  const std::vector<float> up = round_to(elem, random_values(n, n + 2, 1.0f));
  const auto count = static_cast<std::int64_t>(n);

  std::vector<float> out(n);
  kernels::cpu::swiglu_forward(out.data(), gate.data(), up.data(), n, 1);
  DeviceArray gate_d(with_offset(gate, offset), elem);
  DeviceArray up_d(with_offset(up, offset), elem);
  DeviceArray out_d(elem, n + offset);
  out_d.poison();
  REQUIRE(kernels::cuda::swiglu_forward(elem, at(out_d, elem, offset), at(gate_d, elem, offset), at(up_d, elem, offset),
                                        count, nullptr) == 0);
  require_close(without_offset(out_d.download(), offset), out, rel, f32 ? 1.0 : 1e-3);

  // In place: out == gate, then out == up.
  DeviceArray in_gate_d(with_offset(gate, offset), elem);
  REQUIRE(kernels::cuda::swiglu_forward(elem, at(in_gate_d, elem, offset), at(in_gate_d, elem, offset),
                                        at(up_d, elem, offset), count, nullptr) == 0);
  require_close(without_offset(in_gate_d.download(), offset), out, rel, f32 ? 1.0 : 1e-3);
  DeviceArray in_up_d(with_offset(up, offset), elem);
  REQUIRE(kernels::cuda::swiglu_forward(elem, at(in_up_d, elem, offset), at(gate_d, elem, offset),
                                        at(in_up_d, elem, offset), count, nullptr) == 0);
  require_close(without_offset(in_up_d.download(), offset), out, rel, f32 ? 1.0 : 1e-3);

  const std::vector<float> dout = round_to(elem, random_values(n, n + 3, 1.0f));
  std::vector<float> dgate = round_to(elem, random_values(n, n + 4, 1.0f));
  std::vector<float> dup = round_to(elem, random_values(n, n + 5, 1.0f));
  DeviceArray dout_d(with_offset(dout, offset), elem);
  DeviceArray dgate_d(with_offset(dgate, offset), elem);
  DeviceArray dup_d(with_offset(dup, offset), elem);
  REQUIRE(kernels::cuda::swiglu_backward(elem, at(dgate_d, elem, offset), at(dup_d, elem, offset),
                                         at(dout_d, elem, offset), at(gate_d, elem, offset), at(up_d, elem, offset),
                                         count, nullptr) == 0);
  kernels::cpu::swiglu_backward(dgate.data(), dup.data(), dout.data(), gate.data(), up.data(), n, 1);
  require_close(without_offset(dgate_d.download(), offset), dgate, rel, 1.0);
  require_close(without_offset(dup_d.download(), offset), dup, rel, 1.0);
}

TEST_CASE("cuda swiglu: forward (also in place) and backward match the CPU", "[cuda][swiglu]") {
  for (Elem elem : {Elem::kF32, Elem::kBF16, Elem::kF16}) {
    for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{9}, std::size_t{37},
                          std::size_t{5632 * 3 + 37}, std::size_t{100003}}) {
      check_swiglu(elem, n, 0);
      check_swiglu(elem, n, 1);
    }
  }
}

TEST_CASE("cuda swiglu: n == 0 does nothing, n < 0 is refused", "[cuda][swiglu]") {
  REQUIRE(kernels::cuda::swiglu_forward(Elem::kBF16, nullptr, nullptr, nullptr, 0, nullptr) == 0);
  REQUIRE(kernels::cuda::swiglu_backward(Elem::kBF16, nullptr, nullptr, nullptr, nullptr, nullptr, 0, nullptr) == 0);
  REQUIRE(kernels::cuda::swiglu_forward(Elem::kBF16, nullptr, nullptr, nullptr, -1, nullptr) != 0);
}

}  // namespace
}  // namespace zinf::cuda_test
