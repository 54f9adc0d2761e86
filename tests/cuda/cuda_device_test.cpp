// The CUDA backend of Device: opening (missing GPU index, budget beyond the free memory), the
// budgeted pool (tier messages, exact accounting, block reuse, coalescing of free neighbours, the
// fragmentation message, room for the blocks' rounding, concurrent use), page-locked host memory
// on its own tier, copies on every stream, events ordering a host-to-device copy before a
// compute-stream kernel, host work run in stream order with its error reported by synchronize(),
// and a failed launch reported with its launcher's name. Needs a GPU (the binary exits 77 without
// one).
#include "libengine/device/cuda_device.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/convert.h"
#include "kernels/matmul.h"
#include "libengine/device/cuda_check.h"
#include "libengine/device/device_factory.h"
#include "libengine/tensor/tensor.h"

namespace {

using zinf::DType;
using zinf::ErrorCode;
using zinf::Shape;
using zinf::Status;
using zinf::Tensor;
using namespace zinf::device;

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * 1024;

std::unique_ptr<Device> open_device(std::uint64_t budget_bytes, std::uint64_t host_budget_bytes = 0) {
  auto device = make_cuda_device(
      {.device_index = 0, .memory_budget_bytes = budget_bytes, .host_memory_budget_bytes = host_budget_bytes});
  INFO((device.is_ok() ? std::string() : device.status().message()));
  REQUIRE(device.is_ok());
  return std::move(device).value();
}

DeviceBuffer take(Device& device, std::size_t bytes, std::string_view what) {
  auto buffer = device.allocate(bytes, what);
  INFO((buffer.is_ok() ? std::string() : buffer.status().message()));
  REQUIRE(buffer.is_ok());
  return std::move(buffer).value();
}

DeviceBuffer take_host(Device& device, std::size_t bytes) {
  auto buffer = device.allocate_host(bytes, "test staging");
  INFO((buffer.is_ok() ? std::string() : buffer.status().message()));
  REQUIRE(buffer.is_ok());
  return std::move(buffer).value();
}

char* bytes_of(const DeviceBuffer& buffer) { return static_cast<char*>(buffer.data()); }

void require_ok(const Status& status) {
  INFO(status.message());
  REQUIRE(status.is_ok());
}

TEST_CASE("cuda device: a missing device index and a budget beyond the free memory are refused") {
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  auto missing = make_cuda_device({.device_index = count});
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == ErrorCode::kNotFound);
  CHECK(missing.status().message() == "device: cuda:" + std::to_string(count) + " does not exist (" +
                                          std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s") +
                                          " visible)");

  auto huge = make_cuda_device({.device_index = 0, .memory_budget_bytes = std::uint64_t{1} << 60});
  REQUIRE_FALSE(huge.is_ok());
  CHECK(huge.status().code() == ErrorCode::kInfeasible);
  INFO(huge.status().message());
  CHECK(huge.status().message().rfind("device_memory: 1.00 EiB does not fit in the ", 0) == 0);
  CHECK(huge.status().message().find(" free on cuda:0 ") != std::string::npos);

  auto through_factory = make_device({.kind = DeviceKind::kCuda, .memory_budget_bytes = 64 * kMiB});
  REQUIRE(through_factory.is_ok());
  CHECK(through_factory.value()->kind() == DeviceKind::kCuda);
}

TEST_CASE("cuda device: describe, and a request beyond the budget is refused by the device tier") {
  auto device = open_device(kMiB);
  CHECK(device->kind() == DeviceKind::kCuda);
  INFO(device->describe());
  CHECK(device->describe().rfind("cuda:0 ", 0) == 0);
  CHECK(device->describe().find("; 1.00 MiB budget)") != std::string::npos);
  CHECK(device->memory().name() == "device");
  CHECK(device->memory().capacity_bytes() == kMiB);
  {
    DeviceBuffer held = take(*device, 600 * kKiB, "held");
    CHECK(reinterpret_cast<std::uintptr_t>(held.data()) % 256 == 0);
    auto refused = device->allocate(500 * kKiB, "block 3 activations");
    REQUIRE_FALSE(refused.is_ok());
    CHECK(refused.status().code() == ErrorCode::kOutOfMemory);
    CHECK(refused.status().message() ==
          "out of memory on the device tier: 500 KiB for block 3 activations does not fit (600 KiB of the 1.00 MiB "
          "budget in use)");
    CHECK(device->memory().usage().current_bytes == 600 * kKiB);
    auto empty = device->allocate(0, "nothing");
    REQUIRE(empty.is_ok());
    CHECK(empty.value().empty());
  }
  CHECK(device->memory().usage().current_bytes == 0);
  CHECK(device->memory().usage().peak_bytes == 600 * kKiB);
}

