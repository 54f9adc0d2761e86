// The harness of the CudaOps-against-CpuOps tests (cuda_ops_test.cpp, cuda_ops_llama_test.cpp,
// cuda_ops_gqa_test.cpp): a CUDA device and a CPU device, tensors made in pairs from the same
// random values rounded to the compute dtype (the CPU side computes in fp32 on exactly those
// values), NaN-poisoned outputs, and the tolerances that cover only the GPU's own rounding.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "libengine/device/cpu_device.h"
#include "libengine/device/cuda_device.h"
#include "libengine/tensor/tensor.h"
#include "tests/cuda/cuda_buffer.h"

namespace zinf::cuda_ops_test {

using zinf::DType;
using zinf::ErrorCode;
using zinf::Shape;
using zinf::Status;
using zinf::Tensor;
using zinf::cuda_test::random_values;
using zinf::cuda_test::require_close;
using zinf::cuda_test::round_to;
using zinf::kernels::cuda::Elem;
using namespace zinf::device;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr DType kComputeDtypes[] = {DType::kF32, DType::kBF16, DType::kF16};

inline Elem elem_of(DType dtype) {
  return dtype == DType::kF32 ? Elem::kF32 : dtype == DType::kBF16 ? Elem::kBF16 : Elem::kF16;
}
inline zinf::kernels::HalfFormat half_format(DType dtype) {
  return dtype == DType::kF16 ? zinf::kernels::HalfFormat::kF16 : zinf::kernels::HalfFormat::kBF16;
}
// Tolerance of an output in `dtype` computed from `compute`-dtype inputs.
inline double tolerance(DType compute) { return compute == DType::kF32 ? 1e-5 : 1e-2; }
// Tolerance of an fp32 output (gradient accumulators, statistics): only the summation order differs.
inline double fp32_tolerance(DType compute) { return compute == DType::kF32 ? 1e-5 : 1e-4; }

inline std::vector<unsigned char> encode(DType dtype, const std::vector<float>& values) {
  std::vector<unsigned char> bytes(values.size() * zinf::dtype_size_bytes(dtype));
  if (dtype == DType::kF32) {
    if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
  }
  std::vector<std::uint16_t> bits(values.size());
  zinf::kernels::cpu::f32_to_half(half_format(dtype), values.data(), bits.data(), values.size());
  if (!bytes.empty()) std::memcpy(bytes.data(), bits.data(), bytes.size());
  return bytes;
}

inline std::vector<float> decode(DType dtype, const void* bytes, std::size_t n) {
  std::vector<float> values(n);
  if (dtype == DType::kF32) {
    if (n != 0) std::memcpy(values.data(), bytes, n * sizeof(float));
    return values;
  }
  std::vector<std::uint16_t> bits(n);
  if (n != 0) std::memcpy(bits.data(), bytes, n * sizeof(std::uint16_t));
  zinf::kernels::cpu::half_to_f32(half_format(dtype), bits.data(), values.data(), n);
  return values;
}

// A CUDA device and a CPU device, and tensors made in pairs from the same host values.
class Harness {
 public:
  struct Pair {
    Tensor gpu;
    Tensor cpu;
  };

  explicit Harness(std::uint64_t budget_bytes = std::uint64_t{512} << 20) : cpu_(make_cpu_device({})) {
    auto cuda = make_cuda_device({.device_index = 0, .memory_budget_bytes = budget_bytes});
    INFO((cuda.is_ok() ? std::string() : cuda.status().message()));
    REQUIRE(cuda.is_ok());
    cuda_ = std::move(cuda).value();
  }

  Device& cuda() { return *cuda_; }
  Ops& gpu() { return cuda_->ops(); }
  Ops& cpu() { return cpu_->ops(); }

  // GPU: `dtype` holding `values` rounded to it; CPU: fp32 holding the same rounded values (CpuOps
  // computes in fp32).
  Pair compute(DType dtype, Shape shape, const std::vector<float>& values) {
    const std::vector<float> rounded = round_to(elem_of(dtype), values);
    return {upload(dtype, shape, rounded), cpu_tensor(DType::kF32, shape, rounded)};
  }
  Pair random(DType dtype, Shape shape, float scale = 1.0f) {
    return compute(dtype, shape, random_values(static_cast<std::size_t>(shape.numel()), ++seed_, scale));
  }
  Pair poisoned(DType dtype, Shape shape) {
    return compute(dtype, shape, std::vector<float>(static_cast<std::size_t>(shape.numel()), kNaN));
  }
  // Both sides store `dtype` (for copy, sum_squares and adam_step, which CpuOps takes in any dtype).
  Pair stored(DType dtype, Shape shape, const std::vector<float>& values) {
    return {upload(dtype, shape, values), cpu_tensor(dtype, shape, values)};
  }

