// CudaDevice (see cuda_device.h): the device-memory pool, streams, events, copies and the error
// slots that carry asynchronous failures to synchronize().
#include "libengine/device/cuda_device.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "libengine/core/check.h"
#include "libengine/core/units.h"
#include "libengine/device/cuda_check.h"
#include "libengine/device/cuda_ops.h"
#include "libengine/memory/memory_tier.h"

namespace zinf::device {

void ErrorSlot::report(Status status) {
  if (status.is_ok()) return;
  std::lock_guard lock(mutex_);
  if (first_.is_ok()) first_ = std::move(status);
}

bool ErrorSlot::has_error() const {
  std::lock_guard lock(mutex_);
  return !first_.is_ok();
}

Status ErrorSlot::take() {
  std::lock_guard lock(mutex_);
  return std::exchange(first_, Status::ok());
}

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
// Every pool block starts at a multiple of this: cuBLASLt's and vectorised kernels' best alignment.
constexpr std::size_t kBlockAlignment = 256;
// Kept free beside an explicit budget, for what the pool does not hold: the kernels' code (loaded
// lazily, at first launch), cuBLASLt's handle and internal buffers, the CUDA context's growth.
constexpr std::uint64_t kBudgetHeadroomBytes = 256 * kMiB;

std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// The arena's room beyond the tier's capacity. The tier counts the bytes requested, but every block
// takes its request rounded up to kBlockAlignment, so without this room a set of buffers that fits
// the budget exactly (as the CPU backend, and the planner's arithmetic, count it) could be refused
// by the pool and reported as fragmentation. 1/128 of the capacity (at least 64 blocks' rounding,
// at most 64 MiB) covers the rounding of blocks averaging 32 KiB or more; the engine's are MiBs.
std::uint64_t rounding_slack(std::uint64_t capacity_bytes) {
  const std::uint64_t slack = std::clamp<std::uint64_t>(capacity_bytes / 128, 64 * kBlockAlignment, 64 * kMiB);
  return round_up(slack, kBlockAlignment);
}

std::string bytes_text(std::uint64_t bytes) { return format_bytes(static_cast<double>(bytes)); }

// A CUDA event without timing. A null handle (creation failed, already reported) behaves as an
// event never recorded.
class CudaEvent final : public Event {
 public:
  CudaEvent(int device_index, cudaEvent_t handle, std::shared_ptr<ErrorSlot> errors)
      : device_index_(device_index), handle_(handle), errors_(std::move(errors)) {}
  ~CudaEvent() override {
    if (handle_ == nullptr) return;
    (void)cudaSetDevice(device_index_);
    (void)cudaEventDestroy(handle_);  // releases it once reached, if work still has it pending
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  Status synchronize() override {
    if (handle_ == nullptr) return Status::ok();
    Status status = ZINF_CUDA_STATUS(cudaSetDevice(device_index_));
    if (status.is_ok()) status = ZINF_CUDA_STATUS(cudaEventSynchronize(handle_));
    errors_->report(status);
    return status;
  }
  bool query() override {
    if (handle_ == nullptr) return true;
    Status selected = ZINF_CUDA_STATUS(cudaSetDevice(device_index_));
    if (!selected.is_ok()) {
      errors_->report(std::move(selected));
      return true;
    }
    const cudaError_t state = cudaEventQuery(handle_);
    if (state == cudaSuccess) return true;
    if (state == cudaErrorNotReady) {
      // Not an error, but the runtime records it as the thread's last error; clear it so the next
      // kernel launcher's cudaGetLastError() does not take it for a failed launch.
      (void)cudaGetLastError();
      return false;
    }
    errors_->report(cuda_status(state, "cudaEventQuery(event)", __FILE__, __LINE__));
    return true;  // synchronize() would not block: it would fail at once
  }

  cudaEvent_t handle() const { return handle_; }

 private:
  int device_index_;
  cudaEvent_t handle_;
  std::shared_ptr<ErrorSlot> errors_;  // the device's, for errors that belong to no stream
};

// A host closure on its way through cudaLaunchHostFunc; run_host_work owns and deletes it.
struct HostWork {
  std::function<Status()> work;
  CudaStream* stream;
};

void CUDART_CB run_host_work(void* data) {
  std::unique_ptr<HostWork> item(static_cast<HostWork*>(data));
  item->stream->report_error(item->work());
}

}  // namespace

Result<std::unique_ptr<CudaStream>> CudaStream::create(StreamRole role, int device_index) {
  ZINF_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_index));
  cudaStream_t handle = nullptr;
  // Non-blocking: no implicit ordering with the legacy default stream, which libraries or tests
  // may use; streams are ordered only by the events the engine records.
  ZINF_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking));
  return std::unique_ptr<CudaStream>(new CudaStream(role, device_index, handle));
}

