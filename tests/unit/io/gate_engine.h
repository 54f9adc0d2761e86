// GateEngine (tests): an IoEngine over a real one that records every op handed to it, in order, and
// completes nothing while closed — so a test can look at the swap store while an operation is
// certainly in flight, and at the order the store chose, without depending on timing. Completions
// reach the store in the order the ops were submitted (the inner engine's thread pool finishes them
// in any order; a loaded machine made a test of the store's order flaky). It can also refuse
// buffer registration, as a locked-memory limit does.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "libengine/io/io_engine.h"

namespace zinf::testing {

using io::IoEngine;
using io::IoOp;
using io::IoOpKind;
using io::IoResult;

struct SubmittedOp {
  IoOpKind kind;
  std::uint64_t offset;
  int buffer_index = -1;  // the registered buffer the op names, -1: none
};

class GateEngine final : public IoEngine {
 public:
  GateEngine(std::unique_ptr<IoEngine> inner, bool open) : inner_(std::move(inner)), open_(open) {}
  // Lets completions through (true) or holds them back (false); takes effect at once.
  void set_open(bool open) {
    open_ = open;
    inner_->wake();
  }
  void open() { set_open(true); }
  std::vector<SubmittedOp> log() const {
    std::lock_guard lock(mutex_);
    return log_;
  }
  std::size_t logged() const {
    std::lock_guard lock(mutex_);
    return log_.size();
  }
  void clear_log() {
    std::lock_guard lock(mutex_);
    log_.clear();
  }

  std::string_view name() const override { return "gate"; }
  unsigned queue_depth() const override { return inner_->queue_depth(); }
  Status register_files(std::span<const int> fds) override { return inner_->register_files(fds); }
  // register_buffers() of more than `buffers` buffers fails, as a locked-memory limit makes it.
  void limit_registration(std::size_t buffers) { registration_limit_ = buffers; }
  Status register_buffers(std::span<const iovec> buffers) override {
    if (buffers.size() > registration_limit_) {
      return Status::io_error("io_uring_register_buffers: Cannot allocate memory (ENOMEM)");
    }
    return inner_->register_buffers(buffers);
  }
  Status submit(std::span<const IoOp> ops) override {
    {
      std::lock_guard lock(mutex_);
      for (const IoOp& op : ops) log_.push_back({op.kind, op.offset, op.buffer_index});
    }
    Status submitted = inner_->submit(ops);
    // The reaping thread is the submitting one (the store's I/O thread): no lock for the order.
    if (submitted.is_ok()) {
      for (const IoOp& op : ops) submitted_.push_back(op.tag);
    }
    return submitted;
  }
  Result<std::size_t> reap(std::size_t min_results, std::chrono::milliseconds timeout,
                           std::vector<IoResult>& out) override {
    if (!open_) {
      std::this_thread::sleep_for(std::min(timeout, std::chrono::milliseconds(1)));
      return std::size_t{0};
    }
    // Hand out the longest prefix of the submission order that has completed; when none has, wait
    // for the inner engine as the caller asked.
    std::size_t given = hand_out(out);
    if (given > 0) return given;
    std::vector<IoResult> inner;
    Result<std::size_t> reaped = inner_->reap(min_results, timeout, inner);
    if (!reaped.is_ok()) return reaped;
    for (const IoResult& r : inner) done_.emplace(r.tag, r);
    return hand_out(out);
  }
  // Held back for order count as in flight.
  unsigned in_flight() const override { return inner_->in_flight() + static_cast<unsigned>(done_.size()); }
  void wake() override { inner_->wake(); }

 private:
  std::size_t hand_out(std::vector<IoResult>& out) {
    std::size_t given = 0;
    while (!submitted_.empty()) {
      auto it = done_.find(submitted_.front());
      if (it == done_.end()) break;
      out.push_back(it->second);
      done_.erase(it);
      submitted_.pop_front();
      ++given;
    }
    return given;
  }

  std::unique_ptr<IoEngine> inner_;
  std::atomic<bool> open_;
  std::atomic<std::size_t> registration_limit_{~std::size_t{0}};
  mutable std::mutex mutex_;
  std::vector<SubmittedOp> log_;
  std::deque<std::uint64_t> submitted_;               // tags in submission order, not yet handed out
  std::unordered_map<std::uint64_t, IoResult> done_;  // completed, waiting for an earlier op
};

}  // namespace zinf::testing
