// CudaDevice: the CUDA backend of Device (device/device.h), one GPU.
//
// - Device memory is a budgeted pool: at creation one arena is reserved with cudaMalloc (the
//   budget, or — with no budget — the free memory minus a reserve for the CUDA context, cuBLAS and
//   kernel code) and every allocate() is a 256-byte-aligned block of it (best fit, neighbours
//   coalesced on free). Bytes are counted exactly on the "device" MemoryTier, so running out of
//   budget reads as on every other backend; the arena holds a little more than the tier's capacity
//   (up to 64 MiB), so that the blocks' rounding to 256 bytes does not make buffers that fit the
//   budget fail. A request that fits the budget but no free block (fragmentation) fails with
//   OutOfMemory naming the largest free block. No managed memory, no cudaMalloc per tensor, and
//   allocate() does not zero the memory (unlike the CPU backend).
// - allocate_host() is page-locked memory (cudaHostAlloc, portable) counted on a "host" tier.
// - One cudaStream_t (non-blocking) per StreamRole; events are cudaEvent_t without timing.
// - Errors of asynchronous work (copies, memsets, kernel launches, host work) are kept per stream
//   as that stream's first error and returned by its next synchronize() (and by the device's).
// - NVTX ranges for push_range()/pop_range(); every copy() is wrapped in one ("H2D 12.0 MiB").
// The CudaOps (device/cuda_ops.h) of the device run on its compute stream.
// Only built when the CUDA backend is on (ZINF_CUDA_ENABLED); device/device_factory.h is the
// backend-neutral way to make one. This header includes no CUDA header.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "libengine/core/status.h"
#include "libengine/device/device.h"

struct CUstream_st;  // what cudaStream_t points to

namespace zinf::device {

struct CudaDeviceOptions {
  int device_index = 0;                        // cuda:<index> among the visible devices
  std::uint64_t memory_budget_bytes = 0;       // 0: the free memory minus a reserve (see make_cuda_device)
  std::uint64_t host_memory_budget_bytes = 0;  // of allocate_host(); 0: unbounded (still counted)
};

// Opens cuda:<device_index> and reserves its device-memory pool. Fails (nothing kept) with
//   NotFound "device: cuda requested but no CUDA device is usable (cudaGetDeviceCount: ...)",
//   NotFound "device: cuda:1 does not exist (1 CUDA device visible)",
//   Infeasible "device_memory: 90.0 GiB does not fit in the 78.6 GiB free on cuda:0 ..." when the
//     budget plus a 256 MiB reserve (context, kernel code, cuBLAS) and the pool's rounding room
//     exceeds the free memory,
//   or the CUDA/cuBLAS error that stopped it. With no budget, the pool is the free memory minus
//   max(1 GiB, 5% of the GPU's memory), and the device tier's capacity is that pool's size less its
//   rounding room.
// The returned device is driven as device.h says; every call sets the device current on the
// calling thread first (cudaSetDevice), so any thread may use it. Buffers from it must be released
// before it is destroyed (their memory goes with the pool; releasing one later is harmless).
Result<std::unique_ptr<Device>> make_cuda_device(const CudaDeviceOptions& options);

// The first error reported by asynchronous work, kept until someone takes it. Thread-safe (host
// work reports from CUDA's callback thread).
class ErrorSlot {
 public:
  // Keeps `status` when it is an error and none is kept yet.
  void report(Status status);
  bool has_error() const;
  // The kept error (ok when none), cleared.
  Status take();

 private:
  mutable std::mutex mutex_;
  Status first_;
};

// The CUDA stream behind one StreamRole of a CudaDevice: Stream's contract, plus the error slot
// CudaDevice and CudaOps report the failures of asynchronous work to. Public so that CudaOps and
// tests can reach it (static_cast from device.stream(role) of a CUDA device).
class CudaStream final : public Stream {
 public:
  // Creates a non-blocking cudaStream_t on `device_index`.
  static Result<std::unique_ptr<CudaStream>> create(StreamRole role, int device_index);
  // Waits for the stream's work (host work included), then destroys the cudaStream_t.
  ~CudaStream() override;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  StreamRole role() const override { return role_; }
  // Runs `work` on CUDA's host-callback thread once everything enqueued before it has finished
  // (cudaLaunchHostFunc); later work on the stream waits for it. `work` — and everything it owns,
  // which is destroyed on that thread too — must not call CUDA (no launches, copies, cudaFreeHost:
  // CUDA forbids it in host callbacks and may deadlock). Its error becomes the stream's first error.
  void enqueue(std::function<Status()> work) override;
  // cudaEventRecord / cudaStreamWaitEvent. `event` must come from a CudaDevice's create_event().
  void record(Event& event) override;
  void wait(Event& event) override;
  // cudaStreamSynchronize; returns this stream's first error since the last synchronize() (an
  // asynchronous failure reported earlier wins over the synchronisation's own error) and clears it.
  Status synchronize() override;
  void* native_handle() override { return handle_; }

  CUstream_st* handle() const { return handle_; }
  int device_index() const { return device_index_; }
  // Keeps `status` (when an error) as this stream's first error, for the next synchronize().
  void report_error(Status status) { errors_.report(std::move(status)); }
  bool has_error() const { return errors_.has_error(); }
  // synchronize() adds the time it blocked to `counter` from now on (the device's collective-wait
  // counter, Device::collective_wait_seconds); set once, before the stream is used.
  void count_waits_in(std::atomic<std::int64_t>* counter) { wait_counter_ = counter; }

 private:
  CudaStream(StreamRole role, int device_index, CUstream_st* handle)
      : role_(role), device_index_(device_index), handle_(handle) {}

  StreamRole role_;
  int device_index_;
  CUstream_st* handle_;
  ErrorSlot errors_;
  std::atomic<std::int64_t>* wait_counter_ = nullptr;
};

}  // namespace zinf::device
