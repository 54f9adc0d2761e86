// FaultInjectingCommunicator (fault_injecting_communicator.h).
#include "libengine/comm/fault_injecting_communicator.h"

#include <thread>

#include <fmt/format.h>

namespace zinf::comm {

FaultInjectingCommunicator::Action FaultInjectingCommunicator::next(const char* op, Status& status) {
  const std::uint64_t call = ++calls_;
  std::lock_guard lock(mutex_);
  if (!first_error_.is_ok()) {
    status = first_error_;
    return Action::kFail;
  }
  if (disappeared_) return Action::kSwallow;
  if (call != fault_.at_call) return Action::kForward;
  switch (fault_.kind) {
    case Fault::Kind::kNone:
      return Action::kForward;
    case Fault::Kind::kDelay:
      return Action::kDelayThenForward;
    case Fault::Kind::kError:
      first_error_ = Status::internal(
          fmt::format("{} #{} on rank {} of {}: injected error", op, call, inner_->rank(), inner_->world_size()));
      status = first_error_;
      return Action::kFail;
    case Fault::Kind::kDisappear:
      disappeared_ = true;
      return Action::kSwallow;
  }
  return Action::kForward;
}

template <typename Forward>
void FaultInjectingCommunicator::stream_call(const char* op, device::Stream& stream, Forward&& forward) {
  Status status;
  switch (next(op, status)) {
    case Action::kForward:
      forward();
      return;
    case Action::kDelayThenForward:
      stream.enqueue([delay = fault_.delay] {
        std::this_thread::sleep_for(delay);
        return Status::ok();
      });
      forward();
      return;
    case Action::kFail:
      stream.enqueue([status] { return status; });
      return;
    case Action::kSwallow:
      return;
  }
}

void FaultInjectingCommunicator::all_gather(const void* send, void* recv, std::size_t count, DType dtype,
                                            device::Stream& stream) {
  stream_call("all_gather", stream, [&] { inner_->all_gather(send, recv, count, dtype, stream); });
}

void FaultInjectingCommunicator::reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype,
                                                device::Stream& stream) {
  stream_call("reduce_scatter", stream, [&] { inner_->reduce_scatter(send, recv, count, dtype, stream); });
}

void FaultInjectingCommunicator::all_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                                            device::Stream& stream) {
  stream_call("all_reduce", stream, [&] { inner_->all_reduce(send, recv, count, dtype, stream); });
}

void FaultInjectingCommunicator::broadcast(void* buffer, std::size_t count, DType dtype, int root,
                                           device::Stream& stream) {
  stream_call("broadcast", stream, [&] { inner_->broadcast(buffer, count, dtype, root, stream); });
}

template <typename Forward>
Status FaultInjectingCommunicator::host_call(const char* op, Forward&& forward) {
  Status status;
  switch (next(op, status)) {
    case Action::kDelayThenForward:
      std::this_thread::sleep_for(fault_.delay);
      break;
    case Action::kFail:
      return status;
    case Action::kSwallow:
      return Status::ok();
    case Action::kForward:
      break;
  }
  return forward();
}

Status FaultInjectingCommunicator::barrier() {
  return host_call("barrier", [&] { return inner_->barrier(); });
}

Status FaultInjectingCommunicator::all_reduce_host(std::span<double> values) {
  return host_call("all_reduce_host", [&] { return inner_->all_reduce_host(values); });
}

}  // namespace zinf::comm
