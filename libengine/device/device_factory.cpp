#include "libengine/device/device_factory.h"

#include "libengine/device/cpu_device.h"

// ZINF_DEVICE_WITH_CUDA is 1 when the CUDA backend is compiled into zinf_device (set by
// libengine/device/CMakeLists.txt from ZINF_CUDA_ENABLED, the same switch as core's
// ZINF_FEATURE_CUDA, whose generated header is private to zinf_core).
#if ZINF_DEVICE_WITH_CUDA
#include "libengine/device/cuda_device.h"
#endif

namespace zinf::device {

Result<std::unique_ptr<Device>> make_device(const DeviceOptions& options) {
  switch (options.kind) {
    case DeviceKind::kCpu:
      return make_cpu_device(CpuDeviceOptions{.memory_budget_bytes = options.memory_budget_bytes,
                                              .host_memory_budget_bytes = options.host_memory_budget_bytes,
                                              .copy_threads = options.copy_threads});
    case DeviceKind::kCuda:
#if ZINF_DEVICE_WITH_CUDA
      return make_cuda_device(CudaDeviceOptions{.device_index = options.cuda_device_index,
                                                .memory_budget_bytes = options.memory_budget_bytes,
                                                .host_memory_budget_bytes = options.host_memory_budget_bytes});
#else
      return Status::invalid_argument(
          "scenario.device: \"cuda\" is not available: this zinf was built without CUDA (configure with "
          "-DZINF_WITH_CUDA=ON where the CUDA toolkit is installed)");
#endif
  }
  return Status::invalid_argument("device: unknown device kind");
}

}  // namespace zinf::device
