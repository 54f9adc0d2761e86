// MpiCommunicator (mpi_communicator.h): blocking MPI collectives watched by a watchdog thread (or
// non-blocking ones polled against a deadline), small ones run on the caller when the stream is
// idle, the bf16/fp16 sum operators, lost-peer checks and the roll call that names silent ranks.
#include "libengine/comm/mpi_communicator.h"

#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "libengine/comm/half_sum.h"
#include "libengine/comm/mpi_runtime.h"
#include "libengine/core/check.h"
#include "libengine/core/thread_name.h"
#include "libengine/core/units.h"

namespace zinf::comm {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRollCallTag = 7101;
constexpr int kRollAnswerTag = 7102;
constexpr int kAliveToken = 1;  // what a roll-call answer carries; never written, so concurrent sends may read it
// How often a wait looks at this node's peers in /proc and answers roll calls: often enough that a
// killed peer is reported within a blink, rarely enough to cost nothing next to MPI_Test.
constexpr auto kPeerCheckPeriod = std::chrono::milliseconds(50);
// MPI_Test calls before a wait starts yielding the core (a few tens of microseconds).
constexpr std::uint64_t kSpinPolls = 1000;

// MPI user operators: the 16-bit sums of half_sum.h.
extern "C" void zinf_mpi_bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  half_sum_in_place(DType::kBF16, in, inout, static_cast<std::size_t>(*len));
}
extern "C" void zinf_mpi_f16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  half_sum_in_place(DType::kF16, in, inout, static_cast<std::size_t>(*len));
}

MPI_Datatype mpi_type(DType dtype) { return dtype == DType::kF32 ? MPI_FLOAT : MPI_UINT16_T; }

std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", rc);
  return std::string(text, static_cast<std::size_t>(len));
}

// What a wait is for, formatted only when it fails: "all_reduce #12 (4.00 MiB bf16)".
struct Label {
  const char* op;
  std::uint64_t call;
  std::size_t bytes;
  const char* dtype;
};

// The stream collective blocked in MPI now, for the watchdog: written by whichever thread runs it
// (the stream's, or the caller's for a small one), read by the watchdog — lock-free, so a small
// collective pays a few plain stores for it rather than two mutex round trips (its whole call is
// 1.5-2.5 us). A sequence lock of atomics: `call` is 0 between collectives; the reader takes the
// fields between two loads of `call` and keeps them only when both saw the same call. The fields
// are stored with release and loaded with acquire (no fences: ThreadSanitizer does not model
// them), so a reader that sees a field of the next collective also sees the 0 stored before it.
class InFlight {
 public:
  void begin(const Label& label) {
    op_.store(label.op, std::memory_order_release);
    bytes_.store(label.bytes, std::memory_order_release);
    dtype_.store(label.dtype, std::memory_order_release);
    call_.store(label.call, std::memory_order_release);
  }
  void end() { call_.store(0, std::memory_order_release); }
  // The collective in flight now, if any (a consistent copy).
  std::optional<Label> read() const {
    const std::uint64_t call = call_.load(std::memory_order_acquire);
    if (call == 0) return std::nullopt;
    const Label label{op_.load(std::memory_order_acquire), call, bytes_.load(std::memory_order_acquire),
                      dtype_.load(std::memory_order_acquire)};
    if (call_.load(std::memory_order_acquire) != call) return std::nullopt;  // it ended meanwhile
    return label;
  }
  // Whether collective `call` is still in flight.
  bool still(std::uint64_t call) const { return call_.load(std::memory_order_acquire) == call; }

