#include "libengine/device/cpu_device.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "kernels/copy.h"
#include "libengine/core/function_ref.h"
#include "libengine/core/thread_name.h"
#include "libengine/core/units.h"
#include "libengine/device/cpu_ops.h"
#include "libengine/memory/aligned_buffer.h"

namespace zinf::device {
namespace {

// Completion counter shared by an event and the stream work that reaches it. record() hands out
// target numbers; the stream marks them reached in order; wait()/synchronize() wait for a target.
// `wait_counter` is the device's collective-wait counter when the collective stream recorded the
// event last (Device::collective_wait_seconds), null otherwise.
struct EventState {
  std::mutex mutex;
  std::condition_variable reached_cv;
  std::uint64_t recorded = 0;
  std::uint64_t reached = 0;
  std::atomic<std::int64_t>* wait_counter = nullptr;

  void mark(std::uint64_t target) {
    {
      std::lock_guard lock(mutex);
      if (target > reached) reached = target;
    }
    reached_cv.notify_all();
  }
  // `host_wait`: the caller is a host thread (compute, or synchronize), not a stream's worker; its
  // blocked time counts as waiting for collectives when the collective stream recorded the event.
  void wait_for(std::uint64_t target, bool host_wait) {
    std::unique_lock lock(mutex);
    if (reached >= target) return;
    std::atomic<std::int64_t>* counter = host_wait ? wait_counter : nullptr;
    const auto start = std::chrono::steady_clock::now();
    reached_cv.wait(lock, [&] { return reached >= target; });
    if (counter != nullptr) {
      counter->fetch_add(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
    }
  }
};

std::uint64_t next_target(EventState& state, std::atomic<std::int64_t>* wait_counter) {
  std::lock_guard lock(state.mutex);
  state.wait_counter = wait_counter;
  return ++state.recorded;
}

// The point the event was last recorded at: what a wait() issued now must wait for.
std::uint64_t last_target(EventState& state) {
  std::lock_guard lock(state.mutex);
  return state.recorded;
}

class CpuEvent final : public Event {
 public:
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
  Status synchronize() override {
    state->wait_for(last_target(*state), true);
    return Status::ok();
  }
  bool query() override {
    std::lock_guard lock(state->mutex);
    return state->reached >= state->recorded;
  }
};

// The compute stream: work runs at once on the calling thread, so it is trivially in order.
class InlineStream final : public Stream {
 public:
  explicit InlineStream(StreamRole role) : role_(role) {}
  StreamRole role() const override { return role_; }
  void enqueue(std::function<Status()> work) override { run(work); }
  bool run_if_idle(FunctionRef<Status()> work) override {
    run(work);
    return true;
  }
  void record(Event& event) override {
    auto& state = *static_cast<CpuEvent&>(event).state;
    state.mark(next_target(state, nullptr));
  }
  void wait(Event& event) override {
    auto& state = *static_cast<CpuEvent&>(event).state;
    state.wait_for(last_target(state), true);
  }
  Status synchronize() override { return std::exchange(first_error_, Status::ok()); }

 private:
  template <typename Work>
  void run(Work& work) {
    Status status = work();
    if (!status.is_ok() && first_error_.is_ok()) first_error_ = std::move(status);
  }

