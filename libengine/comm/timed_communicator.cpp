// TimedCommunicator (timed_communicator.h): marks around each stream collective, clocks around the
// host calls.
#include "libengine/comm/timed_communicator.h"

#include <chrono>
#include <utility>

namespace zinf::comm {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

TimedCommunicator::TimedCommunicator(std::unique_ptr<Communicator> inner) : CommunicatorWrapper(std::move(inner)) {}

template <typename Forward>
void TimedCommunicator::stream_call(std::size_t send_bytes, device::Stream& stream, Forward&& forward) {
  counters_->calls.fetch_add(1);
  counters_->send_bytes.fetch_add(send_bytes);
  // One stream runs its work in order, so at most one collective of this stream is between its
  // marks at a time; the start mark's time is read by the end mark that follows it. The marks are
  // latency-bound: on an idle stream they run at once, which lets a small collective after the
  // start mark run on the caller too (communicator.h) instead of queueing behind it.
  device::enqueue_latency_bound(stream, [counters = counters_] {
    counters->stream_start_ns.store(now_ns());
    return Status::ok();
  });
  forward();
  device::enqueue_latency_bound(stream, [counters = counters_] {
    counters->busy_ns.fetch_add(now_ns() - counters->stream_start_ns.load());
    return Status::ok();
  });
}

template <typename Forward>
Status TimedCommunicator::host_call(std::size_t send_bytes, Forward&& forward) {
  counters_->calls.fetch_add(1);
  counters_->send_bytes.fetch_add(send_bytes);
  const std::int64_t start = now_ns();
  Status status = forward();
  const std::int64_t elapsed = now_ns() - start;
  counters_->busy_ns.fetch_add(elapsed);
  counters_->host_ns.fetch_add(elapsed);
  return status;
}

void TimedCommunicator::all_gather(const void* send, void* recv, std::size_t count, DType dtype,
                                   device::Stream& stream) {
  stream_call(count * dtype_size_bytes(dtype), stream, [&] { inner_->all_gather(send, recv, count, dtype, stream); });
}

void TimedCommunicator::reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype,
                                       device::Stream& stream) {
  stream_call(count * static_cast<std::size_t>(world_size()) * dtype_size_bytes(dtype), stream,
              [&] { inner_->reduce_scatter(send, recv, count, dtype, stream); });
}

void TimedCommunicator::all_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                                   device::Stream& stream) {
  stream_call(count * dtype_size_bytes(dtype), stream, [&] { inner_->all_reduce(send, recv, count, dtype, stream); });
}

void TimedCommunicator::broadcast(void* buffer, std::size_t count, DType dtype, int root, device::Stream& stream) {
  stream_call(rank() == root ? count * dtype_size_bytes(dtype) : 0, stream,
              [&] { inner_->broadcast(buffer, count, dtype, root, stream); });
}

Status TimedCommunicator::barrier() {
  return host_call(0, [&] { return inner_->barrier(); });
}

Status TimedCommunicator::all_reduce_host(std::span<double> values) {
  return host_call(values.size_bytes(), [&] { return inner_->all_reduce_host(values); });
}

CommTimes TimedCommunicator::times() const {
  CommTimes times;
  times.busy_seconds = static_cast<double>(counters_->busy_ns.load()) * 1e-9;
  times.host_seconds = static_cast<double>(counters_->host_ns.load()) * 1e-9;
  times.calls = counters_->calls.load();
  times.send_bytes = counters_->send_bytes.load();
  return times;
}

}  // namespace zinf::comm
