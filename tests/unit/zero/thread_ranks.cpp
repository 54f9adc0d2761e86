// ThreadWorld, ThreadCommunicator and run_ranks (thread_ranks.h).
#include "tests/unit/zero/thread_ranks.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "libengine/comm/half_sum.h"
#include "libengine/core/check.h"

namespace zinf::testing {

ThreadWorld::ThreadWorld(int size, std::chrono::milliseconds timeout) : size_(size), timeout_(timeout) {
  ZINF_CHECK(size >= 1, "ThreadWorld: a world has at least one rank");
  for (Channel& channel : channels_) channel.posted.resize(static_cast<std::size_t>(size));
}

void ThreadWorld::abandon(int rank, const std::string& why) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (abandoned_.empty()) abandoned_ = fmt::format("rank {} ended: {}", rank, why);
  changed_.notify_all();
}

Status ThreadWorld::wait(std::unique_lock<std::mutex>& lock, int rank, std::string_view what,
                         const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (!done()) {
    if (!abandoned_.empty()) return Status::internal(fmt::format("rank {}: {}: {}", rank, what, abandoned_));
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && !done()) {
      // The world is broken from now on: the peers fail too rather than wait for this rank.
      abandoned_ = fmt::format("rank {} waited more than {} ms for its peers in {}", rank, timeout_.count(), what);
      changed_.notify_all();
      return Status::internal(abandoned_);
    }
  }
  return Status::ok();
}

Status ThreadWorld::meet(int channel_index, int rank, Buffers mine, std::string_view what,
                         const std::function<void(const std::vector<Buffers>&)>& work) {
  std::unique_lock<std::mutex> lock(mutex_);
  Channel& channel = channels_[channel_index];
  // Arrival: a rank reaches the next meeting only after every rank left this one, so `posted`
  // is not overwritten while a peer still copies it.
  channel.posted[static_cast<std::size_t>(rank)] = mine;
  const std::uint64_t arrivals = channel.arrivals;
  if (++channel.arrived == size_) {
    channel.arrived = 0;
    ++channel.arrivals;
    changed_.notify_all();
  } else {
    ZINF_RETURN_IF_ERROR(wait(lock, rank, what, [&] { return channel.arrivals != arrivals; }));
  }
  const std::vector<Buffers> peers = channel.posted;
  lock.unlock();
  work(peers);
  lock.lock();
  // Departure: nobody's buffers are read any more once every rank is here.
  const std::uint64_t departures = channel.departures;
  if (++channel.departed == size_) {
    channel.departed = 0;
    ++channel.departures;
    changed_.notify_all();
    return Status::ok();
  }
  return wait(lock, rank, what, [&] { return channel.departures != departures; });
}

void ThreadCommunicator::collective(
    std::string_view what, const void* send, void* recv, std::size_t result_bytes, device::Stream& stream,
    std::function<void(const std::vector<ThreadWorld::Buffers>&, std::byte* out)> compute) {
  stream.enqueue([this, what, send, recv, result_bytes, compute = std::move(compute)]() -> Status {
    std::vector<std::byte> out(result_bytes);
    ZINF_RETURN_IF_ERROR(
        world_.meet(0, rank_, {send, recv}, what, [&](const auto& peers) { compute(peers, out.data()); }));
    // Every peer has read this rank's buffers: the result may overwrite them (in-place calls).
    if (result_bytes > 0) std::memcpy(recv, out.data(), result_bytes);
    return Status::ok();
  });
}

namespace {

// out[0, count) = the sum over ranks, in rank order, of each rank's send + offset elements.
void sum_in_rank_order(const std::vector<ThreadWorld::Buffers>& peers, std::size_t offset, std::size_t count,
                       DType dtype, std::byte* out) {
  const std::size_t size = dtype_size_bytes(dtype);
  const auto at = [&](std::size_t rank) { return static_cast<const std::byte*>(peers[rank].send) + offset * size; };
  std::memcpy(out, at(0), count * size);
  for (std::size_t rank = 1; rank < peers.size(); ++rank) {
    if (dtype == DType::kF32) {
      auto* acc = reinterpret_cast<float*>(out);
      const auto* in = reinterpret_cast<const float*>(at(rank));
      for (std::size_t i = 0; i < count; ++i) acc[i] += in[i];
    } else {
      comm::half_sum_in_place(dtype, at(rank), out, count);
    }
  }
}

}  // namespace