  StreamRole role_;
  Status first_error_;
};

// A transfer or collective stream: one worker thread runs the queue in order. `wait_counter`
// (the collective stream's): where host threads' blocked time waiting for this stream is added —
// also the time a caller spends running this stream's work itself (run_if_idle).
//
// run_if_idle: handing work to the worker costs a wake-up and, where the caller and the worker share
// a core (mpirun binds each of 2 ranks to one core), a context switch each way per piece of work
// (measured here: ~1 switch and 1.5-2 us per small collective). Work run on the caller while the
// stream is idle costs two atomic operations instead (and the two clock reads of its timing): a
// small collective takes 1.5 us, so the mutex round trips this path used before were a visible
// share of it. `pending_` counts the work queued or running on the worker plus kInline while a
// caller runs work itself; the worker does not start queued work while kInline is set, so stream
// order holds either way. The mutex still guards the queue and the error; the idle path takes it
// only when someone waits (a synchronize() of another thread, or work enqueued meanwhile).
class WorkerStream final : public Stream {
 public:
  explicit WorkerStream(StreamRole role, std::atomic<std::int64_t>* wait_counter = nullptr)
      : role_(role), wait_counter_(wait_counter), worker_([this] { run(); }) {}
  ~WorkerStream() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    worker_.join();
  }
  StreamRole role() const override { return role_; }
  void enqueue(std::function<Status()> work) override {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(work));
      pending_.fetch_add(1);
    }
    work_cv_.notify_all();
  }
  bool run_if_idle(FunctionRef<Status()> work) override {
    std::uint64_t idle = 0;
    if (!pending_.compare_exchange_strong(idle, kInline)) return false;
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = wait_counter_ != nullptr ? Clock::now() : Clock::time_point();
    Status status = work();
    if (wait_counter_ != nullptr) {
      wait_counter_->fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
    }
    if (!status.is_ok()) {
      std::lock_guard lock(mutex_);  // before kInline clears: whoever then sees the stream idle sees the error
      if (first_error_.is_ok()) first_error_ = std::move(status);
    }
    const std::uint64_t queued = pending_.fetch_sub(kInline) - kInline;
    // Work another thread enqueued meanwhile waits for the worker; a synchronize() of another
    // thread waits for idle. Either checked its condition under the mutex before sleeping: taking
    // it here orders this wake-up after that sleep (no lost wake-up).
    if (queued != 0 || idle_waiters_.load() != 0) {
      { std::lock_guard lock(mutex_); }
      work_cv_.notify_all();
      idle_cv_.notify_all();
    }
    return true;
  }
  void record(Event& event) override {
    std::shared_ptr<EventState> state = static_cast<CpuEvent&>(event).state;
    const std::uint64_t target = next_target(*state, wait_counter_);
    enqueue([state, target] {
      state->mark(target);
      return Status::ok();
    });
  }
  void wait(Event& event) override {
    std::shared_ptr<EventState> state = static_cast<CpuEvent&>(event).state;
    const std::uint64_t target = last_target(*state);
    enqueue([state, target] {
      state->wait_for(target, false);
      return Status::ok();
    });
  }
  Status synchronize() override {
    std::unique_lock lock(mutex_);
    if (pending_.load() == 0) return std::exchange(first_error_, Status::ok());
    const auto start = std::chrono::steady_clock::now();
    idle_waiters_.fetch_add(1);
    idle_cv_.wait(lock, [&] { return pending_.load() == 0; });
    idle_waiters_.fetch_sub(1);
    if (wait_counter_ != nullptr) {
      wait_counter_->fetch_add(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
    }
    return std::exchange(first_error_, Status::ok());
  }

 private:
  // Added to pending_ while a caller runs work itself (run_if_idle); above any queue length.
  static constexpr std::uint64_t kInline = std::uint64_t{1} << 62;

  void run() {
    name_this_thread(role_ == StreamRole::kHostToDevice   ? "zinf-h2d"
                     : role_ == StreamRole::kDeviceToHost ? "zinf-d2h"
                                                          : "zinf-collective");
    std::unique_lock lock(mutex_);
    for (;;) {
      // kInline here: a caller runs work itself (run_if_idle); what is queued behind it waits.
      work_cv_.wait(lock, [&] { return stopping_ || (!queue_.empty() && (pending_.load() & kInline) == 0); });
      if (queue_.empty()) return;  // stopping with nothing left
      std::function<Status()> work = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      Status status = work();
      lock.lock();
      if (!status.is_ok() && first_error_.is_ok()) first_error_ = std::move(status);
      if (pending_.fetch_sub(1) == 1) idle_cv_.notify_all();
    }
  }

  StreamRole role_;
  std::atomic<std::int64_t>* wait_counter_;
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  std::deque<std::function<Status()>> queue_;
  // Sequentially consistent throughout: run_if_idle's check of idle_waiters_ after its fetch_sub
  // pairs with synchronize()'s increment before its check of pending_ (one of them sees the other).
  std::atomic<std::uint64_t> pending_{0};
  std::atomic<int> idle_waiters_{0};
  bool stopping_ = false;
  Status first_error_;
  std::thread worker_;  // last: starts after the members it uses exist
};

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(const CpuDeviceOptions& options)
      : tier_("device", options.memory_budget_bytes),
        host_tier_("host", options.host_memory_budget_bytes),
        copy_threads_(options.copy_threads) {
    streams_[0] = std::make_unique<InlineStream>(StreamRole::kCompute);
    if (options.copy_threads) {
      streams_[1] = std::make_unique<WorkerStream>(StreamRole::kHostToDevice);
      streams_[2] = std::make_unique<WorkerStream>(StreamRole::kDeviceToHost);
    } else {
      streams_[1] = std::make_unique<InlineStream>(StreamRole::kHostToDevice);
      streams_[2] = std::make_unique<InlineStream>(StreamRole::kDeviceToHost);
    }
    streams_[3] = std::make_unique<WorkerStream>(StreamRole::kCollective, &collective_wait_counter());
  }

