// cuda::adam_step and cuda::sum_squares against the CPU kernels (kernels/adam.h).
//
// adam_step: AdamW and Adam (L2), three steps, every gradient format, with and without a bf16/fp16
// copy of the parameters, odd lengths and a misaligned slice (the scalar path). The CUDA step repeats
// the CPU's operations, roundings and fused multiply-adds, so params, m and v must agree to within
// one ulp (they are expected to be equal) and the 16-bit copy to within one unit of its last place.
// sum_squares: every format, lengths around the per-block chunk, a start value in the accumulator,
// the same bits on a second run, inf and NaN propagated.
#include "kernels/adam.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "tests/cuda/cuda_buffer.h"

namespace zinf::cuda_test {
namespace {

using kernels::AdamHyper;
using kernels::AdamSlice;
using kernels::HalfFormat;

HalfFormat format_of(Elem elem) { return elem == Elem::kBF16 ? HalfFormat::kBF16 : HalfFormat::kF16; }

// Distance in units of the last place between two finite floats of the same sign (large otherwise).
std::int64_t ulp_distance(float a, float b) {
  if (a == b) return 0;
  if (std::signbit(a) != std::signbit(b) || !std::isfinite(a) || !std::isfinite(b)) return INT64_MAX;
  std::uint32_t ia;
  std::uint32_t ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return ia > ib ? static_cast<std::int64_t>(ia - ib) : static_cast<std::int64_t>(ib - ia);
}

void require_within_ulp(const std::vector<float>& actual, const std::vector<float>& expected, const char* what) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (ulp_distance(actual[i], expected[i]) > 1) {
      INFO(what << " element " << i << ": got " << actual[i] << ", CPU " << expected[i]);
      REQUIRE(ulp_distance(actual[i], expected[i]) <= 1);
    }
  }
}

