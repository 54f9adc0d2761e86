// Order agreement: the ranks check, after their first step, that they acquired the parameters in
// the same order, and that their states issued the same collectives at the same points. At several ranks the
// partitioned states issue their collectives in that order (parameter gathers in the recorded acquire order, gradient
// buckets as the backward pass commits): ranks whose orders differ would meet in mismatched collectives — a hang until
// the communicator's timeout, or silently mixed parameters when the sizes happen to match. Comparing the recorded
// orders turns that into one error line, the same on every rank, naming the first acquire where
// they differ (docs/architecture.md §6).
//
// Every rank must make the call at the same point (it is a host collective): one all-reduce of a
// 64-bit hash of each rank's order; only when the hashes differ, two more exchange the orders
// themselves to find the first difference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "libengine/comm/communicator.h"
#include "libengine/core/status.h"
#include "libengine/model/param_source.h"
#include "libengine/model/param_table.h"
#include "libengine/zero/collective_order.h"

namespace zinf::train {

// One step's acquires: the forward pass's, then the backward pass's (ModelStates::acquire_order).
struct AcquireOrder {
  std::vector<model::ParamId> forward;
  std::vector<model::ParamId> backward;
};

// FNV-1a over the forward ids, a phase marker, the backward ids: equal orders, equal hashes.
std::uint64_t acquire_order_hash(const AcquireOrder& order);

// Compares this rank's `mine` with every rank's. Returns an empty string when every rank recorded
// the same order; otherwise one line, the same on every rank, naming the first position where a
// rank differs from rank 0: the pass, the acquire's index in it, the parameter (from `table`) or the
// end of the pass on each side. With a null communicator or a world of one: empty, no collective.
// Fails only with the communicator's error (a lost peer, the timeout).
Result<std::string> find_order_disagreement(comm::Communicator* comm, const model::ParamTable& table,
                                            const AcquireOrder& mine);

// One rank's collectives at the check (zero/collective_order.h): the signature of every collective
// its states issued, and those collectives themselves while they were recorded (empty otherwise).
struct CollectiveTrace {
  std::uint64_t signature = 0;
  std::vector<zero::CollectiveOrder::Record> records;
};

// Compares this rank's collectives with every rank's, after the first step (the same point on every
// rank: a host collective). Ranks that obey the collective-order rule have equal signatures; when
// they differ, one line, the same on every rank: the first collective where a rank's record differs
// from rank 0's (its index, kind, element count and scheduler events before it, or the end of a
// rank's record), or, when the records do not show it (not recorded), the two signatures. Empty
// when every rank agrees; with a null communicator or a world of one, empty with no collective.
// Fails only with the communicator's error.
Result<std::string> find_collective_disagreement(comm::Communicator* comm, const CollectiveTrace& mine);

}  // namespace zinf::train