  // Pending stream-ordered frees return their bytes to tiers this object owns: drain them first.
  ~CpuDevice() override { reclaim_released(true); }
  CpuDevice(const CpuDevice&) = delete;
  CpuDevice& operator=(const CpuDevice&) = delete;

  DeviceKind kind() const override { return DeviceKind::kCpu; }
  std::string describe() const override {
    const std::uint64_t budget = tier_.capacity_bytes();
    const std::string copies = copy_threads_ ? "" : "; copies on the calling thread";
    return budget == 0 ? fmt::format("cpu (no budget{})", copies)
                       : fmt::format("cpu ({} budget{})", format_bytes(static_cast<double>(budget)), copies);
  }
  memory::MemoryTier& memory() override { return tier_; }

  Result<DeviceBuffer> allocate(std::size_t bytes, std::string_view what) override {
    return allocate_reclaiming([&] { return allocate_on(tier_, bytes, 64, what); });
  }
  memory::MemoryTier& host_memory() override { return host_tier_; }
  Result<DeviceBuffer> allocate_host(std::size_t bytes, std::string_view what) override {
    return allocate_reclaiming([&] { return allocate_on(host_tier_, bytes, 4096, what); });
  }

  Stream& stream(StreamRole role) override { return *streams_[static_cast<std::size_t>(role)]; }
  std::unique_ptr<Event> create_event() override { return std::make_unique<CpuEvent>(); }

  // On a stream that runs its work on the calling thread (the training thread's) the bytes move
  // over the compute team (kernels/copy.h); a copy thread's stream keeps to one memcpy on that
  // thread, as a team begun there would be a second OpenMP team.
  void copy(void* dst, const void* src, std::size_t bytes, CopyKind, Stream& on) override {
    if (runs_on_caller(on)) {
      kernels::cpu::copy_bytes(dst, src, bytes);
      return;
    }
    on.enqueue([dst, src, bytes] {
      if (bytes != 0) std::memcpy(dst, src, bytes);
      return Status::ok();
    });
  }
  void zero(void* dst, std::size_t bytes, Stream& on) override {
    if (runs_on_caller(on)) {
      kernels::cpu::zero_bytes(dst, bytes);
      return;
    }
    on.enqueue([dst, bytes] {
      if (bytes != 0) std::memset(dst, 0, bytes);
      return Status::ok();
    });
  }

  Status synchronize() override {
    Status first;
    for (auto& s : streams_) {
      Status status = s->synchronize();
      if (!status.is_ok() && first.is_ok()) first = std::move(status);
    }
    return first;
  }

  Ops& ops() override { return ops_; }

 private:
  // Whether `stream` runs its work at once on the caller: an InlineStream (the compute stream, and
  // without copy threads the transfer streams).
  static bool runs_on_caller(const Stream& stream) { return dynamic_cast<const InlineStream*>(&stream) != nullptr; }

  // Zero-filled, `alignment`-aligned host memory counted on `tier`.
  static Result<DeviceBuffer> allocate_on(memory::MemoryTier& tier, std::size_t bytes, std::size_t alignment,
                                          std::string_view what) {
    ZINF_RETURN_IF_ERROR(tier.reserve(bytes, what));
    if (bytes == 0) return DeviceBuffer();
    Result<memory::AlignedBuffer> block = memory::AlignedBuffer::allocate(bytes, alignment);
    if (!block.is_ok()) {
      tier.release(bytes);
      return Status::out_of_memory(fmt::format("{} (for {})", block.status().message(), what));
    }
    // The AlignedBuffer is moved into the free function, which owns it until the buffer dies.
    auto owner = std::make_shared<memory::AlignedBuffer>(std::move(block).value());
    void* data = owner->data();
    return DeviceBuffer(data, bytes, [&tier, owner](void*, std::size_t n) mutable {
      owner.reset();
      tier.release(n);
    });
  }

  memory::MemoryTier tier_;
  memory::MemoryTier host_tier_;
  bool copy_threads_;  // CpuDeviceOptions::copy_threads
  CpuOps ops_;
  std::array<std::unique_ptr<Stream>, kStreamRoleCount> streams_;
};

}  // namespace

std::unique_ptr<Device> make_cpu_device(const CpuDeviceOptions& options) {
  return std::make_unique<CpuDevice>(options);
}

}  // namespace zinf::device
