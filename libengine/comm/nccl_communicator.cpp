// NcclCommunicator (nccl_communicator.h): NCCL bootstrap over MPI, non-blocking NCCL calls, and the
// watchdog that bounds every collective by the timeout.
#include "libengine/comm/nccl_communicator.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "libengine/comm/mpi_communicator.h"
#include "libengine/comm/mpi_runtime.h"
#include "libengine/core/check.h"
#include "libengine/core/thread_name.h"
#include "libengine/core/units.h"

namespace zinf::comm {
namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t nccl_type(DType dtype) {
  return dtype == DType::kF32 ? ncclFloat32 : dtype == DType::kBF16 ? ncclBfloat16 : ncclFloat16;
}

// Waits until a non-blocking NCCL call on `comm` has finished (ncclCommGetAsyncError leaves
// ncclInProgress) or the deadline passes; ok, or the error text.
Status settle(ncclComm_t comm, ncclResult_t started, Clock::time_point deadline, const std::string& what) {
  ncclResult_t state = started;
  while (state == ncclInProgress) {
    if (Clock::now() >= deadline) return Status::internal(fmt::format("{}: NCCL did not finish in time", what));
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) break;
  }
  if (state != ncclSuccess) {
    return Status::internal(fmt::format("{}: NCCL: {} ({})", what, ncclGetErrorString(state), ncclGetLastError(comm)));
  }
  return Status::ok();
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::unique_ptr<Communicator> host, const CommOptions& options, int device_index)
      : host_(std::move(host)), options_(options), device_index_(device_index) {}

  Status init() {
    const int world = host_->world_size();
    const int me = host_->rank();
    ncclUniqueId id{};
    if (me == 0) {
      const ncclResult_t made = ncclGetUniqueId(&id);
      if (made != ncclSuccess)
        return Status::internal(fmt::format("NCCL: ncclGetUniqueId: {}", ncclGetErrorString(made)));
    }
    // The id travels as bytes over MPI (the bootstrap); polled so it is bounded like everything else.
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Ibcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD, &request);
    const Clock::time_point deadline = Clock::now() + options_.timeout;
    for (int done = 0; done == 0;) {
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (done == 0 && Clock::now() >= deadline) {
        return Status::internal(
            fmt::format("NCCL bootstrap on rank {} of {}: the unique id from rank 0 did not "
                        "arrive within {}",
                        me, world, format_duration(options_.timeout.count() / 1e3)));
      }
    }
    if (cudaSetDevice(device_index_) != cudaSuccess) {
      return Status::internal(fmt::format("NCCL: cudaSetDevice({}) failed", device_index_));
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t started = ncclCommInitRankConfig(&comm_, world, id, me, &config);
    ZINF_RETURN_IF_ERROR(settle(comm_, started, deadline, fmt::format("ncclCommInitRank on rank {} of {}", me, world)));
    watchdog_ = std::thread([this] {
      name_this_thread("zinf-nccl-watch");
      watch();
    });
    return Status::ok();
  }

  ~NcclCommunicator() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    if (comm_ == nullptr || aborted_) return;
    if (broken()) {
      ncclCommAbort(comm_);
    } else {
      (void)cudaSetDevice(device_index_);
      (void)ncclCommFinalize(comm_);
      (void)settle(comm_, ncclInProgress, Clock::now() + options_.timeout, "ncclCommFinalize");
      ncclCommDestroy(comm_);
    }
    for (Pending& pending : pending_) cudaEventDestroy(pending.done);
  }

  std::string_view backend() const override { return "nccl"; }
  int rank() const override { return host_->rank(); }
  int world_size() const override { return host_->world_size(); }
  int local_rank() const override { return host_->local_rank(); }
  int local_size() const override { return host_->local_size(); }

  void all_gather(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override {
    launch("all_gather", count, dtype, stream,
           [&](cudaStream_t s) { return ncclAllGather(send, recv, count, nccl_type(dtype), comm_, s); });
  }
  void reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override {
    launch("reduce_scatter", count, dtype, stream,
           [&](cudaStream_t s) { return ncclReduceScatter(send, recv, count, nccl_type(dtype), ncclSum, comm_, s); });
  }
  void all_reduce(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override {
    launch("all_reduce", count, dtype, stream,
           [&](cudaStream_t s) { return ncclAllReduce(send, recv, count, nccl_type(dtype), ncclSum, comm_, s); });
  }
  void broadcast(void* buffer, std::size_t count, DType dtype, int root, device::Stream& stream) override {
    ZINF_CHECK(root >= 0 && root < world_size(), "NcclCommunicator::broadcast: root is not a rank of the world");
    launch("broadcast", count, dtype, stream,
           [&](cudaStream_t s) { return ncclBroadcast(buffer, buffer, count, nccl_type(dtype), root, comm_, s); });
  }
  Status barrier() override { return host_->barrier(); }
  Status all_reduce_host(std::span<double> values) override { return host_->all_reduce_host(values); }

 private:
  struct Pending {
    cudaEvent_t done = nullptr;
    Clock::time_point deadline;
    std::string what;
  };

  bool broken() const {
    std::lock_guard lock(mutex_);
    return !first_error_.is_ok();
  }
  Status first_error() const {
    std::lock_guard lock(mutex_);
    return first_error_;
  }
  template <typename Call>
  void launch(const char* op, std::size_t count, DType dtype, device::Stream& stream, Call&& call) {
    const std::string what = fmt::format("{} #{} ({} {}) on rank {} of {}", op, ++calls_,
                                         format_bytes(static_cast<double>(count * dtype_size_bytes(dtype))),
                                         dtype_name(dtype), rank(), world_size());
    {
      // Held across the (non-blocking) enqueue so the watchdog cannot abort the communicator under it.
      std::lock_guard lock(mutex_);
      if (first_error_.is_ok() && !aborted_) {
        auto* native = static_cast<cudaStream_t>(stream.native_handle());
        Status status = settle(comm_, call(native), Clock::now() + options_.timeout, what);
        cudaEvent_t done = nullptr;
        if (status.is_ok() && (cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess ||
                               cudaEventRecord(done, native) != cudaSuccess)) {
          status = Status::internal(fmt::format("{}: cudaEventRecord after the collective failed", what));
        }
        if (status.is_ok()) {
          pending_.push_back({done, Clock::now() + options_.timeout, what});
          cv_.notify_all();
        } else {
          MpiRuntime::mark_broken_if_running(1);
          first_error_ = std::move(status);
        }
      }
    }
    // Runs once the collective finished (or was aborted): reports the first error, if any.
    stream.enqueue([this] { return first_error(); });
  }

  // The watchdog: the oldest collective in flight must finish before its deadline.
  void watch() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      if (pending_.empty()) {
        cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
        continue;
      }
      Pending& oldest = pending_.front();
      const cudaError_t state = cudaEventQuery(oldest.done);
      if (state == cudaSuccess) {
        cudaEventDestroy(oldest.done);
        pending_.pop_front();
        continue;
      }
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      std::string cause;
      if (async != ncclSuccess && async != ncclInProgress) {
        cause = fmt::format("NCCL: {} ({})", ncclGetErrorString(async), ncclGetLastError(comm_));
      } else if (Clock::now() >= oldest.deadline) {
        cause = fmt::format("timed out after {} waiting for its peers (CommOptions timeout)",
                            format_duration(std::chrono::duration<double>(options_.timeout).count()));
      }
      if (!cause.empty()) {
        if (first_error_.is_ok()) first_error_ = Status::internal(fmt::format("{}: {}", oldest.what, cause));
        MpiRuntime::mark_broken_if_running(1);
        // Ends the kernels stuck in the collective, so the stream (and its error report) moves on.
        ncclCommAbort(comm_);
        aborted_ = true;
        for (Pending& pending : pending_) cudaEventDestroy(pending.done);
        pending_.clear();
        return;
      }
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      lock.lock();
    }
  }

  std::unique_ptr<Communicator> host_;
  CommOptions options_;
  int device_index_;
  ncclComm_t comm_ = nullptr;
  std::uint64_t calls_ = 0;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  bool stopping_ = false;
  bool aborted_ = false;  // by the watchdog: comm_ is gone
  Status first_error_;
  std::thread watchdog_;
};

}  // namespace

Result<std::unique_ptr<Communicator>> make_nccl_communicator(device::Device& device, const CommOptions& options) {
  if (device.kind() != device::DeviceKind::kCuda) {
    return Status::invalid_argument(
        fmt::format("comm: the NCCL communicator takes CUDA device buffers, but the device is {}", device.describe()));
  }
  ZINF_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> host, make_mpi_host_communicator(options));
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    return Status::internal(fmt::format("comm: rank {} sees no GPU for NCCL", host->rank()));
  }
  const int device_index = host->local_rank() % gpus;
  auto communicator = std::make_unique<NcclCommunicator>(std::move(host), options, device_index);
  ZINF_RETURN_IF_ERROR(communicator->init());
  return std::unique_ptr<Communicator>(std::move(communicator));
}

}  // namespace zinf::comm
