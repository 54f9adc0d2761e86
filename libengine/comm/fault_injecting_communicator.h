// FaultInjectingCommunicator: a Communicator for tests that forwards to another one and, at the
// Nth call (collectives, barrier() and all_reduce_host() counted together from 1), injects a fault:
//   - kDelay: that call starts `delay` late (on its stream, or on the calling thread for the host
//     calls) and then runs normally — a slow rank;
//   - kError: that call fails with an internal error naming the call and this rank, and the
//     communicator is broken from then on, like a real transport error;
//   - kDisappear: from that call on this rank stops participating: calls return at once, report
//     success and never reach the wrapped communicator, so its peers wait for it — a hung or lost
//     rank as its peers see it.
// The leveldb fault-injecting Env is the model. What it is not: a simulator of many ranks; every
// rank of a test runs its own wrapper (or none).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>

#include "libengine/comm/communicator.h"

namespace zinf::comm {

struct Fault {
  enum class Kind { kNone, kDelay, kError, kDisappear };
  Kind kind = Kind::kNone;
  std::uint64_t at_call = 1;  // 1-based
  std::chrono::milliseconds delay{0};
};

class FaultInjectingCommunicator final : public CommunicatorWrapper {
 public:
  // Takes ownership of `inner`. Thread-safety as the Communicator contract.
  FaultInjectingCommunicator(std::unique_ptr<Communicator> inner, Fault fault)
      : CommunicatorWrapper(std::move(inner)), fault_(fault) {}

  std::string_view backend() const override { return "fault"; }

  void all_gather(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override;
  void reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override;
  void all_reduce(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override;
  void broadcast(void* buffer, std::size_t count, DType dtype, int root, device::Stream& stream) override;
  Status barrier() override;
  Status all_reduce_host(std::span<double> values) override;

  // Calls made so far (including swallowed and failed ones).
  std::uint64_t calls() const { return calls_.load(); }

 private:
  enum class Action { kForward, kDelayThenForward, kFail, kSwallow };
  // Counts the call and decides what happens to it; `status` is set for kFail.
  Action next(const char* op, Status& status);
  // Runs a stream collective per `action`: `forward` enqueues the real call.
  template <typename Forward>
  void stream_call(const char* op, device::Stream& stream, Forward&& forward);
  // Runs a host-side call (barrier, all_reduce_host) per the injected fault: `forward` makes the real call.
  template <typename Forward>
  Status host_call(const char* op, Forward&& forward);

  Fault fault_;
  std::atomic<std::uint64_t> calls_{0};
  std::mutex mutex_;
  Status first_error_;
  bool disappeared_ = false;
};

}  // namespace zinf::comm
