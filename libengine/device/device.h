// Device, Stream, Event: where compute runs and how work on it is ordered — the one interface the
// CPU backend (device/cpu_device) and the CUDA backend implement, so the engine above never branches
// on the backend.
//
// - A Device owns a budgeted memory tier ("device memory") and hands out DeviceBuffers from it.
//   On the CPU backend device memory is a host arena with a hard byte budget, so the memory wall is
//   real without a GPU.
// - A Stream runs the work enqueued on it in order; different streams may run concurrently. Each
//   device has one stream per role (compute, host→device, device→host, collectives), the split
//   that lets transfers overlap compute. Short, latency-bound work may instead run at once on the
//   calling thread while its stream is idle (Stream::run_if_idle, enqueue_latency_bound): still in
//   stream order, since nothing is ahead of it.
// - An Event marks a point in a stream: record() on one stream, wait() on another orders them;
//   synchronize() blocks the host until the point is reached.
//
// Thread-safety: allocate() and the tier are thread-safe; a Stream is driven by one host thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "libengine/core/function_ref.h"
#include "libengine/core/status.h"
#include "libengine/device/device_kind.h"
#include "libengine/device/ops.h"
#include "libengine/memory/memory_tier.h"
#include "libengine/tensor/tensor.h"

namespace zinf::device {

enum class StreamRole { kCompute, kHostToDevice, kDeviceToHost, kCollective };
inline constexpr int kStreamRoleCount = 4;

class Event {
 public:
  virtual ~Event() = default;
  // Blocks the calling host thread until every piece of work enqueued before the last record()
  // has finished. Returns at once (ok) when never recorded. Reports the backend's error when the
  // wait itself fails (CUDA: a failed kernel before the event surfaces here); the error is also
  // kept for the device's synchronize(). On the CPU backend the wait cannot fail.
  virtual Status synchronize() = 0;
  // True when synchronize() would not block.
  virtual bool query() = 0;
};

class Stream {
 public:
  virtual ~Stream() = default;
  virtual StreamRole role() const = 0;
  // Host work run in stream order (the CPU backend's copies and kernels; on CUDA a host callback).
  // `work` must not throw. Errors it finds are reported through the Status of synchronize().
  virtual void enqueue(std::function<Status()> work) = 0;
  // Runs `work` at once on the calling thread when this stream is idle — nothing enqueued on it
  // before is still queued or running, so running it now keeps stream order — and returns true;
  // otherwise returns false without running it (the caller then enqueue()s it; see
  // enqueue_latency_bound below). Meant for short, latency-bound work (a small collective, a timing
  // mark) for which the hand-off to the stream's thread costs more than the work: the calling thread
  // runs it and returns only once it has finished (a collective: once its peers reached it). Work
  // enqueued by another thread meanwhile, and the stream's events and synchronize(), wait for it as
  // for queued work; an error it returns is reported by synchronize() as for enqueued work. `work`
  // must not throw. Backends whose streams are not host threads (CUDA) never run it: false.
  virtual bool run_if_idle(FunctionRef<Status()> work) {
    (void)work;
    return false;
  }
  // Marks the current end of this stream in `event`.
  virtual void record(Event& event) = 0;
  // Work enqueued on this stream after this call starts only once `event` has been reached.
  virtual void wait(Event& event) = 0;
  // Blocks until everything enqueued so far has finished; returns the first error any of it
  // reported since the last synchronize() (and clears it).
  virtual Status synchronize() = 0;
  // The backend's handle (cudaStream_t on CUDA; nullptr on the CPU backend).
  virtual void* native_handle() { return nullptr; }
};

// enqueue(), except that an idle stream runs `work` at once on the calling thread
// (Stream::run_if_idle): only for short, latency-bound work.
template <typename Work>
void enqueue_latency_bound(Stream& stream, Work&& work) {
  if (!stream.run_if_idle(work)) stream.enqueue(std::forward<Work>(work));
}

// An owned block of device memory whose bytes are counted on the device's tier; returns them on
// destruction. Movable, not copyable.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(void* data, std::size_t bytes, std::function<void(void*, std::size_t)> free_fn)
      : data_(data), bytes_(bytes), free_fn_(std::move(free_fn)) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  bool empty() const { return data_ == nullptr; }