TEST_CASE("cuda device: the pool reuses freed blocks, merges free neighbours and names fragmentation") {
  auto device = open_device(kMiB);
  constexpr std::size_t kQuarter = 256 * kKiB;
  DeviceBuffer a = take(*device, kQuarter, "a");
  DeviceBuffer b = take(*device, kQuarter, "b");
  DeviceBuffer c = take(*device, kQuarter, "c");
  DeviceBuffer d = take(*device, kQuarter, "d");
  char* const base = bytes_of(a);
  // Best fit from the front of the arena: the four blocks tile it in order.
  CHECK(bytes_of(b) == base + kQuarter);
  CHECK(bytes_of(c) == base + 2 * kQuarter);
  CHECK(bytes_of(d) == base + 3 * kQuarter);

  a = DeviceBuffer();
  c = DeviceBuffer();
  CHECK(device->memory().usage().current_bytes == 2 * kQuarter);
  // 512 KiB fits the budget (512 KiB in use of 1 MiB) but no single free block. The free memory is
  // a and c plus the pool's 16 KiB of rounding room behind d (1/128 of the budget, 64 blocks' worth).
  auto fragmented = device->allocate(2 * kQuarter, "half of the pool");
  REQUIRE_FALSE(fragmented.is_ok());
  CHECK(fragmented.status().code() == ErrorCode::kOutOfMemory);
  INFO(fragmented.status().message());
  CHECK(fragmented.status().message().rfind("out of memory on the device tier: 512 KiB for half of the pool ", 0) == 0);
  CHECK(fragmented.status().message().find("the largest free block is 256 KiB of 528 KiB free") != std::string::npos);
  CHECK(device->memory().usage().current_bytes == 2 * kQuarter);  // a refused request counts nothing

  // Reuse: a freed block of the right size comes back, the lowest address first.
  DeviceBuffer again = take(*device, kQuarter, "again");
  CHECK(bytes_of(again) == base);
  again = DeviceBuffer();

  // Freeing b merges a, b and c into one 768 KiB block.
  b = DeviceBuffer();
  DeviceBuffer merged = take(*device, 3 * kQuarter, "three quarters");
  CHECK(bytes_of(merged) == base);
  merged = DeviceBuffer();
  d = DeviceBuffer();
  DeviceBuffer whole = take(*device, kMiB, "the whole pool");
  CHECK(bytes_of(whole) == base);
  whole = DeviceBuffer();

  // Exact bytes are counted; blocks are 256-byte aligned.
  DeviceBuffer small = take(*device, 100, "small");
  DeviceBuffer next = take(*device, 100, "next");
  CHECK(bytes_of(next) == bytes_of(small) + 256);
  CHECK(device->memory().usage().current_bytes == 200);
}

TEST_CASE("cuda device: blocks rounded up to 256 bytes do not make buffers that fit the budget fail") {
  auto device = open_device(kMiB);
  std::vector<DeviceBuffer> held;
  // 64 blocks of 16 KiB - 255 B each take 16 KiB of the pool; with the rest of the budget in one
  // more block, exactly 1 MiB is requested but 1 MiB + 16 KiB of the pool is taken.
  constexpr std::size_t kSmall = 16 * kKiB - 255;
  for (int i = 0; i < 64; ++i) held.push_back(take(*device, kSmall, "small"));
  held.push_back(take(*device, kMiB - 64 * kSmall, "the rest of the budget"));
  CHECK(device->memory().usage().current_bytes == kMiB);
  auto refused = device->allocate(1, "one byte more");
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().message().rfind("out of memory on the device tier: 1.00 B for one byte more does not fit",
                                         0) == 0);
}