 private:
  std::atomic<std::uint64_t> call_{0};  // stream call numbers start at 1
  std::atomic<const char*> op_{""};
  std::atomic<std::size_t> bytes_{0};
  std::atomic<const char*> dtype_{""};
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MpiRuntime& runtime, const CommOptions& options) : runtime_(runtime), options_(options) {}

  Status init() {
    {
      auto lock = runtime_.lock();
      for (MPI_Comm* comm : {&stream_comm_, &host_comm_, &probe_comm_}) {
        const int rc = MPI_Comm_dup(MPI_COMM_WORLD, comm);
        if (rc != MPI_SUCCESS) return Status::internal("MPI: MPI_Comm_dup failed: " + mpi_error_text(rc));
        MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN);
      }
      if (MPI_Op_create(zinf_mpi_bf16_sum, 1, &bf16_sum_) != MPI_SUCCESS ||
          MPI_Op_create(zinf_mpi_f16_sum, 1, &f16_sum_) != MPI_SUCCESS) {
        return Status::internal("MPI: MPI_Op_create for the bf16/fp16 sums failed");
      }
    }
    // Blocking collectives need a second thread that may call MPI while one waits in MPI.
    blocking_ = !runtime_.serialized() && world_size() > 1;
    if (blocking_) {
      watchdog_ = std::thread([this] {
        name_this_thread("zinf-mpi-watch");
        watch();
      });
    }
    return Status::ok();
  }

  ~MpiCommunicator() override {
    if (watchdog_.joinable()) {
      {
        std::lock_guard lock(watch_mutex_);
        stopping_ = true;
      }
      watch_cv_.notify_all();
      watchdog_.join();
    }
    // A broken communicator has requests that never complete: freeing what they use would be
    // undefined, and MPI ends with MPI_Abort anyway (mpi_runtime.h).
    if (broken()) return;
    auto lock = runtime_.lock();
    for (MPI_Op* op : {&bf16_sum_, &f16_sum_}) {
      if (*op != MPI_OP_NULL) MPI_Op_free(op);
    }
    for (MPI_Comm* comm : {&stream_comm_, &host_comm_, &probe_comm_}) {
      if (*comm != MPI_COMM_NULL) MPI_Comm_free(comm);
    }
  }

  std::string_view backend() const override { return "mpi"; }
  int rank() const override { return runtime_.world_rank(); }
  int world_size() const override { return runtime_.world_size(); }
  int local_rank() const override { return runtime_.local_rank(); }
  int local_size() const override { return runtime_.local_size(); }

  void all_gather(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override {
    const Label label{"all_gather", ++stream_calls_, count * dtype_size_bytes(dtype), dtype_name(dtype).data()};
    submit(
        label.bytes * static_cast<std::size_t>(world_size()), options_.inline_max_bytes, stream, [=, this]() -> Status {
          ZINF_RETURN_IF_ERROR(check_call(label, count));
          if (count == 0) return Status::ok();
          const std::size_t block_bytes = count * dtype_size_bytes(dtype);
          const void* source = send == static_cast<const char*>(recv) + static_cast<std::size_t>(rank()) * block_bytes
                                   ? MPI_IN_PLACE
                                   : send;
          const int n = static_cast<int>(count);
          return run_stream(
              label, [&] { return MPI_Allgather(source, n, mpi_type(dtype), recv, n, mpi_type(dtype), stream_comm_); },
              [&](MPI_Request* request) {
                return MPI_Iallgather(source, n, mpi_type(dtype), recv, n, mpi_type(dtype), stream_comm_, request);
              });
        });
  }

  void reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override {
    const Label label{"reduce_scatter", ++stream_calls_, count * dtype_size_bytes(dtype), dtype_name(dtype).data()};
    submit(
        label.bytes * static_cast<std::size_t>(world_size()), options_.inline_max_reduce_bytes, stream,
        [=, this]() -> Status {
          ZINF_RETURN_IF_ERROR(check_call(label, count));
          if (count == 0) return Status::ok();
          const std::size_t block_bytes = count * dtype_size_bytes(dtype);
          // MPI forbids recv inside send; the in-place form the contract allows (recv is this rank's
          // block of send) goes through a scratch block.
          const bool aliased = recv == static_cast<const char*>(send) + static_cast<std::size_t>(rank()) * block_bytes;
          std::vector<std::byte> scratch(aliased ? block_bytes : 0);
          void* target = aliased ? static_cast<void*>(scratch.data()) : recv;
          const int n = static_cast<int>(count);
          Status status = run_stream(
              label,
              [&] { return MPI_Reduce_scatter_block(send, target, n, mpi_type(dtype), sum_op(dtype), stream_comm_); },
              [&](MPI_Request* request) {
                return MPI_Ireduce_scatter_block(send, target, n, mpi_type(dtype), sum_op(dtype), stream_comm_,
                                                 request);
              });
          if (status.is_ok() && aliased) std::memcpy(recv, scratch.data(), block_bytes);
          return status;
        });
  }

  void all_reduce(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override {
    const Label label{"all_reduce", ++stream_calls_, count * dtype_size_bytes(dtype), dtype_name(dtype).data()};
    submit(label.bytes, options_.inline_max_reduce_bytes, stream, [=, this]() -> Status {
      ZINF_RETURN_IF_ERROR(check_call(label, count));
      if (count == 0) return Status::ok();
      const void* source = send == recv ? MPI_IN_PLACE : send;
      const int n = static_cast<int>(count);
      return run_stream(
          label, [&] { return MPI_Allreduce(source, recv, n, mpi_type(dtype), sum_op(dtype), stream_comm_); },
          [&](MPI_Request* request) {
            return MPI_Iallreduce(source, recv, n, mpi_type(dtype), sum_op(dtype), stream_comm_, request);
          });
    });
  }

  void broadcast(void* buffer, std::size_t count, DType dtype, int root, device::Stream& stream) override {
    ZINF_CHECK(root >= 0 && root < world_size(), "MpiCommunicator::broadcast: root is not a rank of the world");
    const Label label{"broadcast", ++stream_calls_, count * dtype_size_bytes(dtype), dtype_name(dtype).data()};
    submit(label.bytes, options_.inline_max_bytes, stream, [=, this]() -> Status {
      ZINF_RETURN_IF_ERROR(check_call(label, count));
      if (count == 0) return Status::ok();
      const int n = static_cast<int>(count);
      return run_stream(
          label, [&] { return MPI_Bcast(buffer, n, mpi_type(dtype), root, stream_comm_); },
          [&](MPI_Request* request) { return MPI_Ibcast(buffer, n, mpi_type(dtype), root, stream_comm_, request); });
    });
  }

  Status barrier() override {
    const Label label{"barrier", ++host_calls_, 0, ""};
    ZINF_RETURN_IF_ERROR(check_call(label, 0));
    return run(label, [&](MPI_Request* request) { return MPI_Ibarrier(host_comm_, request); });
  }

  Status all_reduce_host(std::span<double> values) override {
    const Label label{"all_reduce_host", ++host_calls_, values.size_bytes(), "fp64"};
    ZINF_RETURN_IF_ERROR(check_call(label, values.size() * static_cast<std::size_t>(world_size())));
    if (values.empty()) return Status::ok();
    // Gathered and summed here in rank order, so every rank adds the same numbers in the same order
    // and gets the same bits (MPI_Allreduce leaves the order to the algorithm).
    std::vector<double> all(values.size() * static_cast<std::size_t>(world_size()));
    const int n = static_cast<int>(values.size());
    ZINF_RETURN_IF_ERROR(run(label, [&](MPI_Request* request) {
      return MPI_Iallgather(values.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, host_comm_, request);
    }));
    for (std::size_t i = 0; i < values.size(); ++i) {
      double sum = 0.0;
      for (std::size_t r = 0; r < static_cast<std::size_t>(world_size()); ++r) sum += all[r * values.size() + i];
      values[i] = sum;
    }
    return Status::ok();
  }

 private:
  MPI_Op sum_op(DType dtype) const {
    return dtype == DType::kF32 ? MPI_SUM : dtype == DType::kBF16 ? bf16_sum_ : f16_sum_;
  }

  bool broken() const { return broken_.load(std::memory_order_acquire); }

  // A stream collective: `work` on the calling thread when it has at most `inline_max_bytes` and
  // `stream` is idle (communicator.h), else enqueued. Either way run_stream() below puts it under
  // the watchdog.
  template <typename Work>
  void submit(std::size_t bytes, std::size_t inline_max_bytes, device::Stream& stream, Work&& work) {
    if (bytes <= inline_max_bytes && stream.run_if_idle(work)) return;
    stream.enqueue(std::forward<Work>(work));
  }

  std::string describe(const Label& label) const {
    std::string what = fmt::format("{} #{}", label.op, label.call);
    if (label.dtype[0] != '\0') {
      what += fmt::format(" ({} {})", format_bytes(static_cast<double>(label.bytes)), label.dtype);
    }
    return fmt::format("{} on rank {} of {}", what, rank(), world_size());
  }

  // The first error, or a count MPI cannot express.
  Status check_call(const Label& label, std::size_t count) const {
    if (broken()) {
      std::lock_guard lock(error_mutex_);
      return first_error_;
    }
    if (count > static_cast<std::size_t>(INT_MAX)) {
      return Status::invalid_argument(
          fmt::format("{}: {} elements per rank exceed MPI's int count ({}); use smaller buckets", describe(label),
                      count, INT_MAX));
    }
    return Status::ok();
  }

  // Records the first error and breaks the communicator; returns the error.
  Status fail(Status status) {
    runtime_.mark_broken();
    std::lock_guard lock(error_mutex_);
    if (first_error_.is_ok()) first_error_ = std::move(status);
    broken_.store(true, std::memory_order_release);
    return first_error_;
  }

  // A stream collective: the blocking call (`block`) watched by the watchdog thread where MPI allows
  // a second thread in MPI (MPI_THREAD_MULTIPLE), else the non-blocking one (`start`) polled.
  template <typename Block, typename Start>
  Status run_stream(const Label& label, Block&& block, Start&& start) {
    if (!blocking_) return run(label, std::forward<Start>(start));
    in_flight_.begin(label);
    const int rc = block();
    in_flight_.end();
    // The watchdog's MPI calls may have progressed this collective (MPI_THREAD_MULTIPLE) and copied
    // into its buffers. Open MPI orders those copies before the completion this thread saw; but
    // ThreadSanitizer cannot see Open MPI's own ordering and would report (suppressed, but slowly,
    // per element) a race on the buffer, so under it the copies are ordered once more: the watchdog
    // holds progress_mutex_ while in MPI. Elsewhere the lock is left out: ~20 ns of a 1.5 us call.
#if defined(__SANITIZE_THREAD__)
    { std::lock_guard progress(progress_mutex_); }
#endif
    if (rc != MPI_SUCCESS)
      return fail(Status::internal(fmt::format("{}: MPI: {}", describe(label), mpi_error_text(rc))));
    return Status::ok();
  }

  // The watchdog of the blocking collectives: every kPeerCheckPeriod while one is in flight (on
  // the stream's thread or the caller's) it answers roll calls, looks for lost peers on this node
  // and checks the deadline; a lost peer or the timeout ends the process with the error line
  // (end_blocked_process): a blocking MPI call cannot be cancelled, and its peers are stopped by
  // the launcher when this rank exits. A collective's clock starts when the watchdog first sees it
  // (so the running thread reads no clock): the timeout fires up to kPeerCheckPeriod late.
  void watch() {
    std::uint64_t seen_call = 0;
    Clock::time_point since;
    std::unique_lock lock(watch_mutex_);
    while (!stopping_) {
      watch_cv_.wait_for(lock, kPeerCheckPeriod);
      if (stopping_) continue;
      const std::optional<Label> in_flight = in_flight_.read();
      if (!in_flight) continue;
      const Label label = *in_flight;
      if (label.call != seen_call) {
        seen_call = label.call;
        since = Clock::now();
      }
      lock.unlock();
      std::string error;
      {
        std::lock_guard progress(progress_mutex_);  // inside MPI here (run_stream)
        // Roll calls come only from a peer that waited out its timeout, and it waits at least 500 ms
        // for the answer: a collective in flight for under one period needs none, and leaving MPI
        // alone then keeps the watchdog from progressing (and contending on) short collectives.
        if (Clock::now() - since >= kPeerCheckPeriod) answer_roll_calls();
        const std::string gone = runtime_.lost_local_peers(false);
        if (!gone.empty()) {
          error = fmt::format("{}: lost {}", describe(label), gone);
        } else if (Clock::now() - since >= options_.timeout) {
          const std::string silent = roll_call();
          const std::string local = runtime_.lost_local_peers(true);
          error = fmt::format("{}: timed out after {} waiting for its peers (CommOptions timeout); {}{}",
                              describe(label), format_duration(std::chrono::duration<double>(options_.timeout).count()),
                              silent, local.empty() ? "" : "; " + local);
        }
      }
      lock.lock();
      // Still the same call, still blocked: nothing else will ever end it.
      if (!error.empty() && in_flight_.still(label.call)) end_blocked_process(error);
    }
  }

  [[noreturn]] void end_blocked_process(const std::string& error) {
    runtime_.mark_broken();
    const std::string line = "error: " + error + "\n";
    std::fflush(nullptr);
    ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
    ::_exit(1);
  }

  // Starts a non-blocking call (`start` fills the request) and waits for it within the timeout.
  template <typename Start>
  Status run(const Label& label, Start&& start) {
    MPI_Request request = MPI_REQUEST_NULL;
    int rc = MPI_SUCCESS;
    {
      auto lock = runtime_.lock();
      rc = start(&request);
    }
    if (rc != MPI_SUCCESS)
      return fail(Status::internal(fmt::format("{}: MPI: {}", describe(label), mpi_error_text(rc))));
    return wait(label, request);
  }

  Status wait(const Label& label, MPI_Request& request) {
    const Clock::time_point start = Clock::now();
    const Clock::time_point deadline = start + options_.timeout;
    Clock::time_point next_check = start + kPeerCheckPeriod;
    std::uint64_t polls = 0;
    for (;;) {
      int done = 0;
      int rc = MPI_SUCCESS;
      {
        auto lock = runtime_.lock();
        rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      }
      if (rc != MPI_SUCCESS) {
        return fail(Status::internal(fmt::format("{}: MPI: {}", describe(label), mpi_error_text(rc))));
      }
      if (done != 0) return Status::ok();
      const Clock::time_point now = Clock::now();
      if (now >= next_check) {
        next_check = now + kPeerCheckPeriod;
        answer_roll_calls();
        const std::string gone = runtime_.lost_local_peers(false);
        if (!gone.empty()) return fail(Status::internal(fmt::format("{}: lost {}", describe(label), gone)));
      }
      if (now >= deadline) {
        const std::string silent = roll_call();
        const std::string local = runtime_.lost_local_peers(true);
        return fail(Status::internal(
            fmt::format("{}: timed out after {} waiting for its peers (CommOptions timeout); {}{}", describe(label),
                        format_duration(std::chrono::duration<double>(options_.timeout).count()), silent,
                        local.empty() ? "" : "; " + local)));
      }
      // Spin first, as MPI's own blocking wait does, then give the core away: a rank waiting
      // long for a peer that shares its core (more ranks than cores) must let the peer run.
      if (++polls > kSpinPolls) sched_yield();
    }
  }

  // Answers every roll call that arrived (from any peer, from either thread's wait).
  void answer_roll_calls() {
    for (;;) {
      auto lock = runtime_.lock();
      int flag = 0;
      MPI_Message message = MPI_MESSAGE_NULL;
      MPI_Status status;
      if (MPI_Improbe(MPI_ANY_SOURCE, kRollCallTag, probe_comm_, &flag, &message, &status) != MPI_SUCCESS ||
          flag == 0) {
        return;
      }
      int token = 0;
      MPI_Mrecv(&token, 1, MPI_INT, &message, MPI_STATUS_IGNORE);
      MPI_Request reply = MPI_REQUEST_NULL;
      if (MPI_Isend(&kAliveToken, 1, MPI_INT, status.MPI_SOURCE, kRollAnswerTag, probe_comm_, &reply) == MPI_SUCCESS) {
        MPI_Request_free(&reply);
      }
    }
  }

  // Asks every peer whether it is there and waits a grace period for the answers; returns which
  // ranks stayed silent, as text. Peers answer from inside their own waits, so a silent rank is one
  // that is not in any collective: hung, lost, or far behind.
  std::string roll_call() {
    const int world = world_size();
    const int me = rank();
    const auto grace = std::clamp<std::chrono::milliseconds>(options_.timeout / 10, std::chrono::milliseconds(500),
                                                             std::chrono::milliseconds(10000));
    std::vector<int> answers(static_cast<std::size_t>(world), 0);
    std::vector<MPI_Request> pending(static_cast<std::size_t>(world), MPI_REQUEST_NULL);
    {
      auto lock = runtime_.lock();
      for (int peer = 0; peer < world; ++peer) {
        if (peer == me) continue;
        MPI_Request ask = MPI_REQUEST_NULL;
        if (MPI_Isend(&kAliveToken, 1, MPI_INT, peer, kRollCallTag, probe_comm_, &ask) == MPI_SUCCESS) {
          MPI_Request_free(&ask);
        }
        MPI_Irecv(&answers[static_cast<std::size_t>(peer)], 1, MPI_INT, peer, kRollAnswerTag, probe_comm_,
                  &pending[static_cast<std::size_t>(peer)]);
      }
    }
    const Clock::time_point until = Clock::now() + grace;
    std::vector<int> silent;
    for (;;) {
      silent.clear();
      for (int peer = 0; peer < world; ++peer) {
        MPI_Request& request = pending[static_cast<std::size_t>(peer)];
        if (request == MPI_REQUEST_NULL) continue;
        int done = 0;
        auto lock = runtime_.lock();
        MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        if (done == 0) silent.push_back(peer);
      }
      if (silent.empty() || Clock::now() >= until) break;
      answer_roll_calls();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    {
      // The receive buffers (`answers`) die with this frame: a late answer must not land there.
      auto lock = runtime_.lock();
      for (MPI_Request& request : pending) {
        if (request == MPI_REQUEST_NULL) continue;
        MPI_Cancel(&request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
      }
    }
    const std::string grace_text = format_duration(std::chrono::duration<double>(grace).count());
    if (silent.empty()) {
      return fmt::format(
          "every peer answered a roll call within {}, so they wait in another collective "
          "(the ranks called collectives in different orders)",
          grace_text);
    }
    return fmt::format("rank{} {} did not answer a roll call within {} (hung or lost)", silent.size() == 1 ? "" : "s",
                       fmt::join(silent, ", "), grace_text);
  }

  MpiRuntime& runtime_;
  CommOptions options_;
  MPI_Comm stream_comm_ = MPI_COMM_NULL;  // the stream collectives, in stream order
  MPI_Comm host_comm_ = MPI_COMM_NULL;    // barrier() and all_reduce_host(), on the calling thread
  MPI_Comm probe_comm_ = MPI_COMM_NULL;   // roll calls, from either thread
  MPI_Op bf16_sum_ = MPI_OP_NULL;
  MPI_Op f16_sum_ = MPI_OP_NULL;
  std::uint64_t stream_calls_ = 0;  // counted by the calling thread
  std::uint64_t host_calls_ = 0;
  mutable std::mutex error_mutex_;
  Status first_error_;
  std::atomic<bool> broken_{false};  // first_error_ is set: read without the lock on every call
  // Blocking stream collectives (MPI_THREAD_MULTIPLE, world > 1) and their watchdog.
  bool blocking_ = false;
  InFlight in_flight_;         // the stream collective blocked in MPI now
  std::mutex progress_mutex_;  // held by the watchdog while it calls MPI (run_stream says why)
  std::mutex watch_mutex_;     // stopping_, and the watchdog's sleep
  std::condition_variable watch_cv_;
  bool stopping_ = false;
  std::thread watchdog_;  // last: started by init() once everything it reads exists
};

}  // namespace

Result<std::unique_ptr<Communicator>> make_mpi_communicator(device::Device& device, const CommOptions& options) {
  if (device.kind() != device::DeviceKind::kCpu) {
    return Status::invalid_argument(fmt::format(
        "comm: the MPI communicator takes host buffers, but the device is {}; device buffers go through NCCL",
        device.describe()));
  }
  return make_mpi_host_communicator(options);
}

Result<std::unique_ptr<Communicator>> make_mpi_host_communicator(const CommOptions& options) {
  ZINF_ASSIGN_OR_RETURN(MpiRuntime * runtime, MpiRuntime::acquire());
  auto communicator = std::make_unique<MpiCommunicator>(*runtime, options);
  ZINF_RETURN_IF_ERROR(communicator->init());
  return std::unique_ptr<Communicator>(std::move(communicator));
}

}  // namespace zinf::comm
