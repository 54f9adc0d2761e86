// The one way the CUDA backend turns a failed CUDA runtime call, cuBLAS/cuBLASLt call or kernel
// launch into a Status (docs/architecture.md §8): the call as written, where it was made (path from the repository
// root and line) and the library's own description and name of the error:
//   cudaMalloc(&block, bytes) failed at libengine/device/cuda_device.cpp:123: out of memory
//   (cudaErrorMemoryAllocation)
//   cublasLtMatmul failed at kernels/cuda/matmul.cu:210: the requested functionality is not
//   supported (CUBLAS_STATUS_NOT_SUPPORTED)
//   layernorm_forward launch failed at libengine/device/cuda_ops.cpp:301: invalid argument
//   (cudaErrorInvalidValue)
// An out-of-memory error of the library (cudaErrorMemoryAllocation, CUBLAS_STATUS_ALLOC_FAILED)
// becomes ErrorCode::kOutOfMemory, every other one ErrorCode::kInternal.
//
// Error codes travel as int (cudaError_t, cublasStatus_t, kernels::cuda::LaunchStatus), so this
// header needs no CUDA header; the translation units that expand the macros include the CUDA headers
// for the calls themselves. Only built when the CUDA backend is on.
// What it is not: a place that decides what to do about an error (callers return it, or keep it as
// the first error of a stream, device/cuda_device.h).
#pragma once

#include <string>
#include <string_view>

#include "libengine/core/status.h"

namespace zinf::device {

// "libengine/device/cuda_device.cpp:123": `file` (a __FILE__) relative to the repository root when
// it lies inside it, as given otherwise.
std::string source_location(const char* file, int line);

// Ok when `error` is 0 (cudaSuccess); otherwise the Status described above. Also clears the CUDA
// runtime's per-thread last error (cudaGetLastError) so that an error handled here is not reported
// a second time by the next kernel launcher's cudaGetLastError check. Thread-safe.
Status cuda_status(int error, std::string_view call, const char* file, int line);
// Ok when `status` is 0 (CUBLAS_STATUS_SUCCESS); otherwise the Status described above.
Status cublas_status(int status, std::string_view call, const char* file, int line);
// Ok when `status` (a kernels::cuda::LaunchStatus) is 0; otherwise "<launcher> launch failed at ...".
// Clears the last error as cuda_status() does.
Status launch_status(int status, std::string_view launcher, const char* file, int line);

}  // namespace zinf::device

// The Status of a CUDA runtime call, written where the call is made: ZINF_CUDA_STATUS(cudaFree(p)).
#define ZINF_CUDA_STATUS(call) ::zinf::device::cuda_status(static_cast<int>(call), #call, __FILE__, __LINE__)
// Returns the Status of a failed CUDA runtime call from the enclosing function (Status or Result<T>).
#define ZINF_CUDA_RETURN_IF_ERROR(call) ZINF_RETURN_IF_ERROR(ZINF_CUDA_STATUS(call))
// The same for cuBLAS and cuBLASLt calls (cublasStatus_t).
#define ZINF_CUBLAS_STATUS(call) ::zinf::device::cublas_status(static_cast<int>(call), #call, __FILE__, __LINE__)
#define ZINF_CUBLAS_RETURN_IF_ERROR(call) ZINF_RETURN_IF_ERROR(ZINF_CUBLAS_STATUS(call))
// The Status of a kernels::cuda launcher's LaunchStatus, naming the launcher:
// ZINF_CUDA_LAUNCH_STATUS("gelu_forward", kernels::cuda::gelu_forward(...)).
#define ZINF_CUDA_LAUNCH_STATUS(launcher, status) \
  ::zinf::device::launch_status(static_cast<int>(status), launcher, __FILE__, __LINE__)
