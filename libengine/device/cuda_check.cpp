#include "libengine/device/cuda_check.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

namespace zinf::device {
namespace {

// The repository root as this file was compiled: __FILE__ here is
// "<root>/libengine/device/cuda_check.cpp" when the build passes absolute paths (CMake does), so
// the root is what precedes that suffix. Empty when the path is relative or unexpected.
std::string_view repository_root() {
  static constexpr std::string_view kThisFile = __FILE__;
  static constexpr std::string_view kSuffix = "libengine/device/cuda_check.cpp";
  if (kThisFile.size() < kSuffix.size() || kThisFile.substr(kThisFile.size() - kSuffix.size()) != kSuffix) return {};
  return kThisFile.substr(0, kThisFile.size() - kSuffix.size());
}

Status make_status(bool out_of_memory, std::string message) {
  return out_of_memory ? Status::out_of_memory(std::move(message)) : Status::internal(std::move(message));
}

}  // namespace

std::string source_location(const char* file, int line) {
  std::string_view path = file == nullptr ? std::string_view("<unknown>") : std::string_view(file);
  const std::string_view root = repository_root();
  if (!root.empty() && path.substr(0, root.size()) == root) path.remove_prefix(root.size());
  return fmt::format("{}:{}", path, line);
}

Status cuda_status(int error, std::string_view call, const char* file, int line) {
  if (error == 0) return Status::ok();
  // A non-sticky error stays in the runtime's per-thread "last error" until someone reads it; read
  // it here so the next kernel launcher does not mistake it for its own launch failure.
  (void)cudaGetLastError();
  const auto code = static_cast<cudaError_t>(error);
  return make_status(code == cudaErrorMemoryAllocation,
                     fmt::format("{} failed at {}: {} ({})", call, source_location(file, line),
                                 cudaGetErrorString(code), cudaGetErrorName(code)));
}

Status cublas_status(int status, std::string_view call, const char* file, int line) {
  if (status == 0) return Status::ok();
  const auto code = static_cast<cublasStatus_t>(status);
  return make_status(code == CUBLAS_STATUS_ALLOC_FAILED,
                     fmt::format("{} failed at {}: {} ({})", call, source_location(file, line),
                                 cublasLtGetStatusString(code), cublasLtGetStatusName(code)));
}

Status launch_status(int status, std::string_view launcher, const char* file, int line) {
  if (status == 0) return Status::ok();
  (void)cudaGetLastError();
  const auto code = static_cast<cudaError_t>(status);
  return make_status(code == cudaErrorMemoryAllocation,
                     fmt::format("{} launch failed at {}: {} ({})", launcher, source_location(file, line),
                                 cudaGetErrorString(code), cudaGetErrorName(code)));
}

}  // namespace zinf::device
