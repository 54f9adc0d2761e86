// ThreadRanks: several data-parallel ranks in one process, one thread each, for tests that need a
// world larger than one without mpirun — hundreds of short runs cost no process launches, and
// ThreadSanitizer sees every rank's threads (a race between a rank's training thread and its
// stream threads shows up as at several MPI ranks, where the stream threads exist only then).
//
// ThreadWorld is the meeting point of `size` ranks; ThreadCommunicator is one rank's Communicator
// (communicator.h) over it. Every collective meets the peers' matching call (same order on every
// rank, as MPI requires), computes this rank's result into private memory from the peers' buffers,
// waits until every rank has done so (so no peer still reads a buffer when its owner moves on),
// then writes its receive buffer. Sums add the ranks in rank order, so every rank gets the same
// bits; bf16/fp16 add in fp32 and round once per addition (half_sum.h), as the MPI communicator.
// Stream collectives and host calls (barrier, all_reduce_host) meet on separate channels: they are
// issued from different threads of a rank (the collective stream's worker, the training thread).
//
// Failure: a wait longer than the world's timeout, or a peer that ended with an error
// (ThreadWorld::abandon), fails the call with a one-line Status naming the rank and the collective
// — never a hang.
//
// Thread-safety: ThreadWorld is shared by the ranks' threads (internally locked). Each
// ThreadCommunicator follows Communicator's contract (one thread issues the calls).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "libengine/comm/communicator.h"
#include "libengine/core/status.h"

namespace zinf::testing {

class ThreadWorld {
 public:
  explicit ThreadWorld(int size, std::chrono::milliseconds timeout = std::chrono::minutes(2));
  int size() const { return size_; }
  // Rank `rank` ended with an error: every call of a peer waiting for it, now or later, fails at
  // once (naming `why`) instead of waiting for the timeout.
  void abandon(int rank, const std::string& why);

  // One rank's part in one meeting on channel `channel` (0: stream collectives, 1: host calls):
  // publishes `mine`, waits for every rank's, runs `work` with them (indexed by rank), waits until
  // every rank's `work` has returned. `what` names the call in errors.
  struct Buffers {
    const void* send = nullptr;
    void* recv = nullptr;
  };
  Status meet(int channel, int rank, Buffers mine, std::string_view what,
              const std::function<void(const std::vector<Buffers>&)>& work);

 private:
  struct Channel {
    std::vector<Buffers> posted;
    int arrived = 0;
    int departed = 0;
    std::uint64_t arrivals = 0;  // completed arrival phases
    std::uint64_t departures = 0;
  };
  // Waits under `lock` until `done()`, the timeout, or an abandoned peer.
  Status wait(std::unique_lock<std::mutex>& lock, int rank, std::string_view what, const std::function<bool()>& done);

  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  Channel channels_[2];
  std::string abandoned_;  // non-empty: why a rank gave up
};

class ThreadCommunicator final : public comm::Communicator {
 public:
  // Rank `rank` of `world`; `world` must outlive the communicator. Collectives run as host work on
  // the stream they are given, so the buffers must be host memory (the CPU backend's device memory).
  ThreadCommunicator(ThreadWorld& world, int rank) : world_(world), rank_(rank) {}

  std::string_view backend() const override { return "threads"; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_.size(); }
  int local_rank() const override { return rank_; }
  int local_size() const override { return world_.size(); }

  void all_gather(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override;
  void reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override;
  void all_reduce(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override;
  void broadcast(void* buffer, std::size_t count, DType dtype, int root, device::Stream& stream) override;
  Status barrier() override;
  Status all_reduce_host(std::span<double> values) override;

 private:
  // Enqueues one stream collective: `compute(peers, out)` fills `out` (result_bytes) from the peers'
  // buffers; `out` then goes to `recv` once every rank has computed.
  void collective(std::string_view what, const void* send, void* recv, std::size_t result_bytes, device::Stream& stream,
                  std::function<void(const std::vector<ThreadWorld::Buffers>&, std::byte* out)> compute);

  ThreadWorld& world_;
  const int rank_;
};

// Runs `body(rank)` on `world_size` threads at once and joins them; a rank whose body returns an
// error abandons the world (so its peers fail rather than wait). The ranks' Statuses, by rank.
// `one_core`: every rank thread, and every thread it starts (a device's stream threads, the NVMe
// store's I/O thread inherit the binding), runs on one core, the first this process may use — the
// schedule of ranks oversubscribed on a core (`mpirun --oversubscribe`, or a 2-rank job on a
// loaded machine), where a stream's thread waits behind the other threads for its turn and work
// left to it runs late. Fails the ranks (InvalidArgument) when the binding is refused.
std::vector<Status> run_ranks(ThreadWorld& world, const std::function<Status(int rank)>& body, bool one_core = false);

}  // namespace zinf::testing
