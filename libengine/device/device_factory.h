// make_device: the one backend-neutral way to open a Device — the CPU backend always, the CUDA
// backend when this zinf was built with it (ZINF_WITH_CUDA) — so that callers (the trainer, the
// CLI, tests) never include a backend's header or test a build flag themselves.
// What it is not: a registry of devices already open, or a chooser (the caller names the kind).
#pragma once

#include <cstdint>
#include <memory>

#include "libengine/core/status.h"
#include "libengine/device/device.h"

namespace zinf::device {

struct DeviceOptions {
  DeviceKind kind = DeviceKind::kCpu;
  std::uint64_t memory_budget_bytes = 0;       // device memory; 0: the backend's default (see below)
  std::uint64_t host_memory_budget_bytes = 0;  // allocate_host(); 0: unbounded (still counted)
  int cuda_device_index = 0;                   // cuda:<index>; ignored for the CPU backend
  bool copy_threads = true;                    // CPU backend: CpuDeviceOptions::copy_threads
};

// A device of `options.kind`. CPU: never fails; a budget of 0 counts without limit. CUDA: as
// make_cuda_device (device/cuda_device.h) — a budget of 0 takes the GPU's free memory less a
// reserve; fails when no GPU is usable, the index does not exist or the budget does not fit. In a
// build without CUDA, asking for CUDA fails with InvalidArgument saying so and how to get it.
// Thread-safe (each call opens its own device).
Result<std::unique_ptr<Device>> make_device(const DeviceOptions& options);

}  // namespace zinf::device