CudaStream::~CudaStream() {
  (void)cudaSetDevice(device_index_);
  // Pending host work points at this object; let it finish first.
  (void)cudaStreamSynchronize(handle_);
  (void)cudaStreamDestroy(handle_);
}

void CudaStream::enqueue(std::function<Status()> work) {
  auto item = std::make_unique<HostWork>(HostWork{std::move(work), this});
  Status status = ZINF_CUDA_STATUS(cudaSetDevice(device_index_));
  if (status.is_ok()) status = ZINF_CUDA_STATUS(cudaLaunchHostFunc(handle_, run_host_work, item.get()));
  if (!status.is_ok()) {
    report_error(std::move(status));  // the work never runs; `item` is freed here
    return;
  }
  (void)item.release();  // run_host_work owns it now
}

void CudaStream::record(Event& event) {
  const cudaEvent_t handle = static_cast<CudaEvent&>(event).handle();
  if (handle == nullptr) return;
  Status status = ZINF_CUDA_STATUS(cudaSetDevice(device_index_));
  if (status.is_ok()) status = ZINF_CUDA_STATUS(cudaEventRecord(handle, handle_));
  report_error(std::move(status));
}

void CudaStream::wait(Event& event) {
  const cudaEvent_t handle = static_cast<CudaEvent&>(event).handle();
  if (handle == nullptr) return;
  Status status = ZINF_CUDA_STATUS(cudaSetDevice(device_index_));
  if (status.is_ok()) status = ZINF_CUDA_STATUS(cudaStreamWaitEvent(handle_, handle, 0));
  report_error(std::move(status));
}

Status CudaStream::synchronize() {
  const auto start = std::chrono::steady_clock::now();
  Status synced = ZINF_CUDA_STATUS(cudaSetDevice(device_index_));
  if (synced.is_ok()) synced = ZINF_CUDA_STATUS(cudaStreamSynchronize(handle_));
  if (wait_counter_ != nullptr) {
    wait_counter_->fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  }
  Status first = errors_.take();
  return first.is_ok() ? synced : first;
}

namespace {

// The device-memory pool: a best-fit sub-allocator over one cudaMalloc'd arena, plus the device
// tier that counts the exact bytes requested (its capacity is below the arena's size by the room
// the blocks' rounding needs, see rounding_slack).
//
// Blocks tile the arena without gaps; each is free or taken. `blocks_` holds all of them by offset
// (to find a block's neighbours), `free_` the free ones by (size, offset). take() picks the
// smallest free block that holds the request rounded up to 256 bytes — among equal sizes the lowest
// address — and splits the rest off as a new free block; give_back() frees a block and merges it
// with a free neighbour on either side, so free space never stays cut into adjacent pieces. Both
// are O(log blocks) under one mutex. No CUDA call is made here: give_back() may run on any thread,
// CUDA's callback thread included.
//
// Shared (shared_ptr) by the device and the free functions of its buffers, so a buffer released
// after the device is gone touches bookkeeping that still exists.
class DevicePool {
 public:
  DevicePool(std::uint64_t tier_capacity_bytes, char* arena, std::size_t arena_bytes)
      : tier("device", tier_capacity_bytes), arena_(arena), arena_bytes_(arena_bytes), free_bytes_(arena_bytes) {
    if (arena_bytes != 0) {
      blocks_.emplace(0, Block{arena_bytes, true});
      free_.emplace(arena_bytes, 0);
    }
  }

  memory::MemoryTier tier;

  char* arena() const { return arena_; }
  std::size_t arena_bytes() const { return arena_bytes_; }

  // A block of at least `bytes` (> 0), or OutOfMemory when no free block is large enough.
  // The tier is the caller's business.
  Result<void*> take(std::size_t bytes, std::string_view what) {
    const std::size_t need = round_up(bytes, kBlockAlignment);
    std::lock_guard lock(mutex_);
    const auto fit = free_.lower_bound({need, 0});
    if (fit == free_.end()) {
      const std::size_t largest = free_.empty() ? 0 : free_.rbegin()->first;
      return Status::out_of_memory(fmt::format(
          "out of memory on the {} tier: {} for {} fits the budget but no free block of the device pool: the "
          "largest free block is {} of {} free (the free memory is fragmented; blocks are rounded up to {} B)",
          tier.name(), bytes_text(bytes), what, bytes_text(largest), bytes_text(free_bytes_), kBlockAlignment));
    }
    const auto [size, offset] = *fit;
    free_.erase(fit);
    Block& block = blocks_.at(offset);
    if (size > need) {
      blocks_.emplace(offset + need, Block{size - need, true});
      free_.emplace(size - need, offset + need);
      block.size = need;
    }
    block.free = false;
    free_bytes_ -= need;
    return static_cast<void*>(arena_ + offset);
  }

