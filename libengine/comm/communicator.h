// Communicator: the collectives data-parallel training needs — all-gather, reduce-scatter (sum),
// all-reduce (sum), broadcast and barrier — over flat buffers, asynchronous on a device stream.
// It is what ZeRO's partitioned states use to gather parameter slices and to reduce gradient slices
// across ranks; it is not a transport: the implementations wrap OpenMPI (CPU buffers, and the
// bootstrap), NCCL (device buffers) and, for one process, plain copies (local_communicator.h).
//
// Ordering: every rank makes the same collective calls in the same order with the same counts,
// dtypes and roots (as MPI and NCCL require). A call enqueues the collective on `stream`: it starts
// after the work enqueued on `stream` before it and has finished when `stream` passes that point
// (record an Event after the call to wait for it). The buffers must stay valid and unmodified
// (send) / untouched (recv) until then. Which memory a buffer may be in is the implementation's:
// host memory for MPI and the CPU backend's device memory, CUDA device memory for NCCL.
//
// Small collectives may run on the calling thread: one of at most CommOptions::inline_max_bytes
// (all-gathers, broadcasts) or inline_max_reduce_bytes (reductions) issued while `stream` is idle
// (nothing before it queued or running: Stream::run_if_idle) may run at once, the call returning
// once it has finished — once the peers reached it. Stream order is
// the same either way, so code that orders later work after the collective with an Event is right
// in both cases; what changes is that the call may block until the peers make the matching call.
// So every rank must reach its matching call without waiting for this rank's later calls — which
// holds when every rank makes the same calls, stream collectives and barrier()/all_reduce_host()
// alike, in the same order (as MPI requires anyway). Larger collectives, and any collective issued
// behind queued work, are enqueued and overlap whatever the caller does next.
//
// Failure: a lost or hung peer, a timeout or a transport error surfaces as the Status of
// stream.synchronize() (and of barrier()), naming the collective, this rank and the cause — never a
// silent hang: implementations bound every wait by CommOptions::timeout. After a failure the
// communicator is broken: every later call fails at once with the first error.
//
// Thread-safety: one thread issues the calls (the training loop's); the collectives run on the
// stream's worker, or on that thread (above). rank()/world_size()/... are constant and safe from
// any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <utility>

#include "libengine/core/dtype.h"
#include "libengine/core/status.h"
#include "libengine/device/device.h"

namespace zinf::comm {

// Stream collectives of at most these many bytes may run on the calling thread when their stream
// is idle (above); measured on this project's 2-core machine with 2 ranks (docs/performance.md, `zinf bench
// comm`). Handing a collective to the stream's thread costs 1.5-2 us per call there (a context
// switch each way: mpirun binds each of 2 ranks to one core), up to 5 us at the first call after a
// long idle. All-gathers and broadcasts, 1 MiB: an all_gather takes 1.4 us at 4 KiB, 15 us at
// 512 KiB, 41 us at 1 MiB (queued: 0.87-1.00x of plain MPI) and 130 us at 2 MiB (queued:
// 0.95-0.99x). Reductions, 128 KiB: they take 11-25 us at 64-128 KiB and 40 us from 256 KiB
// (queued: 0.88-1.00x), and above 128 KiB Open MPI's reductions allocate a temporary per call that
// glibc's main arena hands back to the OS after each call when they run on the main thread (the
// next call page-faults it in: a 256 KiB reduce_scatter took 75 us there against 40 us on the
// stream's thread). Gradient buckets (zero.reduce_bucket_bytes, at least 4 MiB unless set) stay
// queued and overlap compute.
inline constexpr std::size_t kDefaultInlineMaxBytes = std::size_t{1} << 20;
inline constexpr std::size_t kDefaultInlineMaxReduceBytes = std::size_t{128} << 10;

struct CommOptions {
  // The longest any collective or barrier may wait for a peer before failing with a clear error.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // The largest all_gather / broadcast, and the largest reduce_scatter / all_reduce, that may run on
  // the calling thread (the larger of its send and receive buffers on this rank, in bytes); 0: every
  // one is enqueued. Honoured by the MPI communicator; NCCL's run on CUDA streams, which have no
  // host thread to skip.
  std::size_t inline_max_bytes = kDefaultInlineMaxBytes;
  std::size_t inline_max_reduce_bytes = kDefaultInlineMaxReduceBytes;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  // "local", "mpi", "nccl" (and "fault" for the fault-injecting wrapper in tests).
  virtual std::string_view backend() const = 0;
  virtual int rank() const = 0;        // 0 .. world_size() - 1
  virtual int world_size() const = 0;  // >= 1
  virtual int local_rank() const = 0;  // among the ranks on this node: picks the GPU, splits the cores
  virtual int local_size() const = 0;

  // recv[r * count, (r + 1) * count) = rank r's send[0, count), on every rank. `send` may alias
  // recv + rank() * count (in place).
  virtual void all_gather(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) = 0;
  // recv[0, count) = sum over ranks r of r's send[rank() * count, (rank() + 1) * count). fp32 sums
  // in fp32; bf16/fp16 add in fp32 and round once per addition. `recv` may alias
  // send + rank() * count.
  virtual void reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) = 0;
  // recv[0, count) = sum over ranks of send[0, count); `send` may equal `recv`.
  virtual void all_reduce(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) = 0;
  // buffer[0, count) on every rank = root's buffer[0, count).
  virtual void broadcast(void* buffer, std::size_t count, DType dtype, int root, device::Stream& stream) = 0;
  // Blocks the calling thread until every rank has entered barrier(); fails after the timeout.
  virtual Status barrier() = 0;
  // Host-side, blocking: values[i] = sum over ranks of values[i], in double precision, identical
  // on every rank (the reduction order is fixed for a given world size). For scalars the engine
  // agrees on — loss sums, gradient norms, token counts — and, with each rank filling only its own
  // block of a world_size()-times larger zeroed vector, to gather per-rank figures. Fails after
  // the timeout like the collectives; `values` is then unspecified.
  virtual Status all_reduce_host(std::span<double> values) = 0;
};

// A Communicator that forwards every call to another one it owns (leveldb's EnvWrapper): a
// decorator (timing, fault injection) derives from it and overrides only the calls it changes.
// Thread-safety and failures are the wrapped communicator's.
class CommunicatorWrapper : public Communicator {
 public:
  // Takes ownership of `inner` (not null).
  explicit CommunicatorWrapper(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}

  std::string_view backend() const override { return inner_->backend(); }
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  int local_rank() const override { return inner_->local_rank(); }
  int local_size() const override { return inner_->local_size(); }
  void all_gather(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override {
    inner_->all_gather(send, recv, count, dtype, stream);
  }
  void reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override {
    inner_->reduce_scatter(send, recv, count, dtype, stream);
  }
  void all_reduce(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override {
    inner_->all_reduce(send, recv, count, dtype, stream);
  }
  void broadcast(void* buffer, std::size_t count, DType dtype, int root, device::Stream& stream) override {
    inner_->broadcast(buffer, count, dtype, root, stream);
  }
  Status barrier() override { return inner_->barrier(); }
  Status all_reduce_host(std::span<double> values) override { return inner_->all_reduce_host(values); }

  Communicator& inner() { return *inner_; }

 protected:
  std::unique_ptr<Communicator> inner_;
};

}  // namespace zinf::comm
