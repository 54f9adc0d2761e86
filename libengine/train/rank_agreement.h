// Rank agreement: the small host-side exchanges by which the ranks of a data-parallel run decide
// together (which checkpoint to resume from, whether a load failed anywhere) and by which every
// rank's warning reaches rank 0, the one that prints. Built on Communicator::all_reduce_host (sums
// of doubles): each rank fills its own block of a world-sized zeroed vector, so the sum is the
// gather. With a null communicator (one rank) each function returns this rank's own value.
//
// Every rank must call these in the same order (they are collectives); a failure (a lost peer, the
// timeout) is the communicator's error, and the communicator is broken afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "libengine/comm/communicator.h"
#include "libengine/core/status.h"

namespace zinf::train {

// Every rank's `mine`, by rank, on every rank. Texts longer than kMaxAgreedText bytes are cut
// there (with "..."): they are one-line messages.
inline constexpr std::size_t kMaxAgreedText = 4096;
Result<std::vector<std::string>> gather_texts(comm::Communicator* comm, const std::string& mine);

// Every rank's `mine`, by rank, on every rank; exact for |values| below 2^53.
Result<std::vector<std::int64_t>> gather_integers(comm::Communicator* comm, std::int64_t mine);

}  // namespace zinf::train
