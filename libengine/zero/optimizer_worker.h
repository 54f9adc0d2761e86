// OptimizerWorker: one background thread that runs the optimizer's arithmetic for one sub-group of
// states at a time, so the training thread can go on with the backward pass (and with the I/O and
// copies of the other sub-groups) while CPU Adam steps the sub-group whose gradients are final —
// the overlap of PartitionedStates (zero.overlap_optimizer). On a GPU the CPU is otherwise idle
// during the backward pass; on the CPU backend the two share the cores, and what the overlap hides
// is the waiting for NVMe.
//
// On the CPU backend the jobs run on the caller instead (Placement::kOnCaller): the compute's own
// OpenMP team already has every core, and a second thread running OpenMP kernels makes a second
// team. libgomp then counts more threads than cores and cuts every team's spin-wait before sleeping
// to almost nothing (its "throttled" spin count), so the compute team's threads sleep and are woken
// with a futex between every two parallel regions of the forward and backward passes: measured on
// scenarios/offload-nvme.json, 190 sleeps of the compute team's thread per step and forward+backward
// 74 ms against ZeRO-0's 61 ms, where the engine did no other extra work. On the caller the step
// uses the compute team and all cores, between the backward pass's operators; what the pipeline
// still overlaps there is the NVMe and copy traffic, which was all the CPU backend could hide.
//
// What it is not: a thread pool or a queue. One job at a time; the caller decides what runs when
// and does every transfer itself (the NVMe store, the coordinator and the device streams are not
// thread-safe and stay on the training thread).
//
// Thread-safety: submit(), idle(), wait() and busy_seconds() are called from one thread (the
// owner's). A job runs on the worker thread; everything it touches must be left alone by the owner
// until idle() returns true or wait() returns — that is the happens-before edge.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace zinf::zero {

class OptimizerWorker {
 public:
  enum class Placement {
    kThread,    // a thread of its own (a GPU does the compute; the CPU cores are free for Adam)
    kOnCaller,  // submit() runs the job at once on the calling thread (the CPU backend; see above)
  };
  explicit OptimizerWorker(Placement placement = Placement::kThread);
  // Waits for the job in progress, then stops the thread.
  ~OptimizerWorker();
  OptimizerWorker(const OptimizerWorker&) = delete;
  OptimizerWorker& operator=(const OptimizerWorker&) = delete;

  // Starts `job` on the worker thread (kOnCaller: runs it to the end before returning). Precondition:
  // idle(). `job` must not throw (the engine's kernels do not); it reports nothing back except
  // through the memory it writes.
  void submit(std::function<void()> job);
  // True when no job is running: the last job's writes are visible to the caller.
  bool idle();
  // Blocks until no job is running.
  void wait();
  // Seconds the worker spent running jobs since it was made.
  double busy_seconds();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;  // a job arrived, or stop
  std::condition_variable done_;  // the job finished
  std::function<void()> job_;
  bool running_ = false;  // a job is submitted and not finished
  bool stop_ = false;
  double busy_seconds_ = 0;
  std::thread thread_;  // last: started after the members it reads; none with kOnCaller
};

}  // namespace zinf::zero
