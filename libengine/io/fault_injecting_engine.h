// FaultInjectingEngine: an IoEngine that wraps another and makes chosen ops fail, come back short
// or answer EAGAIN, so the retry and error paths above it (IoQueue, SwapStore) can be tested on
// a real file system.
//
// Faults are rules keyed on the op's position in submission order (1-based), counted over all ops
// or over reads/writes only. A failed or EAGAIN op is not performed at all: nothing reaches the
// inner engine and its result (-errno, same tag) is queued here for the next reap(). A short op
// really is performed shorter: the inner engine transfers only the first short_bytes, so the
// file or buffer holds exactly what a real short transfer would leave, and the result is that
// count under the original tag.
//
// What it is not: not a simulator of latency or reordering, and not for production paths.
//
// Threading: as IoEngine for the IoEngine methods (one driving thread at a time; wake() from any
// thread). add_rule(), clear_rules() and counters() may be called from any thread at any time.
#pragma once

#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "libengine/io/io_engine.h"

namespace zinf::io {

struct FaultRule {
  enum class Kind {
    kError,   // report -error, do not perform the op
    kShort,   // perform only the first short_bytes, report that count
    kEagain,  // report -EAGAIN, do not perform the op
  };
  Kind kind = Kind::kError;
  // The op the rule fires on, 1-based, counted over every submitted op or, with `only`, over
  // reads or writes alone. Must be >= 1.
  std::uint64_t nth_op = 1;
  std::optional<IoOpKind> only;
  int error = EIO;                // kError: the positive errno reported (EIO, ENOSPC, ...)
  std::uint32_t short_bytes = 0;  // kShort: bytes performed (an op already shorter runs whole)
  bool persistent = false;        // also fire on every later counted op (a full disk, a dead device)

  // Readable construction, e.g. FaultRule::fail(3, ENOSPC).and_every_later_op() or
  // FaultRule::shorten(2, 4096).counting_only(IoOpKind::kRead). (Designated initializers that skip
  // members trip GCC 12's -Wmissing-field-initializers, which the build treats as an error.)
  static FaultRule fail(std::uint64_t nth_op, int error = EIO) {
    FaultRule rule;
    rule.kind = Kind::kError;
    rule.nth_op = nth_op;
    rule.error = error;
    return rule;
  }
  static FaultRule shorten(std::uint64_t nth_op, std::uint32_t short_bytes) {
    FaultRule rule;
    rule.kind = Kind::kShort;
    rule.nth_op = nth_op;
    rule.short_bytes = short_bytes;
    return rule;
  }
  static FaultRule eagain(std::uint64_t nth_op) {
    FaultRule rule;
    rule.kind = Kind::kEagain;
    rule.nth_op = nth_op;
    return rule;
  }
  FaultRule counting_only(IoOpKind op_kind) const {
    FaultRule rule = *this;
    rule.only = op_kind;
    return rule;
  }
  FaultRule and_every_later_op() const {
    FaultRule rule = *this;
    rule.persistent = true;
    return rule;
  }
};

// Counts since construction. An op is "seen" once submit() has queued it.
struct FaultCounters {
  std::uint64_t ops_seen = 0;
  std::uint64_t reads_seen = 0;
  std::uint64_t writes_seen = 0;
  std::uint64_t faults_fired = 0;  // the sum of the three below
  std::uint64_t errors_fired = 0;
  std::uint64_t shorts_fired = 0;
  std::uint64_t eagains_fired = 0;
};

class FaultInjectingEngine final : public IoEngine {
 public:
  // Takes ownership of `inner` (must not be null).
  explicit FaultInjectingEngine(std::unique_ptr<IoEngine> inner);

  // Adds a rule; when several match one op, the one added first wins. Precondition (checked):
  // nth_op >= 1 and, for kError, error > 0. Takes effect from the next submit().
  void add_rule(const FaultRule& rule);
  // Removes every rule; counters keep counting.
  void clear_rules();
  FaultCounters counters() const;

  // "fault(<inner name>)".
  std::string_view name() const override { return name_; }
  unsigned queue_depth() const override { return inner_->queue_depth(); }
  Status register_files(std::span<const int> fds) override;
  Status register_buffers(std::span<const iovec> buffers) override;

  // Applies the rules, forwards performed (and shortened) ops to the inner engine in one submit,
  // and queues the results of the ops it faulted. On error (the inner engine's, or Internal when
  // queue_depth would be exceeded) nothing is queued and the counters are unchanged.
  Status submit(std::span<const IoOp> ops) override;

  // Returns queued fault results first, then the inner engine's; waits on the inner engine only
  // when those are fewer than min_results.
  Result<std::size_t> reap(std::size_t min_results, std::chrono::milliseconds timeout,
                           std::vector<IoResult>& out) override;

  // The inner engine's ops in flight plus fault results not yet reaped.
  unsigned in_flight() const override;
  void wake() override { inner_->wake(); }

 private:
  // The first rule that fires on an op whose counters (already including it) are `seen`, or null.
  const FaultRule* matching_rule(const IoOp& op, const FaultCounters& seen) const;

  std::unique_ptr<IoEngine> inner_;
  std::string name_;
  std::vector<IoResult> injected_;  // driving thread only: results of ops not performed

  mutable std::mutex mutex_;
  std::vector<FaultRule> rules_;  // guarded by mutex_
  FaultCounters counters_;        // guarded by mutex_
};

}  // namespace zinf::io
