// IoQueue: see io_queue.h. Slots are indexed by the engine tag, so a completion finds its transfer
// in O(1) and a remainder reuses the slot (and tag) of the transfer it continues.
#include "libengine/io/io_queue.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "libengine/core/check.h"
#include "libengine/core/errno_text.h"
#include "libengine/core/units.h"

namespace zinf::io {
namespace {

// Backoff before resubmitting after EAGAIN/EINTR: 50 us doubling to 10 ms, so a briefly busy device
// is retried at once and a stuck one is not spun on.
std::chrono::microseconds backoff(unsigned retries) {
  const unsigned shift = std::min(retries, 8u);
  return std::min(std::chrono::microseconds(50) * (1u << shift), std::chrono::microseconds(10'000));
}

}  // namespace

IoQueue::IoQueue(IoEngine& engine, std::vector<std::string> file_names, unsigned max_retries)
    : engine_(engine), file_names_(std::move(file_names)), max_retries_(max_retries) {}

void IoQueue::push(const IoTransfer& transfer) {
  ZINF_CHECK(transfer.length > 0 && transfer.length < (1ull << 31), "IoQueue: transfer length out of range");
  std::uint32_t slot = 0;
  if (free_slots_.empty()) {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  slots_[slot] = Active{transfer, 0, 0, {}};
  backlog_.push_back(slot);
}

std::string IoQueue::describe(const Active& active) const {
  const IoTransfer& t = active.transfer;
  const std::string file = t.file_index >= 0 && static_cast<std::size_t>(t.file_index) < file_names_.size()
                               ? file_names_[static_cast<std::size_t>(t.file_index)]
                               : fmt::format("file #{}", t.file_index);
  return fmt::format("{} of {} at offset {} in {}", t.kind == IoOpKind::kRead ? "read" : "write",
                     format_bytes(static_cast<double>(t.length)), t.offset + active.moved, file);
}

Status IoQueue::submit_backlog() {
  const unsigned depth = engine_.queue_depth();
  const unsigned busy = engine_.in_flight();
  if (busy >= depth || backlog_.empty()) return Status::ok();
  std::size_t room = depth - busy;
  const Clock::time_point now = Clock::now();
  ops_.clear();
  std::deque<std::uint32_t> deferred;  // backing off: keep their order
  std::vector<std::uint32_t> taken;
  while (!backlog_.empty() && ops_.size() < room) {
    const std::uint32_t slot = backlog_.front();
    backlog_.pop_front();
    Active& a = slots_[slot];
    if (a.not_before > now) {
      deferred.push_back(slot);
      continue;
    }
    const IoTransfer& t = a.transfer;
    IoOp op;
    op.kind = t.kind;
    op.file_index = t.file_index;
    op.offset = t.offset + a.moved;
    op.buffer = t.buffer + a.moved;
    op.length = static_cast<std::uint32_t>(t.length - a.moved);
    // A registered buffer stays registered at any offset inside it, so remainders keep the index.
    op.buffer_index = t.buffer_index;
    op.tag = slot;
    ops_.push_back(op);
    taken.push_back(slot);
  }
  // Deferred transfers go back in front, in order, ahead of what was never looked at.
  backlog_.insert(backlog_.begin(), deferred.begin(), deferred.end());
  if (ops_.empty()) return Status::ok();
  const Status submitted = engine_.submit(ops_);
  if (!submitted.is_ok()) {
    backlog_.insert(backlog_.begin(), taken.begin(), taken.end());
    return submitted.with_context(fmt::format("{} engine", engine_.name()));
  }
  in_flight_ += ops_.size();
  counters_.ops_submitted += ops_.size();
  return Status::ok();
}

std::chrono::milliseconds IoQueue::wait_budget(std::chrono::milliseconds timeout) const {
  // Transfers waiting for room are released by a completion, which ends the wait anyway; those
  // backing off must not wait past their deadline.
  const Clock::time_point now = Clock::now();
  Clock::time_point earliest = Clock::time_point::max();
  for (std::uint32_t slot : backlog_) {
    if (slots_[slot].not_before > now) earliest = std::min(earliest, slots_[slot].not_before);
  }
  if (earliest == Clock::time_point::max()) return timeout;
  const auto until = std::chrono::ceil<std::chrono::milliseconds>(earliest - now);
  return std::clamp(until, std::chrono::milliseconds(1), timeout);
}

void IoQueue::finish(std::uint32_t slot, Status status, std::vector<IoDone>& done) {
  if (!status.is_ok()) ++counters_.transfers_failed;
  done.push_back(IoDone{slots_[slot].transfer.tag, std::move(status)});
  free_slots_.push_back(slot);
}

void IoQueue::handle_result(const IoResult& result, std::vector<IoDone>& done) {
  ZINF_CHECK(result.tag < slots_.size(), "IoQueue: engine returned an unknown tag");
  ZINF_CHECK(in_flight_ > 0, "IoQueue: more completions than submissions");
  --in_flight_;
  const auto slot = static_cast<std::uint32_t>(result.tag);
  Active& a = slots_[slot];
  const std::uint64_t remaining = a.transfer.length - a.moved;
  if (result.result < 0) {
    const int error = static_cast<int>(-result.result);
    if (error == EAGAIN || error == EINTR) {
      if (++a.retries > max_retries_) {
        finish(slot,
               Status::io_error(
                   fmt::format("{}: still {} after {} retries", describe(a), errno_text(error), max_retries_)),
               done);
        return;
      }
      ++counters_.eagain_retries;
      a.not_before = Clock::now() + backoff(a.retries);
      backlog_.push_back(slot);
      return;
    }
    finish(slot, Status::io_error(fmt::format("{}: {}", describe(a), errno_text(error))), done);
    return;
  }
  const auto moved = static_cast<std::uint64_t>(result.result);
  if (moved == 0) {
    // No progress: a read at end of file, or a device that accepts nothing. Retrying would spin.
    const char* why = a.transfer.kind == IoOpKind::kRead ? "unexpected end of file" : "the device accepted 0 bytes";
    finish(slot,
           Status::io_error(fmt::format("{}: {} ({} of {} bytes done)", describe(a), why, a.moved, a.transfer.length)),
           done);
    return;
  }
  ZINF_CHECK(moved <= remaining, "IoQueue: engine reported more bytes than asked");
  a.moved += moved;
  a.retries = 0;
  if (a.moved == a.transfer.length) {
    finish(slot, Status::ok(), done);
    return;
  }
  // Short transfer: the kernel may stop early (signals, device limits); the rest goes again, first.
  ++counters_.short_resubmits;
  a.not_before = {};
  backlog_.push_front(slot);
}

Status IoQueue::pump(std::chrono::milliseconds timeout, std::vector<IoDone>& done) {
  ZINF_RETURN_IF_ERROR(submit_backlog());
  if (in_flight_ == 0) {
    if (backlog_.empty()) return Status::ok();
    // Only backing-off transfers remain (at most 10 ms away): sleep until the first may go.
    std::this_thread::sleep_for(wait_budget(timeout));
    return submit_backlog();
  }
  results_.clear();
  ZINF_ASSIGN_OR_RETURN(std::size_t reaped, engine_.reap(1, wait_budget(timeout), results_));
  for (std::size_t i = 0; i < reaped; ++i) handle_result(results_[i], done);
  return submit_backlog();
}

}  // namespace zinf::io