void ThreadCommunicator::all_gather(const void* send, void* recv, std::size_t count, DType dtype,
                                    device::Stream& stream) {
  const std::size_t bytes = count * dtype_size_bytes(dtype);
  collective("all_gather", send, recv, bytes * static_cast<std::size_t>(world_size()), stream,
             [bytes](const auto& peers, std::byte* out) {
               for (std::size_t rank = 0; rank < peers.size(); ++rank) {
                 std::memcpy(out + rank * bytes, peers[rank].send, bytes);
               }
             });
}

void ThreadCommunicator::reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype,
                                        device::Stream& stream) {
  const auto offset = static_cast<std::size_t>(rank_) * count;
  collective("reduce_scatter", send, recv, count * dtype_size_bytes(dtype), stream,
             [offset, count, dtype](const auto& peers, std::byte* out) {
               sum_in_rank_order(peers, offset, count, dtype, out);
             });
}

void ThreadCommunicator::all_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                                    device::Stream& stream) {
  collective("all_reduce", send, recv, count * dtype_size_bytes(dtype), stream,
             [count, dtype](const auto& peers, std::byte* out) { sum_in_rank_order(peers, 0, count, dtype, out); });
}

void ThreadCommunicator::broadcast(void* buffer, std::size_t count, DType dtype, int root, device::Stream& stream) {
  ZINF_CHECK(root >= 0 && root < world_size(), "ThreadCommunicator::broadcast: root out of range");
  const std::size_t bytes = count * dtype_size_bytes(dtype);
  collective("broadcast", buffer, buffer, bytes, stream, [bytes, root](const auto& peers, std::byte* out) {
    std::memcpy(out, peers[static_cast<std::size_t>(root)].send, bytes);
  });
}

Status ThreadCommunicator::barrier() {
  return world_.meet(1, rank_, {}, "barrier", [](const auto&) {});
}

Status ThreadCommunicator::all_reduce_host(std::span<double> values) {
  std::vector<double> sum(values.size());
  ZINF_RETURN_IF_ERROR(world_.meet(1, rank_, {values.data(), nullptr}, "all_reduce_host", [&](const auto& peers) {
    for (const ThreadWorld::Buffers& peer : peers) {
      const auto* in = static_cast<const double*>(peer.send);
      for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += in[i];
    }
  }));
  std::copy(sum.begin(), sum.end(), values.begin());
  return Status::ok();
}

namespace {

// Binds the calling thread (and the threads it starts later) to `cpu`.
Status bind_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (::sched_setaffinity(0, sizeof(set), &set) != 0) {
    return Status::invalid_argument(fmt::format("sched_setaffinity to cpu {} failed: {}", cpu, std::strerror(errno)));
  }
  return Status::ok();
}

// The first CPU this process may run on; -1 when it cannot be read.
int first_allowed_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) return cpu;
  }
  return -1;
}

}  // namespace

std::vector<Status> run_ranks(ThreadWorld& world, const std::function<Status(int rank)>& body, bool one_core) {
  std::vector<Status> outcomes(static_cast<std::size_t>(world.size()));
  std::vector<std::thread> threads;
  const int cpu = one_core ? first_allowed_cpu() : -1;
  for (int rank = 0; rank < world.size(); ++rank) {
    threads.emplace_back([&, rank] {
      Status status;
      try {
        if (one_core) status = cpu >= 0 ? bind_to(cpu) : Status::invalid_argument("sched_getaffinity failed");
        if (status.is_ok()) status = body(rank);
      } catch (const std::exception& e) {
        status = Status::internal(fmt::format("rank {} threw: {}", rank, e.what()));
      }
      if (!status.is_ok()) world.abandon(rank, status.message());
      outcomes[static_cast<std::size_t>(rank)] = std::move(status);
    });
  }
  for (std::thread& thread : threads) thread.join();
  return outcomes;
}

}  // namespace zinf::testing
