#include "libengine/zero/optimizer_worker.h"

#include <chrono>
#include <utility>

#include "libengine/core/check.h"
#include "libengine/core/thread_name.h"

namespace zinf::zero {

OptimizerWorker::OptimizerWorker(Placement placement) {
  if (placement == Placement::kThread) thread_ = std::thread([this] { run(); });
}

OptimizerWorker::~OptimizerWorker() {
  if (!thread_.joinable()) return;
  {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return !running_; });
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void OptimizerWorker::submit(std::function<void()> job) {
  if (!thread_.joinable()) {
    const auto start = std::chrono::steady_clock::now();
    job();
    busy_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return;
  }
  {
    std::lock_guard lock(mutex_);
    ZINF_CHECK(!running_, "OptimizerWorker::submit: a job is still running");
    job_ = std::move(job);
    running_ = true;
  }
  wake_.notify_one();
}

bool OptimizerWorker::idle() {
  std::lock_guard lock(mutex_);
  return !running_;
}

void OptimizerWorker::wait() {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return !running_; });
}

double OptimizerWorker::busy_seconds() {
  std::lock_guard lock(mutex_);
  return busy_seconds_;
}

void OptimizerWorker::run() {
  name_this_thread("zinf-optimizer");
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || running_; });
    if (stop_) return;
    std::function<void()> job = std::move(job_);
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    job();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    lock.lock();
    busy_seconds_ += seconds;
    running_ = false;
    done_.notify_all();
  }
}

}  // namespace zinf::zero
