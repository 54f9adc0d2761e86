// FaultInjectingEngine implementation. See fault_injecting_engine.h for the contract.
#include "libengine/io/fault_injecting_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "libengine/core/check.h"

namespace zinf::io {

FaultInjectingEngine::FaultInjectingEngine(std::unique_ptr<IoEngine> inner) : inner_(std::move(inner)) {
  ZINF_CHECK(inner_ != nullptr, "FaultInjectingEngine needs an inner engine");
  name_ = fmt::format("fault({})", inner_->name());
}

void FaultInjectingEngine::add_rule(const FaultRule& rule) {
  ZINF_CHECK(rule.nth_op >= 1, "FaultRule::nth_op is 1-based");
  ZINF_CHECK(rule.kind != FaultRule::Kind::kError || rule.error > 0, "FaultRule::error must be a positive errno");
  std::lock_guard lock(mutex_);
  rules_.push_back(rule);
}

void FaultInjectingEngine::clear_rules() {
  std::lock_guard lock(mutex_);
  rules_.clear();
}

FaultCounters FaultInjectingEngine::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

Status FaultInjectingEngine::register_files(std::span<const int> fds) { return inner_->register_files(fds); }

Status FaultInjectingEngine::register_buffers(std::span<const iovec> buffers) {
  return inner_->register_buffers(buffers);
}

const FaultRule* FaultInjectingEngine::matching_rule(const IoOp& op, const FaultCounters& seen) const {
  for (const FaultRule& rule : rules_) {
    if (rule.only && *rule.only != op.kind) continue;
    const std::uint64_t position =
        !rule.only ? seen.ops_seen : (op.kind == IoOpKind::kRead ? seen.reads_seen : seen.writes_seen);
    if (position == rule.nth_op || (rule.persistent && position > rule.nth_op)) return &rule;
  }
  return nullptr;
}

Status FaultInjectingEngine::submit(std::span<const IoOp> ops) {
  if (ops.empty()) return Status::ok();
  // Checked here, not left to the inner engine: faulted ops never reach it but still occupy a
  // place until reaped.
  if (const unsigned busy = in_flight(); ops.size() > queue_depth() - std::min(busy, queue_depth())) {
    return Status::internal(
        fmt::format("submit of {} ops with {} in flight exceeds the queue depth {}", ops.size(), busy, queue_depth()));
  }
  std::vector<IoOp> forwarded;
  forwarded.reserve(ops.size());
  std::vector<IoResult> faulted;
  FaultCounters next;
  {
    std::lock_guard lock(mutex_);
    next = counters_;
    for (const IoOp& op : ops) {
      ++next.ops_seen;
      ++(op.kind == IoOpKind::kRead ? next.reads_seen : next.writes_seen);
      const FaultRule* rule = matching_rule(op, next);
      if (rule == nullptr) {
        forwarded.push_back(op);
        continue;
      }
      ++next.faults_fired;
      switch (rule->kind) {
        case FaultRule::Kind::kError:
          ++next.errors_fired;
          faulted.push_back(IoResult{op.tag, -static_cast<std::int64_t>(rule->error)});
          break;
        case FaultRule::Kind::kEagain:
          ++next.eagains_fired;
          faulted.push_back(IoResult{op.tag, -static_cast<std::int64_t>(EAGAIN)});
          break;
        case FaultRule::Kind::kShort: {
          ++next.shorts_fired;
          IoOp shortened = op;
          shortened.length = std::min(op.length, rule->short_bytes);
          forwarded.push_back(shortened);
          break;
        }
      }
    }
  }
  // Counters and fault results are committed only once the inner engine took its part, so a
  // failed submit leaves this engine as it was.
  if (!forwarded.empty()) ZINF_RETURN_IF_ERROR(inner_->submit(forwarded));
  {
    std::lock_guard lock(mutex_);
    counters_ = next;
  }
  injected_.insert(injected_.end(), faulted.begin(), faulted.end());
  return Status::ok();
}

Result<std::size_t> FaultInjectingEngine::reap(std::size_t min_results, std::chrono::milliseconds timeout,
                                               std::vector<IoResult>& out) {
  const std::size_t injected_count = injected_.size();
  out.insert(out.end(), injected_.begin(), injected_.end());
  injected_.clear();
  // Enough already: still collect whatever the inner engine has ready, without waiting.
  const std::size_t still_wanted = min_results > injected_count ? min_results - injected_count : 0;
  const auto inner_timeout = still_wanted > 0 ? timeout : std::chrono::milliseconds(0);
  ZINF_ASSIGN_OR_RETURN(const std::size_t inner_count, inner_->reap(still_wanted, inner_timeout, out));
  return injected_count + inner_count;
}

unsigned FaultInjectingEngine::in_flight() const {
  return inner_->in_flight() + static_cast<unsigned>(injected_.size());
}

}  // namespace zinf::io