TEST_CASE("cuda device: concurrent allocations and frees leave one whole pool behind") {
  constexpr std::size_t kPool = 16 * kMiB;
  auto device = open_device(kPool);
  std::vector<std::thread> threads;
  std::atomic<int> refused{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::uniform_int_distribution<std::size_t> size(1, 64 * kKiB);
      std::vector<DeviceBuffer> held;
      for (int i = 0; i < 2000; ++i) {
        if (!held.empty() && (rng() % 3 == 0 || held.size() > 16)) {
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(rng() % held.size()));
        } else {
          auto buffer = device->allocate(size(rng), "churn");
          if (buffer.is_ok()) {
            held.push_back(std::move(buffer).value());
          } else {
            ++refused;
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  // At most 4 x 17 blocks of 64 KiB are held at once: 4.25 MiB, leaving gaps too large to fragment.
  CHECK(refused == 0);
  CHECK(device->memory().usage().current_bytes == 0);
  DeviceBuffer whole = take(*device, kPool, "the whole pool");  // every free neighbour was merged
  CHECK(!whole.empty());
}

TEST_CASE("cuda device: page-locked host memory is counted on the host tier and refused beyond its budget") {
  auto device = open_device(kMiB, kMiB);
  CHECK(device->host_memory().name() == "host");
  DeviceBuffer pinned = take_host(*device, 512 * kKiB);
  CHECK(reinterpret_cast<std::uintptr_t>(pinned.data()) % 4096 == 0);
  cudaPointerAttributes attributes{};
  REQUIRE(cudaPointerGetAttributes(&attributes, pinned.data()) == cudaSuccess);
  CHECK(attributes.type == cudaMemoryTypeHost);
  CHECK(device->host_memory().usage().current_bytes == 512 * kKiB);
  auto refused = device->allocate_host(768 * kKiB, "more staging");
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == ErrorCode::kOutOfMemory);
  CHECK(refused.status().message().find("out of memory on the host tier: 768 KiB for more staging") !=
        std::string::npos);
  CHECK(device->memory().usage().current_bytes == 0);  // the device tier is not involved
  pinned = DeviceBuffer();
  CHECK(device->host_memory().usage().current_bytes == 0);
  require_ok(device->synchronize());  // cudaFreeHost succeeded
}

TEST_CASE("cuda device: copies round-trip on every stream, and zero clears device memory") {
  auto device = open_device(16 * kMiB);
  constexpr std::size_t kBytes = 3 * kMiB + 12;  // not a multiple of anything
  DeviceBuffer source = take_host(*device, kBytes);
  DeviceBuffer landed = take_host(*device, kBytes);
  DeviceBuffer echoed = take_host(*device, kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) bytes_of(source)[i] = static_cast<char>(i * 7 + 3);
  DeviceBuffer first = take(*device, kBytes, "first");
  DeviceBuffer second = take(*device, kBytes, "second");
  std::vector<void*> handles;
  for (StreamRole role :
       {StreamRole::kCompute, StreamRole::kHostToDevice, StreamRole::kDeviceToHost, StreamRole::kCollective}) {
    Stream& stream = device->stream(role);
    CHECK(stream.role() == role);
    REQUIRE(stream.native_handle() != nullptr);
    handles.push_back(stream.native_handle());
    std::memset(landed.data(), 0, kBytes);
    std::memset(echoed.data(), 0, kBytes);
    device->copy(first.data(), source.data(), kBytes, CopyKind::kHostToDevice, stream);
    device->copy(second.data(), first.data(), kBytes, CopyKind::kDeviceToDevice, stream);
    device->copy(landed.data(), second.data(), kBytes, CopyKind::kDeviceToHost, stream);
    device->copy(echoed.data(), landed.data(), kBytes, CopyKind::kHostToHost, stream);
    require_ok(stream.synchronize());
    CHECK(std::memcmp(landed.data(), source.data(), kBytes) == 0);
    CHECK(std::memcmp(echoed.data(), source.data(), kBytes) == 0);

    device->zero(second.data(), kBytes, stream);
    device->copy(landed.data(), second.data(), kBytes, CopyKind::kDeviceToHost, stream);
    require_ok(stream.synchronize());
    CHECK(std::all_of(bytes_of(landed), bytes_of(landed) + kBytes, [](char byte) { return byte == 0; }));
  }
  std::sort(handles.begin(), handles.end());
  CHECK(std::adjacent_find(handles.begin(), handles.end()) == handles.end());  // one stream per role
  require_ok(device->synchronize());
}

TEST_CASE("cuda device: an event orders a host-to-device copy before a compute-stream kernel") {
  auto device = open_device(256 * kMiB);
  constexpr std::int64_t kCount = std::int64_t{16} << 20;  // 64 MiB of fp32: the copy takes a while
  const auto bytes = static_cast<std::size_t>(kCount) * sizeof(float);
  DeviceBuffer source = take_host(*device, bytes);
  auto* values = static_cast<float*>(source.data());
  for (std::int64_t i = 0; i < kCount; ++i) values[i] = static_cast<float>(i % 4093) * 0.37f - 700.0f;
  DeviceBuffer staged = take(*device, bytes, "staged");
  DeviceBuffer converted = take(*device, bytes / 2, "converted");
  DeviceBuffer result = take_host(*device, bytes / 2);
  // Poison the destination, so that a kernel reading it before the copy lands is caught.
  REQUIRE(cudaMemset(staged.data(), 0xFF, bytes) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);

  Stream& h2d = device->stream(StreamRole::kHostToDevice);
  Stream& compute = device->stream(StreamRole::kCompute);
  auto staged_ready = device->create_event();
  CHECK(staged_ready->query());  // never recorded: nothing to wait for
  // Hold the transfer stream back a little, so that without the wait the kernel would run first.
  h2d.enqueue([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return Status::ok();
  });
  device->copy(staged.data(), source.data(), bytes, CopyKind::kHostToDevice, h2d);
  h2d.record(*staged_ready);
  compute.wait(*staged_ready);
  const Tensor from(staged.data(), DType::kF32, Shape{kCount}, device.get());
  const Tensor to(converted.data(), DType::kBF16, Shape{kCount}, device.get());
  device->ops().copy(to, from);  // the fp32 -> bf16 conversion kernel, on the compute stream
  device->copy(result.data(), converted.data(), bytes / 2, CopyKind::kDeviceToHost, compute);
  require_ok(compute.synchronize());
  require_ok(staged_ready->synchronize());
  CHECK(staged_ready->query());

  std::vector<std::uint16_t> expected(static_cast<std::size_t>(kCount));
  zinf::kernels::cpu::f32_to_bf16(values, expected.data(), expected.size());
  CHECK(std::memcmp(result.data(), expected.data(), bytes / 2) == 0);
  require_ok(device->synchronize());
}

TEST_CASE("cuda device: host work runs in stream order and its first error is reported by synchronize, once") {
  auto device = open_device(16 * kMiB);
  constexpr std::size_t kCount = 1 << 20;
  DeviceBuffer source = take_host(*device, kCount * sizeof(float));
  DeviceBuffer landed = take_host(*device, kCount * sizeof(float));
  auto* values = static_cast<float*>(source.data());
  for (std::size_t i = 0; i < kCount; ++i) values[i] = static_cast<float>(i);
  std::memset(landed.data(), 0, kCount * sizeof(float));
  DeviceBuffer staged = take(*device, kCount * sizeof(float), "staged");

  Stream& d2h = device->stream(StreamRole::kDeviceToHost);
  std::vector<float> seen;
  int ran = 0;
  device->copy(staged.data(), source.data(), kCount * sizeof(float), CopyKind::kHostToDevice, d2h);
  device->copy(landed.data(), staged.data(), kCount * sizeof(float), CopyKind::kDeviceToHost, d2h);
  // Runs only once the copies before it are done, so it sees their result.
  d2h.enqueue([&] {
    const auto* begin = static_cast<const float*>(landed.data());
    seen.assign(begin, begin + kCount);
    ++ran;
    return Status::ok();
  });
  d2h.enqueue([&] {
    ++ran;
    return Status::io_error("first");
  });
  d2h.enqueue([&] {
    ++ran;
    return Status::io_error("second");
  });
  const Status status = d2h.synchronize();
  CHECK(ran == 3);  // later work still runs, in order
  CHECK(status.code() == ErrorCode::kIoError);
  CHECK(status.message() == "first");
  CHECK(d2h.synchronize().is_ok());  // reported once
  REQUIRE(seen.size() == kCount);
  for (std::size_t i = 0; i < kCount; i += 4099) CHECK(seen[i] == static_cast<float>(i));

  // The device's synchronize() reports any stream's error.
  device->stream(StreamRole::kCollective).enqueue([] { return Status::internal("from the collective stream"); });
  const Status from_device = device->synchronize();
  CHECK(from_device.message() == "from the collective stream");
  CHECK(device->synchronize().is_ok());
}

TEST_CASE("cuda device: a launch that fails is reported by synchronize with the launcher's name and place") {
  auto device = open_device(16 * kMiB);
  DeviceBuffer block = take(*device, 4096, "never touched");
  auto& compute = static_cast<CudaStream&>(device->stream(StreamRole::kCompute));
  // More than 2^31 - 1 blocks of 32 columns: the launcher refuses the grid without launching, so
  // no memory is touched and the CUDA context stays healthy.
  const std::int64_t columns = (std::int64_t{1} << 31) * 32 + 32;
  const int launched =
      zinf::kernels::cuda::matmul_bias_backward(zinf::kernels::cuda::Elem::kF32, static_cast<float*>(block.data()),
                                                block.data(), columns, 1, columns, compute.native_handle());
  compute.report_error(ZINF_CUDA_LAUNCH_STATUS("matmul_bias_backward", launched));
  const int line = __LINE__ - 1;
  CHECK(compute.has_error());
  const Status status = device->synchronize();
  CHECK(status.code() == ErrorCode::kInternal);
  CHECK(status.message() == "matmul_bias_backward launch failed at tests/cuda/cuda_device_test.cpp:" +
                                std::to_string(line) + ": invalid argument (cudaErrorInvalidValue)");
  CHECK(device->synchronize().is_ok());  // reported once

  // The CUDA runtime form names the call as written.
  const Status runtime = ZINF_CUDA_STATUS(cudaErrorMemoryAllocation);
  CHECK(runtime.code() == ErrorCode::kOutOfMemory);
  CHECK(runtime.message().rfind("cudaErrorMemoryAllocation failed at tests/cuda/cuda_device_test.cpp:", 0) == 0);
  CHECK(runtime.message().find("(cudaErrorMemoryAllocation)") != std::string::npos);
}

}  // namespace
