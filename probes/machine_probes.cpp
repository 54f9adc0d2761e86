#include "probes/machine_probes.h"

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/adam.h"
#include "kernels/matmul.h"
#include "kernels/threads.h"
#include "libengine/core/check.h"
#include "libengine/device/device.h"
#include "libengine/device/device_factory.h"

namespace zinf::probes {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Runs body(begin, end) over [0, n) split into compute_threads() contiguous parts, one thread each.
template <typename Body>
void split(std::size_t n, Body body) {
  const auto threads = static_cast<std::size_t>(std::max(1, kernels::cpu::compute_threads()));
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) {
    const std::size_t begin = n * t / threads, end = n * (t + 1) / threads;
    pool.emplace_back([&body, begin, end] { body(begin, end); });
  }
  for (std::thread& th : pool) th.join();
}

}  // namespace

struct MachineProbes::Buffers {
  std::vector<float> a, b, c;              // triad / memcpy
  std::vector<float> p, g, m, v;           // Adam
  std::vector<float> ma, mb, mc;           // sgemm baseline
  std::unique_ptr<device::Device> device;  // CPU device for zinf's matmul
  std::vector<device::OwnedTensor> tensors;
};

MachineProbes::MachineProbes(MachineProbeSizes sizes) : sizes_(sizes) {
  ZINF_CHECK(sizes_.stream_elements > 0 && sizes_.adam_elements > 0 && sizes_.matmul_size > 0,
             "every machine probe size must be positive");
}
MachineProbes::~MachineProbes() = default;

Result<ProbeSample> MachineProbes::memory_bandwidth() {
  if (!buffers_) buffers_ = std::make_unique<Buffers>();
  Buffers& buf = *buffers_;
  const std::size_t stream_n = sizes_.stream_elements;
  if (buf.a.empty()) {
    buf.a.assign(stream_n, 0.0f);
    buf.b.assign(stream_n, 1.0f);
    buf.c.assign(stream_n, 2.0f);
  }
  float* a = buf.a.data();
  const float* b = buf.b.data();
  const float* c = buf.c.data();
  const Clock::time_point t0 = Clock::now();
  split(stream_n, [=](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) a[i] = b[i] + 3.0f * c[i];
  });
  const double triad_s = seconds_since(t0);
  const Clock::time_point t1 = Clock::now();
  split(stream_n,
        [=](std::size_t begin, std::size_t end) { std::memcpy(a + begin, b + begin, (end - begin) * sizeof(float)); });
  const double copy_s = seconds_since(t1);
  const double bytes = static_cast<double>(stream_n * sizeof(float));
  return ProbeSample{3.0 * bytes / triad_s / 1e9, 2.0 * bytes / copy_s / 1e9};
}

Result<ProbeSample> MachineProbes::matmul_fp32() {
  if (!buffers_) buffers_ = std::make_unique<Buffers>();
  Buffers& buf = *buffers_;
  const int n = sizes_.matmul_size;
  const std::size_t elements = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  if (buf.ma.empty()) {
    buf.ma.resize(elements);
    buf.mb.resize(elements);
    buf.mc.resize(elements);
    for (std::size_t i = 0; i < elements; ++i) {
      buf.ma[i] = static_cast<float>(i % 13) * 0.01f;
      buf.mb[i] = static_cast<float>(i % 7) * 0.02f;
    }
    ZINF_ASSIGN_OR_RETURN(buf.device, device::make_device(device::DeviceOptions{}));
    for (const char* what : {"suite matmul a", "suite matmul b", "suite matmul c"}) {
      ZINF_ASSIGN_OR_RETURN(device::OwnedTensor t,
                            device::allocate_tensor(*buf.device, DType::kF32, Shape{n, n}, what));
      buf.device->ops().zero(t.tensor);
      buf.tensors.push_back(std::move(t));
    }
    std::memcpy(buf.tensors[0].tensor.data(), buf.ma.data(), elements * sizeof(float));
    std::memcpy(buf.tensors[1].tensor.data(), buf.mb.data(), elements * sizeof(float));
  }
  const double flops = 2.0 * n * static_cast<double>(n) * n;
  device::Ops& ops = buf.device->ops();
  ZINF_RETURN_IF_ERROR(buf.device->synchronize());
  const Clock::time_point t0 = Clock::now();
  ops.matmul_forward(buf.tensors[2].tensor, 0, buf.tensors[0].tensor, buf.tensors[1].tensor, nullptr);
  ZINF_RETURN_IF_ERROR(buf.device->synchronize());
  const double zinf_s = seconds_since(t0);
  const Clock::time_point t1 = Clock::now();
  kernels::cpu::matmul_forward(buf.mc.data(), buf.ma.data(), buf.mb.data(), nullptr, n, n, n);
  const double blas_s = seconds_since(t1);
  return ProbeSample{flops / zinf_s / 1e9, flops / blas_s / 1e9};
}

Result<ProbeSample> MachineProbes::cpu_adam() {
  if (!buffers_) buffers_ = std::make_unique<Buffers>();
  Buffers& buf = *buffers_;
  const std::size_t adam_n = sizes_.adam_elements;
  if (buf.p.empty()) {
    buf.p.assign(adam_n, 0.5f);
    buf.g.assign(adam_n, 0.01f);
    buf.m.assign(adam_n, 0.0f);
    buf.v.assign(adam_n, 0.0f);
  }
  kernels::AdamHyper hyper;
  kernels::AdamSlice slice;
  slice.param = buf.p.data();
  slice.exp_avg = buf.m.data();
  slice.exp_avg_sq = buf.v.data();
  slice.n = adam_n;
  const Clock::time_point t0 = Clock::now();
  kernels::cpu::adam_step(hyper, slice, buf.g.data());
  const double adam_s = seconds_since(t0);
  ZINF_ASSIGN_OR_RETURN(const ProbeSample memory, memory_bandwidth());
  // Adam reads param, grad, m, v and writes param, m, v: 7 fp32 per element.
  return ProbeSample{7.0 * 4.0 * static_cast<double>(adam_n) / adam_s / 1e9, memory.zinf};
}

}  // namespace zinf::probes
