// CpuDevice: the CPU backend of Device. "Device memory" is host memory with a hard byte budget
// (the scenario's device_memory), so a model that does not fit fails exactly as on a GPU.
// The compute stream runs work inline on the calling thread (the kernels are OpenMP-parallel
// themselves); the transfer and collective streams each own one worker thread, so copies really
// overlap compute. Copies are real memcpy's, since host→device on this backend is host→host.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "libengine/device/device.h"

namespace zinf::device {

struct CpuDeviceOptions {
  std::uint64_t memory_budget_bytes = 0;       // 0: unbounded (still counted)
  std::uint64_t host_memory_budget_bytes = 0;  // of allocate_host(); 0: unbounded (still counted)
};

std::unique_ptr<Device> make_cpu_device(const CpuDeviceOptions& options);

}  // namespace zinf::device
