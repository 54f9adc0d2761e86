// CollectiveOrder: the collective-order rule of the partitioned engine, stated and checked in one
// place (docs/architecture.md, "The collective-order rule").
//
// The rule. Collectives match across ranks by their order alone, so every rank must issue the same
// collectives in the same order. Hence every decision that issues a collective — or changes state
// that a later collective decision reads — is a function of program order (the sequence of
// acquires, commits, phases and steps, the same on every rank) and of byte accounting (budgets,
// bucket sizes, pool bookkeeping: the same on every rank) only. It is never a function of timing:
// whether an NVMe transfer or a copy has completed, or whether the optimizer thread is idle.
// Decisions that do read such things ("is this read done? then step the next sub-group") are
// allowed, but they may change rank-local state only.
//
// The check. The engine's parts (ParamCoordinator, GradientReducer) are given this communicator
// instead of the real one; it forwards every call. The StepScheduler (step_scheduler.h) runs each
// timing-driven decision inside a LocalOnly scope, and a collective issued inside one stops the
// process (ZINF_CHECK) naming it: a bug that would otherwise surface as ranks deadlocking in
// mismatched collectives minutes later. Every collective is also folded, with its kind, element
// count and program-order position (the number of scheduler events before it), into signature():
// ranks that obey the rule end every step with equal signatures. Until stop_recording() each one is
// also kept in records(), so that ranks whose signatures differ can name the first collective where
// they part (the trainer compares them after the first step: train/order_agreement.h).
//
// Not thread-safe: the training loop's thread makes every call (the collectives it issues run on
// the device's streams, which this does not see). `inner` must outlive it; thread-safety and
// failures of the forwarded calls are inner's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "libengine/comm/communicator.h"
#include "libengine/core/check.h"

namespace zinf::zero {

class CollectiveOrder final : public comm::Communicator {
 public:
  explicit CollectiveOrder(comm::Communicator& inner) : inner_(inner) {}
  CollectiveOrder(const CollectiveOrder&) = delete;
  CollectiveOrder& operator=(const CollectiveOrder&) = delete;

  // A timing-driven region: no collective may be issued while one is open (they nest).
  class LocalOnly {
   public:
    explicit LocalOnly(CollectiveOrder* order) : order_(order) {
      if (order_ != nullptr) ++order_->local_depth_;
    }
    ~LocalOnly() {
      if (order_ != nullptr) --order_->local_depth_;
    }
    LocalOnly(const LocalOnly&) = delete;
    LocalOnly& operator=(const LocalOnly&) = delete;

   private:
    CollectiveOrder* order_;
  };

  // One program-order event (an acquire, a commit, a phase, a step boundary) has happened.
  void note_event() { ++events_; }
  std::uint64_t events() const { return events_; }
  bool local_only() const { return local_depth_ > 0; }
  // FNV-1a over (kind, count, events()) of every collective issued so far.
  std::uint64_t signature() const { return signature_; }
  std::uint64_t collectives() const { return collectives_; }

  // One collective as signature() folds it: kind (Kind's value, 1..6), element count, and the
  // events before it.
  struct Record {
    std::uint64_t kind = 0;
    std::uint64_t count = 0;
    std::uint64_t events = 0;
  };
  // The collectives issued since construction, in order, until stop_recording() (then empty): the
  // first kMaxRecords of them (24 MiB), so that states driven without the trainer's check do not
  // grow it without bound.
  static constexpr std::size_t kMaxRecords = std::size_t{1} << 20;
  const std::vector<Record>& records() const { return records_; }
  void stop_recording() {
    recording_ = false;
    records_ = {};
  }
  // "all_gather", "reduce_scatter", ... for a Record's kind; "collective kind <n>" otherwise.
  static std::string kind_name(std::uint64_t kind) {
    static constexpr std::array<std::string_view, 6> kNames = {"all_gather", "reduce_scatter", "all_reduce",
                                                               "broadcast",  "barrier",        "all_reduce_host"};
    if (kind >= 1 && kind <= kNames.size()) return std::string(kNames[kind - 1]);
    return "collective kind " + std::to_string(kind);
  }

  std::string_view backend() const override { return inner_.backend(); }
  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  int local_rank() const override { return inner_.local_rank(); }
  int local_size() const override { return inner_.local_size(); }
  void all_gather(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override {
    issue(Kind::kAllGather, count);
    inner_.all_gather(send, recv, count, dtype, stream);
  }
  void reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override {
    issue(Kind::kReduceScatter, count);
    inner_.reduce_scatter(send, recv, count, dtype, stream);
  }
  void all_reduce(const void* send, void* recv, std::size_t count, DType dtype, device::Stream& stream) override {
    issue(Kind::kAllReduce, count);
    inner_.all_reduce(send, recv, count, dtype, stream);
  }
  void broadcast(void* buffer, std::size_t count, DType dtype, int root, device::Stream& stream) override {
    issue(Kind::kBroadcast, count);
    inner_.broadcast(buffer, count, dtype, root, stream);
  }
  Status barrier() override {
    issue(Kind::kBarrier, 0);
    return inner_.barrier();
  }
  Status all_reduce_host(std::span<double> values) override {
    issue(Kind::kAllReduceHost, values.size());
    return inner_.all_reduce_host(values);
  }

 private:
  enum class Kind : std::uint64_t { kAllGather = 1, kReduceScatter, kAllReduce, kBroadcast, kBarrier, kAllReduceHost };

  void issue(Kind kind, std::size_t count) {
    ZINF_CHECK(local_depth_ == 0,
               "collective order: a collective was issued from a timing-driven decision (inside "
               "CollectiveOrder::LocalOnly); ranks would issue their collectives in different orders");
    for (const std::uint64_t word : {static_cast<std::uint64_t>(kind), static_cast<std::uint64_t>(count), events_}) {
      for (int byte = 0; byte < 8; ++byte) {
        signature_ ^= (word >> (8 * byte)) & 0xffu;
        signature_ *= 0x100000001b3ull;
      }
    }
    ++collectives_;
    if (recording_ && records_.size() < kMaxRecords)
      records_.push_back({static_cast<std::uint64_t>(kind), static_cast<std::uint64_t>(count), events_});
  }

  comm::Communicator& inner_;
  int local_depth_ = 0;
  std::uint64_t events_ = 0;
  std::uint64_t collectives_ = 0;
  std::uint64_t signature_ = 0xcbf29ce484222325ull;
  bool recording_ = true;
  std::vector<Record> records_;
};

}  // namespace zinf::zero
