// TimedCommunicator: a Communicator that forwards every call to another one and measures how long
// the collectives kept the collective stream and the calling thread busy — the "communication
// time" of a training step (StepMetrics, the run record's engine and ranks sections). A stream
// collective is bracketed by two marks enqueued on its stream around the wrapped call, so its busy
// time is from when the stream reached the collective to when it finished it (a slow peer's time
// included: that is time the stream spent on communication). barrier() and all_reduce_host()
// block the calling thread: their whole time is busy and also waited (nothing can hide it).
// What it is not: the measure of how much of that time compute waited for — the device counts
// that (Device::collective_wait_seconds), since only it sees the waits.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "libengine/comm/communicator.h"

namespace zinf::comm {

// Cumulative since the communicator was created.
struct CommTimes {
  double busy_seconds = 0;       // stream collectives and host calls, end to end
  double host_seconds = 0;       // of busy_seconds: barrier() and all_reduce_host() (the caller waited)
  std::uint64_t calls = 0;       // collectives and host calls issued
  std::uint64_t send_bytes = 0;  // bytes each call took from this rank (send count x element size)
};

class TimedCommunicator final : public CommunicatorWrapper {
 public:
  // Takes ownership of `inner`. Thread-safety as the Communicator contract; times() from any thread.
  explicit TimedCommunicator(std::unique_ptr<Communicator> inner);

  void all_gather(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override;
  void reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override;
  void all_reduce(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override;
  void broadcast(void* buffer, std::size_t count, DType dtype, int root, device::Stream& stream) override;
  Status barrier() override;
  Status all_reduce_host(std::span<double> values) override;

  // What was measured so far. Stream collectives count once their stream has passed them (after
  // a synchronize() of the stream they are complete).
  CommTimes times() const;

 private:
  // Shared with the marks in flight, which may run after a call returns.
  struct Counters {
    std::atomic<std::int64_t> busy_ns{0};
    std::atomic<std::int64_t> host_ns{0};
    std::atomic<std::int64_t> stream_start_ns{0};  // when the stream reached the collective in progress
    std::atomic<std::uint64_t> calls{0};
    std::atomic<std::uint64_t> send_bytes{0};
  };
  // Enqueues the start mark, `forward` (the wrapped call) and the end mark on `stream`.
  template <typename Forward>
  void stream_call(std::size_t send_bytes, device::Stream& stream, Forward&& forward);
  template <typename Forward>
  Status host_call(std::size_t send_bytes, Forward&& forward);

  std::shared_ptr<Counters> counters_ = std::make_shared<Counters>();
};

}  // namespace zinf::comm
