// Test helpers for the CUDA tests: an owned cudaMalloc'd array filled from and read back to host
// vectors, with fp32 <-> bf16/fp16 conversion through the CPU kernels (kernels/convert.h), and a
// poison fill so that elements a kernel fails to write show up as NaN. Test-only: every failure
// is a REQUIRE.
#pragma once

#include <cuda_runtime_api.h>
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/convert.h"
#include "kernels/cuda_launch.h"

namespace zinf::cuda_test {

using kernels::cuda::Elem;

inline std::size_t elem_bytes(Elem elem) { return elem == Elem::kF32 ? 4 : 2; }

// Rounds every value to what `elem` can hold (identity for fp32), so CPU references see exactly
// the inputs the GPU sees.
inline std::vector<float> round_to(Elem elem, std::vector<float> values) {
  if (elem == Elem::kF32) return values;
  const auto format = elem == Elem::kBF16 ? kernels::HalfFormat::kBF16 : kernels::HalfFormat::kF16;
  std::vector<std::uint16_t> bits(values.size());
  kernels::cpu::f32_to_half(format, values.data(), bits.data(), values.size());
  kernels::cpu::half_to_f32(format, bits.data(), values.data(), values.size());
  return values;
}

inline std::vector<float> random_values(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

class DeviceArray {
 public:
  DeviceArray(Elem elem, std::size_t n) : elem_(elem), n_(n) {
    REQUIRE(cudaMalloc(&data_, bytes() == 0 ? 1 : bytes()) == cudaSuccess);
  }
  // An fp32 array holding `values`.
  explicit DeviceArray(const std::vector<float>& values, Elem elem = Elem::kF32) : DeviceArray(elem, values.size()) {
    upload(values);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(data_); }

  void* data() const { return data_; }
  float* f32() const { return static_cast<float*>(data_); }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * elem_bytes(elem_); }

  void upload(const std::vector<float>& values) {
    REQUIRE(values.size() == n_);
    if (elem_ == Elem::kF32) {
      REQUIRE(cudaMemcpy(data_, values.data(), bytes(), cudaMemcpyHostToDevice) == cudaSuccess);
      return;
    }
    std::vector<std::uint16_t> bits(n_);
    kernels::cpu::f32_to_half(format(), values.data(), bits.data(), n_);
    REQUIRE(cudaMemcpy(data_, bits.data(), bytes(), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  // Waits for the device, checks that no kernel faulted, and returns the contents widened to fp32.
  std::vector<float> download() const {
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    std::vector<float> values(n_);
    if (elem_ == Elem::kF32) {
      REQUIRE(cudaMemcpy(values.data(), data_, bytes(), cudaMemcpyDeviceToHost) == cudaSuccess);
      return values;
    }
    std::vector<std::uint16_t> bits(n_);
    REQUIRE(cudaMemcpy(bits.data(), data_, bytes(), cudaMemcpyDeviceToHost) == cudaSuccess);
    kernels::cpu::half_to_f32(format(), bits.data(), values.data(), n_);
    return values;
  }
  // Every byte 0xFF: NaN in fp32, bf16 and fp16, so an element a kernel should have written but
  // did not reads back as NaN.
  void poison() { REQUIRE(cudaMemset(data_, 0xFF, bytes()) == cudaSuccess); }

 private:
  kernels::HalfFormat format() const {
    return elem_ == Elem::kBF16 ? kernels::HalfFormat::kBF16 : kernels::HalfFormat::kF16;
  }
  Elem elem_;
  std::size_t n_;
  void* data_ = nullptr;
};

// Relative closeness with an absolute floor: |a - b| <= rel * max(|b|, floor).
inline void require_close(const std::vector<float>& actual, const std::vector<float>& expected, double rel,
                          double floor = 1.0) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    const double bound = rel * std::max(std::abs(e), floor);
    if (!(std::abs(a - e) <= bound)) {
      INFO("element " << i << ": got " << a << ", expected " << e << " (tolerance " << bound << ")");
      REQUIRE(std::abs(a - e) <= bound);
    }
  }
}

}  // namespace zinf::cuda_test