  // Returns a block from take(). The memory must no longer be in use by any stream (device.h).
  void give_back(void* data) {
    const auto offset = static_cast<std::size_t>(static_cast<char*>(data) - arena_);
    std::lock_guard lock(mutex_);
    auto it = blocks_.find(offset);
    ZINF_CHECK(it != blocks_.end() && !it->second.free, "device pool: a block was returned that is not taken");
    it->second.free = true;
    free_bytes_ += it->second.size;
    if (const auto next = std::next(it); next != blocks_.end() && next->second.free) {
      free_.erase({next->second.size, next->first});
      it->second.size += next->second.size;
      blocks_.erase(next);
    }
    if (it != blocks_.begin()) {
      if (const auto previous = std::prev(it); previous->second.free) {
        free_.erase({previous->second.size, previous->first});
        previous->second.size += it->second.size;
        blocks_.erase(it);
        it = previous;
      }
    }
    free_.emplace(it->second.size, it->first);
  }

 private:
  struct Block {
    std::size_t size;
    bool free;
  };

  char* arena_;
  std::size_t arena_bytes_;
  std::mutex mutex_;
  std::map<std::size_t, Block> blocks_;                 // every block, by offset
  std::set<std::pair<std::size_t, std::size_t>> free_;  // free blocks, by (size, offset)
  std::size_t free_bytes_;
};

cudaMemcpyKind memcpy_kind(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice:
      return cudaMemcpyHostToDevice;
    case CopyKind::kDeviceToHost:
      return cudaMemcpyDeviceToHost;
    case CopyKind::kDeviceToDevice:
      return cudaMemcpyDeviceToDevice;
    case CopyKind::kHostToHost:
      return cudaMemcpyHostToHost;
  }
  return cudaMemcpyDefault;
}

const char* copy_label(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice:
      return "H2D";
    case CopyKind::kDeviceToHost:
      return "D2H";
    case CopyKind::kDeviceToDevice:
      return "D2D";
    case CopyKind::kHostToHost:
      return "H2H";
  }
  return "copy";
}

class CudaDevice final : public Device {
 public:
  CudaDevice(int index, std::string name, std::uint64_t total_bytes, std::uint64_t budget_bytes,
             std::shared_ptr<DevicePool> pool, std::uint64_t host_budget_bytes,
             std::array<std::unique_ptr<CudaStream>, kStreamRoleCount> streams)
      : index_(index),
        name_(std::move(name)),
        total_bytes_(total_bytes),
        budget_bytes_(budget_bytes),
        pool_(std::move(pool)),
        host_tier_(std::make_shared<memory::MemoryTier>("host", host_budget_bytes)),
        streams_(std::move(streams)) {
    streams_[static_cast<std::size_t>(StreamRole::kCollective)]->count_waits_in(&collective_wait_counter());
  }

  ~CudaDevice() override {
    (void)cudaSetDevice(index_);
    reclaim_released(true);  // pending stream-ordered frees go back to the pool and tiers owned here
    ops_.reset();            // waits for the compute stream, then returns its scratch and workspace to the pool
    for (auto& stream : streams_) stream.reset();  // each waits for its own work
    (void)cudaFree(pool_->arena());
  }
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  // The second half of construction: CudaOps needs the finished device (its pool and streams).
  Status create_ops() {
    ZINF_ASSIGN_OR_RETURN(ops_, CudaOps::create(*this, compute_stream(), index_));
    return Status::ok();
  }

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::string describe() const override {
    if (budget_bytes_ == 0) {
      return fmt::format("cuda:{} {} ({}; no budget: {} pool)", index_, name_, bytes_text(total_bytes_),
                         bytes_text(pool_->tier.capacity_bytes()));
    }
    return fmt::format("cuda:{} {} ({}; {} budget)", index_, name_, bytes_text(total_bytes_),
                       bytes_text(budget_bytes_));
  }
  memory::MemoryTier& memory() override { return pool_->tier; }

  Result<DeviceBuffer> allocate(std::size_t bytes, std::string_view what) override {
    return allocate_reclaiming([&] { return allocate_now(bytes, what); });
  }

