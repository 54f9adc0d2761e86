// The few types every CUDA kernel declaration in kernels/<op>.h shares, kept free of CUDA headers so
// that the declarations compile in any translation unit (and in builds without CUDA, where the
// definitions are simply absent).
//
// - Elem: the element type of an activation or parameter array. Arithmetic is always fp32 (and
//   reductions fp32 or fp64, as each kernel says); Elem is the storage format.
// - Stream: a cudaStream_t passed as void*; nullptr means the legacy default stream.
// - LaunchStatus: the cudaError_t value a launcher returns: 0 (cudaSuccess) when every kernel it
//   launched was accepted (cudaGetLastError after each launch), or the first error otherwise; an
//   argument the kernel cannot handle returns cudaErrorInvalidValue (1) without launching. The
//   caller turns a non-zero value into a Status naming the launcher (device/cuda_check.h).
//   Launches are asynchronous: a fault inside a kernel surfaces at the next synchronisation.
//
// Pointers passed to a cuda:: kernel are device memory unless the declaration says otherwise.
// Scratch: a kernel that needs temporary device memory declares a <name>_scratch_bytes() function
// and takes `scratch`/`scratch_bytes` (at least that many bytes, 256-byte aligned, contents
// unspecified, not touched by anything else until the stream has passed the launch).
#pragma once

#include <cstddef>
#include <cstdint>

namespace zinf::kernels::cuda {

enum class Elem { kF32, kBF16, kF16 };

using Stream = void*;
using LaunchStatus = int;

}  // namespace zinf::kernels::cuda