 private:
  void reset();
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  std::function<void(void*, std::size_t)> free_fn_;
};

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice, kHostToHost };

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceKind kind() const = 0;
  // "cpu (2.00 GiB budget)", "cuda:0 NVIDIA H100 80GB HBM3 (79.1 GiB)".
  virtual std::string describe() const = 0;

  // The device-memory tier: budget, current and peak bytes.
  virtual memory::MemoryTier& memory() = 0;

  // Device memory of `bytes` (64-byte aligned at least; zero-filled on the CPU backend), counted on
  // memory(). Fails with OutOfMemory naming `what`, the request and the budget.
  virtual Result<DeviceBuffer> allocate(std::size_t bytes, std::string_view what) = 0;

  // The device's stream for `role`. Streams live as long as the device.
  virtual Stream& stream(StreamRole role) = 0;
  virtual std::unique_ptr<Event> create_event() = 0;

  // The host-memory tier this device stages through (the CPU tier of ZeRO-Infinity): its own budget,
  // current and peak bytes.
  virtual memory::MemoryTier& host_memory() = 0;
  // Host memory of `bytes` (4096-byte aligned), counted on host_memory(): page-locked
  // (cudaHostAlloc) on CUDA, so copies to and from the device run asynchronously at full link
  // speed; ordinary host memory on the CPU backend. Fails with OutOfMemory naming `what`.
  virtual Result<DeviceBuffer> allocate_host(std::size_t bytes, std::string_view what) = 0;
  // Copies `bytes` from src to dst in order on `stream` (asynchronous: the memory must stay valid
  // until the stream has passed this point).
  virtual void copy(void* dst, const void* src, std::size_t bytes, CopyKind kind, Stream& stream) = 0;
  // Sets `bytes` at dst to zero in order on `stream`.
  virtual void zero(void* dst, std::size_t bytes, Stream& stream) = 0;

  // Waits for every stream; the first error any reported.
  virtual Status synchronize() = 0;

  // Stream-ordered free: `buffer` is returned to its tier only once `stream` has passed every piece
  // of work enqueued on it before this call (a kernel or copy that still reads or writes it), never
  // at once. Use it for any buffer that work in flight may touch. Thread-safe. The bytes stay
  // counted on the tier until then; allocate()/allocate_host() reclaim finished frees first and,
  // before failing with OutOfMemory, wait for the pending ones and try again.
  void release_after(DeviceBuffer buffer, Stream& stream);
  // Returns every pending stream-ordered free whose stream point is reached (all of them, waiting,
  // when `wait` is true). Returns how many buffers were freed. Thread-safe.
  std::size_t reclaim_released(bool wait);
  // Buffers waiting for their stream point.
  std::size_t pending_releases() const;

  // The compute operations of this backend (device/ops.h), running on the compute stream over
  // tensors in this device's memory. Lives as long as the device.
  virtual Ops& ops() = 0;
  // Profiler ranges around phases of work (forward, backward, optimizer, transfers), so a timeline
  // (Nsight Systems) reads well: NVTX on CUDA, nothing on the CPU backend. Nested ranges must be
  // popped in reverse order by the thread that pushed them; see ProfilerRange below.
  virtual void push_range(const char* name) { (void)name; }
  virtual void pop_range() {}

  // Seconds host threads spent blocked until the collective stream reached a point: synchronize()
  // of that stream (and of the device), events it recorded waited for by the compute stream or
  // synchronized on the host, and the time a host thread ran the collective stream's work itself
  // (Stream::run_if_idle: a small collective). On the CPU backend the compute stream runs on the calling thread, so
  // this is the time compute waited for collectives (and for what the collective stream itself
  // waits for first: the copies a gather follows). On CUDA the compute stream's waits happen on the
  // GPU and are not seen; only the host's blocking synchronize() of the collective stream counts.
  // Cumulative since the device was created; thread-safe.
  double collective_wait_seconds() const { return static_cast<double>(collective_wait_ns_.load()) * 1e-9; }

 protected:
  // For backends: allocate `bytes` with `try_allocate`, and when it fails with OutOfMemory while
  // stream-ordered frees are pending, wait for them and try once more.
  template <typename TryAllocate>
  Result<DeviceBuffer> allocate_reclaiming(TryAllocate&& try_allocate) {
    reclaim_released(false);
    Result<DeviceBuffer> first = try_allocate();
    if (first.is_ok() || first.status().code() != ErrorCode::kOutOfMemory || pending_releases() == 0) return first;
    reclaim_released(true);
    return try_allocate();
  }

  // For backends: `blocked_ns` of host waiting for the collective stream (collective_wait_seconds()).
  void add_collective_wait(std::int64_t blocked_ns) { collective_wait_ns_.fetch_add(blocked_ns); }
  std::atomic<std::int64_t>& collective_wait_counter() { return collective_wait_ns_; }

 private:
  struct PendingRelease {
    std::unique_ptr<Event> reached;
    DeviceBuffer buffer;
  };
  mutable std::mutex release_mutex_;
  std::vector<PendingRelease> pending_;  // in release order
  std::atomic<std::int64_t> collective_wait_ns_{0};
};

// A profiler range for the length of a scope.
class ProfilerRange {
 public:
  ProfilerRange(Device& device, const char* name) : device_(device) { device_.push_range(name); }
  ~ProfilerRange() { device_.pop_range(); }
  ProfilerRange(const ProfilerRange&) = delete;
  ProfilerRange& operator=(const ProfilerRange&) = delete;

 private:
  Device& device_;
};

// Allocates a buffer and returns a tensor view of it with `dtype` and `shape`.
struct OwnedTensor {
  DeviceBuffer buffer;
  Tensor tensor;
};
Result<OwnedTensor> allocate_tensor(Device& device, DType dtype, Shape shape, std::string_view what);

}  // namespace zinf::device