  Result<DeviceBuffer> allocate_now(std::size_t bytes, std::string_view what) {
    ZINF_RETURN_IF_ERROR(pool_->tier.reserve(bytes, what));
    if (bytes == 0) return DeviceBuffer();
    Result<void*> block = pool_->take(bytes, what);
    if (!block.is_ok()) {
      pool_->tier.release(bytes);
      return block.status();
    }
    return DeviceBuffer(block.value(), bytes, [pool = pool_](void* data, std::size_t n) {
      pool->give_back(data);
      pool->tier.release(n);
    });
  }

  Stream& stream(StreamRole role) override { return *streams_[static_cast<std::size_t>(role)]; }

  std::unique_ptr<Event> create_event() override {
    cudaEvent_t event = nullptr;
    Status status = activate();
    if (status.is_ok()) status = ZINF_CUDA_STATUS(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    if (!status.is_ok()) {
      errors_->report(std::move(status));
      event = nullptr;
    }
    return std::make_unique<CudaEvent>(index_, event, errors_);
  }

  memory::MemoryTier& host_memory() override { return *host_tier_; }

  Result<DeviceBuffer> allocate_host(std::size_t bytes, std::string_view what) override {
    return allocate_reclaiming([&] { return allocate_host_now(bytes, what); });
  }

  Result<DeviceBuffer> allocate_host_now(std::size_t bytes, std::string_view what) {
    ZINF_RETURN_IF_ERROR(host_tier_->reserve(bytes, what));
    if (bytes == 0) return DeviceBuffer();
    void* data = nullptr;
    Status status = activate();
    // Portable: page-locked for every CUDA context, so any device's streams copy it at full speed.
    if (status.is_ok()) status = ZINF_CUDA_STATUS(cudaHostAlloc(&data, bytes, cudaHostAllocPortable));
    if (!status.is_ok()) {
      host_tier_->release(bytes);
      return Status(status.code(),
                    fmt::format("page-locked host memory of {} for {}: {}", bytes_text(bytes), what, status.message()));
    }
    // The free function may run on any thread: it makes this device current first, as every other
    // call does, so a thread that never used CUDA does not create a context on device 0 to free it.
    return DeviceBuffer(data, bytes, [index = index_, tier = host_tier_, errors = errors_](void* block, std::size_t n) {
      Status selected = ZINF_CUDA_STATUS(cudaSetDevice(index));
      Status freed = ZINF_CUDA_STATUS(cudaFreeHost(block));  // tried either way: the block is not kept
      errors->report(selected.is_ok() ? std::move(freed) : std::move(selected));
      tier->release(n);
    });
  }

  void copy(void* dst, const void* src, std::size_t bytes, CopyKind kind, Stream& on) override {
    if (bytes == 0) return;
    CudaStream& stream = cuda_stream(on);
    const std::string label = fmt::format("{} {}", copy_label(kind), bytes_text(bytes));
    const ProfilerRange range(*this, label.c_str());
    Status status = activate();
    if (status.is_ok()) status = ZINF_CUDA_STATUS(cudaMemcpyAsync(dst, src, bytes, memcpy_kind(kind), stream.handle()));
    stream.report_error(std::move(status));
  }

  void zero(void* dst, std::size_t bytes, Stream& on) override {
    if (bytes == 0) return;
    CudaStream& stream = cuda_stream(on);
    Status status = activate();
    if (status.is_ok()) status = ZINF_CUDA_STATUS(cudaMemsetAsync(dst, 0, bytes, stream.handle()));
    stream.report_error(std::move(status));
  }

  Status synchronize() override {
    Status first;
    for (auto& stream : streams_) {
      Status status = stream->synchronize();
      if (!status.is_ok() && first.is_ok()) first = std::move(status);
    }
    Status own = errors_->take();
    return first.is_ok() ? own : first;
  }

  Ops& ops() override { return *ops_; }

  void push_range(const char* name) override { nvtxRangePushA(name); }
  void pop_range() override { nvtxRangePop(); }

 private:
  Status activate() const { return ZINF_CUDA_STATUS(cudaSetDevice(index_)); }

  CudaStream& compute_stream() { return *streams_[static_cast<std::size_t>(StreamRole::kCompute)]; }

  // `on` as this device's stream (handing a stream of another device is a bug).
  CudaStream& cuda_stream(Stream& on) const {
    auto* stream = dynamic_cast<CudaStream*>(&on);
    ZINF_CHECK(stream != nullptr && stream->device_index() == index_, "cuda device: a stream of another device");
    return *stream;
  }

  int index_;
  std::string name_;
  std::uint64_t total_bytes_;
  std::uint64_t budget_bytes_;
  std::shared_ptr<DevicePool> pool_;
  std::shared_ptr<memory::MemoryTier> host_tier_;                      // shared with the free functions of host buffers
  std::shared_ptr<ErrorSlot> errors_ = std::make_shared<ErrorSlot>();  // errors of events, cudaFreeHost
  std::array<std::unique_ptr<CudaStream>, kStreamRoleCount> streams_;
  std::unique_ptr<CudaOps> ops_;
};

}  // namespace