  // Token ids in each device's memory.
  struct Tokens {
    std::span<const std::int32_t> gpu;
    std::span<const std::int32_t> cpu;
  };
  Tokens tokens(std::size_t count, std::int32_t vocab) {
    std::mt19937 rng(static_cast<unsigned>(++seed_));
    std::vector<std::int32_t> ids(count);
    for (auto& id : ids) id = static_cast<std::int32_t>(rng() % static_cast<unsigned>(vocab));
    const std::size_t bytes = count * sizeof(std::int32_t);
    DeviceBuffer& gpu_buffer = keep(cuda_->allocate(bytes, "test tokens"));
    cuda_->copy(gpu_buffer.data(), ids.data(), bytes, CopyKind::kHostToDevice, cuda_->stream(StreamRole::kCompute));
    require_ok(cuda_->stream(StreamRole::kCompute).synchronize());
    DeviceBuffer& cpu_buffer = keep(cpu_->allocate(bytes, "test tokens"));
    std::memcpy(cpu_buffer.data(), ids.data(), bytes);
    return {{static_cast<const std::int32_t*>(gpu_buffer.data()), count},
            {static_cast<const std::int32_t*>(cpu_buffer.data()), count}};
  }

  std::vector<unsigned char> gpu_bytes(const Tensor& t) {
    require_ok(cuda_->synchronize());  // every launch so far succeeded
    std::vector<unsigned char> bytes(t.bytes());
    cuda_->copy(bytes.data(), t.data(), t.bytes(), CopyKind::kDeviceToHost, cuda_->stream(StreamRole::kCompute));
    require_ok(cuda_->stream(StreamRole::kCompute).synchronize());
    return bytes;
  }
  std::vector<float> gpu_values(const Tensor& t) {
    const std::vector<unsigned char> bytes = gpu_bytes(t);
    return decode(t.dtype(), bytes.data(), static_cast<std::size_t>(t.numel()));
  }
  static std::vector<float> cpu_values(const Tensor& t) {
    return decode(t.dtype(), t.data(), static_cast<std::size_t>(t.numel()));
  }
  void check(const Pair& pair, double rel, double floor = 1.0) {
    require_close(gpu_values(pair.gpu), cpu_values(pair.cpu), rel, floor);
  }

  static void require_ok(const Status& status) {
    INFO(status.message());
    REQUIRE(status.is_ok());
  }

 private:
  DeviceBuffer& keep(zinf::Result<DeviceBuffer> buffer) {
    INFO((buffer.is_ok() ? std::string() : buffer.status().message()));
    REQUIRE(buffer.is_ok());
    buffers_.push_back(std::move(buffer).value());
    return buffers_.back();
  }
  Tensor upload(DType dtype, Shape shape, const std::vector<float>& values) {
    const std::vector<unsigned char> bytes = encode(dtype, values);
    DeviceBuffer& buffer = keep(cuda_->allocate(bytes.size(), "test tensor"));
    cuda_->copy(buffer.data(), bytes.data(), bytes.size(), CopyKind::kHostToDevice,
                cuda_->stream(StreamRole::kCompute));
    require_ok(cuda_->stream(StreamRole::kCompute).synchronize());
    return Tensor(buffer.data(), dtype, shape, cuda_.get());
  }
  Tensor cpu_tensor(DType dtype, Shape shape, const std::vector<float>& values) {
    const std::vector<unsigned char> bytes = encode(dtype, values);
    DeviceBuffer& buffer = keep(cpu_->allocate(bytes.size(), "test tensor"));
    if (!bytes.empty()) std::memcpy(buffer.data(), bytes.data(), bytes.size());
    return Tensor(buffer.data(), dtype, shape, cpu_.get());
  }

  std::unique_ptr<Device> cpu_;
  std::unique_ptr<Device> cuda_;
  std::deque<DeviceBuffer> buffers_;  // declared last: released before the devices
  std::uint64_t seed_ = 1000;
};

constexpr std::int64_t kB = 2;
constexpr std::int64_t kT = 33;  // not a multiple of any block size
constexpr std::int64_t kR = kB * kT;

}  // namespace zinf::cuda_ops_test