std::vector<std::uint16_t> download_bits(const void* device, std::size_t n) {
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  std::vector<std::uint16_t> bits(n);
  if (n > 0) REQUIRE(cudaMemcpy(bits.data(), device, n * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
  return bits;
}

std::vector<float> positive(std::vector<float> values) {
  for (float& v : values) v = std::fabs(v);
  return values;
}

// Copies host values into a device fp32 array at an element offset (to misalign the slice).
void upload_at(float* device, const std::vector<float>& values) {
  if (!values.empty()) {
    REQUIRE(cudaMemcpy(device, values.data(), values.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  }
}

std::vector<float> download_at(const float* device, std::size_t n) {
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  std::vector<float> values(n);
  if (n > 0) REQUIRE(cudaMemcpy(values.data(), device, n * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  return values;
}

struct HalfCopy {
  bool present;
  HalfFormat format;
};

void check_adam(Elem grad_elem, HalfCopy half, bool decoupled, std::size_t n, std::size_t offset) {
  INFO("grad elem " << static_cast<int>(grad_elem) << ", half copy " << half.present << "/"
                    << static_cast<int>(half.format) << ", AdamW " << decoupled << ", n " << n << ", offset "
                    << offset);
  std::vector<float> param = random_values(n, 1, 1.0f);
  std::vector<float> m = random_values(n, 2, 0.01f);
  std::vector<float> v = positive(random_values(n, 3, 1e-4f));

  DeviceArray param_d(Elem::kF32, n + offset);
  DeviceArray m_d(Elem::kF32, n + offset);
  DeviceArray v_d(Elem::kF32, n + offset);
  DeviceArray grad_d(grad_elem, n + offset);
  DeviceArray half_d(Elem::kBF16, n + offset);  // raw 16-bit storage for either format
  upload_at(param_d.f32() + offset, param);
  upload_at(m_d.f32() + offset, m);
  upload_at(v_d.f32() + offset, v);
  half_d.poison();

  AdamHyper hyper;
  hyper.lr = 3e-3;
  hyper.beta1 = 0.9;
  hyper.beta2 = 0.95;
  hyper.eps = 1e-8;
  hyper.weight_decay = 0.1;
  hyper.decoupled_weight_decay = decoupled;
  hyper.grad_scale = 0.37;

  AdamSlice cpu_slice{param.data(), m.data(), v.data(), n, nullptr, half.format};
  std::vector<std::uint16_t> cpu_half(n);
  if (half.present) cpu_slice.param_half = cpu_half.data();
  auto* half_bits = static_cast<std::uint16_t*>(half_d.data()) + offset;
  AdamSlice gpu_slice{param_d.f32() + offset,
                      m_d.f32() + offset,
                      v_d.f32() + offset,
                      n,
                      half.present ? half_bits : nullptr,
                      half.format};

  for (std::int64_t step = 1; step <= 3; ++step) {
    hyper.step = step;
    const std::vector<float> grad = round_to(grad_elem, random_values(n, 10 + static_cast<std::uint64_t>(step), 1.0f));
    // The gradient in its storage format at the offset: upload through a full-size host vector.
    std::vector<float> padded(n + offset, 0.0f);
    std::copy(grad.begin(), grad.end(), padded.begin() + static_cast<std::ptrdiff_t>(offset));
    grad_d.upload(padded);
    const void* grad_device = static_cast<const unsigned char*>(grad_d.data()) + offset * elem_bytes(grad_elem);
    REQUIRE(kernels::cuda::adam_step(hyper, gpu_slice, grad_device, grad_elem, nullptr) == 0);

    if (grad_elem == Elem::kF32) {
      kernels::cpu::adam_step(hyper, cpu_slice, grad.data(), 1);
    } else {
      std::vector<std::uint16_t> grad_bits(n);
      kernels::cpu::f32_to_half(format_of(grad_elem), grad.data(), grad_bits.data(), n);
      kernels::cpu::adam_step(hyper, cpu_slice, grad_bits.data(), format_of(grad_elem), 1);
    }
  }
  require_within_ulp(download_at(param_d.f32() + offset, n), param, "param");
  require_within_ulp(download_at(m_d.f32() + offset, n), m, "exp_avg");
  require_within_ulp(download_at(v_d.f32() + offset, n), v, "exp_avg_sq");
  if (half.present) {
    const std::vector<std::uint16_t> gpu_half = download_bits(half_bits, n);
    for (std::size_t i = 0; i < n; ++i) {
      // The same sign bit, so adjacent patterns are adjacent values.
      const int distance = std::abs(static_cast<int>(gpu_half[i]) - static_cast<int>(cpu_half[i]));
      if (distance > 1) {
        INFO("param_half element " << i << ": 0x" << std::hex << gpu_half[i] << " vs CPU 0x" << cpu_half[i]);
        REQUIRE(distance <= 1);
      }
    }
  }
}

TEST_CASE("cuda adam: adam_step matches the CPU step for every gradient format and half copy", "[cuda][adam]") {
  const HalfCopy copies[] = {{false, HalfFormat::kBF16}, {true, HalfFormat::kBF16}, {true, HalfFormat::kF16}};
  for (Elem grad_elem : {Elem::kF32, Elem::kBF16, Elem::kF16}) {
    for (const HalfCopy& half : copies) {
      for (bool decoupled : {true, false}) {
        check_adam(grad_elem, half, decoupled, 10007, 0);
        check_adam(grad_elem, half, decoupled, 13, 1);  // misaligned: the scalar path
      }
    }
  }
  for (std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{4}, std::size_t{5}, std::size_t{262147}}) {
    check_adam(Elem::kBF16, {true, HalfFormat::kBF16}, true, n, 0);
  }
}

TEST_CASE("cuda adam: adam_step with n == 0 does nothing", "[cuda][adam]") {
  AdamHyper hyper;
  AdamSlice slice;
  REQUIRE(kernels::cuda::adam_step(hyper, slice, nullptr, Elem::kF32, nullptr) == 0);
}

// sum_squares on the GPU, added to `start` in a device double; offset misaligns the array.
double gpu_sum_squares(Elem elem, const std::vector<float>& values, double start, std::size_t offset = 0) {
  const std::size_t n = values.size();
  std::vector<float> padded(n + offset, 0.0f);
  std::copy(values.begin(), values.end(), padded.begin() + static_cast<std::ptrdiff_t>(offset));
  DeviceArray x(elem, n + offset);
  x.upload(padded);
  const auto count = static_cast<std::int64_t>(n);
  const std::size_t scratch_bytes = kernels::cuda::sum_squares_scratch_bytes(count);
  DeviceArray scratch(Elem::kF32, scratch_bytes / 4 + 1);
  DeviceArray accumulator_storage(Elem::kF32, 2);  // one double
  auto* accumulator = static_cast<double*>(accumulator_storage.data());
  REQUIRE(cudaMemcpy(accumulator, &start, sizeof(double), cudaMemcpyHostToDevice) == cudaSuccess);
  const void* base = static_cast<const unsigned char*>(x.data()) + offset * elem_bytes(elem);
  REQUIRE(kernels::cuda::sum_squares(elem, base, count, accumulator, scratch.data(), scratch_bytes, nullptr) == 0);
  double result = 0.0;
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaMemcpy(&result, accumulator, sizeof(double), cudaMemcpyDeviceToHost) == cudaSuccess);
  return result;
}

double cpu_sum_squares(Elem elem, const std::vector<float>& values) {
  if (elem == Elem::kF32) return kernels::cpu::sum_squares(values.data(), values.size(), 1);
  std::vector<std::uint16_t> bits(values.size());
  kernels::cpu::f32_to_half(format_of(elem), values.data(), bits.data(), values.size());
  return kernels::cpu::sum_squares(bits.data(), format_of(elem), values.size(), 1);
}

TEST_CASE("cuda adam: sum_squares matches the CPU sum and is deterministic", "[cuda][adam]") {
  constexpr double kStart = 2.5;
  for (Elem elem : {Elem::kF32, Elem::kBF16, Elem::kF16}) {
    for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{16383}, std::size_t{16384}, std::size_t{16385},
                          std::size_t{100003}, (std::size_t{1} << 21) + 5}) {
      INFO("elem " << static_cast<int>(elem) << ", n " << n);
      const std::vector<float> values = round_to(elem, random_values(n, n, 2.0f));
      const double expected = kStart + cpu_sum_squares(elem, values);
      const double first = gpu_sum_squares(elem, values, kStart);
      // Both sums add exact fp64 squares, only in different orders: relative difference ~ n * 1e-16.
      REQUIRE(std::abs(first - expected) <= 1e-12 * expected);
      const double second = gpu_sum_squares(elem, values, kStart);
      REQUIRE(std::memcmp(&first, &second, sizeof(double)) == 0);
      const double misaligned = gpu_sum_squares(elem, values, kStart, 1);
      REQUIRE(std::abs(misaligned - expected) <= 1e-12 * expected);
    }
  }
}

TEST_CASE("cuda adam: sum_squares propagates inf and NaN and adds nothing for n == 0", "[cuda][adam]") {
  for (Elem elem : {Elem::kF32, Elem::kBF16, Elem::kF16}) {
    std::vector<float> values = round_to(elem, random_values(40000, 5, 1.0f));
    values[20001] = std::numeric_limits<float>::infinity();
    REQUIRE(std::isinf(gpu_sum_squares(elem, values, 0.0)));
    values[123] = std::numeric_limits<float>::quiet_NaN();
    REQUIRE(std::isnan(gpu_sum_squares(elem, values, 0.0)));
  }
  // fp16 overflow: 70000 is past fp16's range, so its fp16 copy is inf.
  std::vector<float> big(100, 1.0f);
  big[50] = 70000.0f;
  REQUIRE(std::isinf(gpu_sum_squares(Elem::kF16, big, 0.0)));
  REQUIRE(gpu_sum_squares(Elem::kF32, {}, 4.0) == 4.0);
}

}  // namespace
}  // namespace zinf::cuda_test