Result<std::unique_ptr<Device>> make_cuda_device(const CudaDeviceOptions& options) {
  int count = 0;
  const cudaError_t counted = cudaGetDeviceCount(&count);
  if (counted != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    const std::string why = counted != cudaSuccess
                                ? fmt::format("{} ({})", cudaGetErrorString(counted), cudaGetErrorName(counted))
                                : std::string("it found 0 devices");
    return Status::not_found(
        fmt::format("device: cuda requested but no CUDA device is usable (cudaGetDeviceCount: {})", why));
  }
  const int index = options.device_index;
  if (index < 0 || index >= count) {
    return Status::not_found(
        fmt::format("device: cuda:{} does not exist ({} CUDA device{} visible)", index, count, count == 1 ? "" : "s"));
  }
  const std::string where = fmt::format("device: cuda:{}", index);
  Status status = ZINF_CUDA_STATUS(cudaSetDevice(index));
  cudaDeviceProp properties{};
  if (status.is_ok()) status = ZINF_CUDA_STATUS(cudaGetDeviceProperties(&properties, index));
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  if (status.is_ok()) status = ZINF_CUDA_STATUS(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (!status.is_ok()) return status.with_context(where);

  const std::uint64_t budget = options.memory_budget_bytes;
  std::uint64_t arena_bytes = 0;
  std::uint64_t tier_capacity = 0;
  if (budget != 0) {
    const std::uint64_t slack = rounding_slack(budget);
    if (budget > free_bytes || free_bytes - budget < kBudgetHeadroomBytes + slack) {
      return Status::infeasible(fmt::format(
          "device_memory: {} does not fit in the {} free on cuda:{} ({}, {} in all), of which {} is kept for the "
          "CUDA context, kernel code, cuBLAS and the pool's block rounding; lower device_memory, or leave it unset "
          "to use what is free",
          bytes_text(budget), bytes_text(free_bytes), index, properties.name, bytes_text(total_bytes),
          bytes_text(kBudgetHeadroomBytes + slack)));
    }
    arena_bytes = round_up(budget, kBlockAlignment) + slack;
    tier_capacity = budget;
  } else {
    const std::uint64_t reserve = std::max<std::uint64_t>(kGiB, total_bytes / 20);
    if (free_bytes < reserve + 2 * kMiB) {
      return Status::infeasible(fmt::format(
          "device: cuda:{} ({}) has only {} free of {}, not more than the {} kept for the CUDA context, kernel code "
          "and cuBLAS; free GPU memory (other processes?) or set device_memory",
          index, properties.name, bytes_text(free_bytes), bytes_text(total_bytes), bytes_text(reserve)));
    }
    // Whole 2 MiB pages: the granularity the driver maps device memory in. The tier's capacity
    // leaves the pool its rounding slack (see rounding_slack).
    arena_bytes = (free_bytes - reserve) / (2 * kMiB) * (2 * kMiB);
    tier_capacity = arena_bytes - rounding_slack(arena_bytes);
  }

  std::array<std::unique_ptr<CudaStream>, kStreamRoleCount> streams;
  for (int role = 0; role < kStreamRoleCount; ++role) {
    Result<std::unique_ptr<CudaStream>> stream = CudaStream::create(static_cast<StreamRole>(role), index);
    if (!stream.is_ok()) return stream.status().with_context(where);
    streams[static_cast<std::size_t>(role)] = std::move(stream).value();
  }

  void* arena = nullptr;
  status = ZINF_CUDA_STATUS(cudaMalloc(&arena, arena_bytes));
  if (!status.is_ok()) {
    return status.with_context(fmt::format("{}: reserving the {} device-memory pool", where, bytes_text(arena_bytes)));
  }
  auto pool =
      std::make_shared<DevicePool>(tier_capacity, static_cast<char*>(arena), static_cast<std::size_t>(arena_bytes));
  auto device = std::make_unique<CudaDevice>(index, properties.name, total_bytes, budget, std::move(pool),
                                             options.host_memory_budget_bytes, std::move(streams));
  status = device->create_ops();
  if (!status.is_ok()) return status.with_context(where);
  return std::unique_ptr<Device>(std::move(device));
}

}  // namespace zinf::device
