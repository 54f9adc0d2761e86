#include "libengine/train/order_agreement.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "libengine/train/rank_agreement.h"

namespace zinf::train {
namespace {

constexpr std::int64_t kPhaseMarker = -1;  // between the forward and the backward ids
constexpr std::int64_t kEnd = -2;          // past the end of a rank's sequence

std::vector<std::int64_t> sequence(const AcquireOrder& order) {
  std::vector<std::int64_t> out(order.forward.begin(), order.forward.end());
  out.push_back(kPhaseMarker);
  out.insert(out.end(), order.backward.begin(), order.backward.end());
  return out;
}

// What a rank has at a position, in words.
std::string entry_text(const model::ParamTable& table, std::int64_t entry) {
  if (entry == kPhaseMarker) return "the end of the forward pass";
  if (entry == kEnd) return "the end of the backward pass";
  if (entry < 0 || entry >= table.size()) return fmt::format("parameter id {}", entry);
  return table[static_cast<model::ParamId>(entry)].name;
}

}  // namespace

std::uint64_t acquire_order_hash(const AcquireOrder& order) {
  std::uint64_t hash = 14695981039346656037ULL;
  for (const std::int64_t entry : sequence(order)) {
    auto value = static_cast<std::uint64_t>(entry);
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= value & 0xff;
      hash *= 1099511628211ULL;
      value >>= 8;
    }
  }
  return hash;
}

Result<std::string> find_order_disagreement(comm::Communicator* comm, const model::ParamTable& table,
                                            const AcquireOrder& mine) {
  if (comm == nullptr || comm->world_size() == 1) return std::string();
  const auto world = static_cast<std::size_t>(comm->world_size());
  const auto rank = static_cast<std::size_t>(comm->rank());
  // Each rank's hash as two 32-bit halves in its own block: the sum is the gather, exact in doubles.
  const std::uint64_t hash = acquire_order_hash(mine);
  std::vector<double> hashes(2 * world, 0.0);
  hashes[2 * rank] = static_cast<double>(hash >> 32);
  hashes[2 * rank + 1] = static_cast<double>(hash & 0xffffffffULL);
  ZINF_RETURN_IF_ERROR(comm->all_reduce_host(hashes));
  bool agreed = true;
  for (std::size_t r = 1; r < world; ++r) {
    agreed = agreed && hashes[2 * r] == hashes[0] && hashes[2 * r + 1] == hashes[1];
  }
  if (agreed) return std::string();

  // The orders differ (every rank knows it): exchange them, the lengths first. Entries are stored
  // less kEnd (ids from 2, the marker 1), so that a zero — past a shorter sequence's end — reads as kEnd.
  const std::vector<std::int64_t> own = sequence(mine);
  ZINF_ASSIGN_OR_RETURN(const std::vector<std::int64_t> lengths,
                        gather_integers(comm, static_cast<std::int64_t>(own.size())));
  const auto longest = static_cast<std::size_t>(*std::max_element(lengths.begin(), lengths.end()));
  std::vector<double> all(longest * world, 0.0);
  for (std::size_t i = 0; i < own.size(); ++i) all[rank * longest + i] = static_cast<double>(own[i] - kEnd);
  ZINF_RETURN_IF_ERROR(comm->all_reduce_host(all));
  const auto at = [&](std::size_t r, std::size_t position) {
    return static_cast<std::int64_t>(std::llround(all[r * longest + position])) + kEnd;
  };
  // The first position where any rank differs from rank 0; before it every rank has the same
  // entries, so whether it is in the backward pass, and where, is the same on every rank.
  std::size_t backward_start = 0;  // 0: the position is in the forward pass
  for (std::size_t position = 0; position < longest; ++position) {
    for (std::size_t r = 1; r < world; ++r) {
      if (at(r, position) == at(0, position)) continue;
      const bool backward = backward_start > 0;
      const std::size_t index = backward ? position - backward_start : position;
      return fmt::format(
          "the ranks acquire the parameters in different orders (checked after the first step): acquire {} of the {} "
          "pass is {} on rank 0 but {} on rank {}; every rank must run the model's operators in the same order, "
          "since the collectives follow it",
          index + 1, backward ? "backward" : "forward", entry_text(table, at(0, position)),
          entry_text(table, at(r, position)), r);
    }
    if (at(0, position) == kPhaseMarker) backward_start = position + 1;
  }
  // Not reached: different hashes come from different sequences. Stop rather than go on regardless.
  return std::string("the ranks' acquire-order hashes differ but their orders do not (checked after the first step)");
}

namespace {

// A collective in words; `entry` holds kind, count, events, or a kind of 0: past the record's end.
std::string collective_text(const std::array<std::uint64_t, 3>& entry) {
  if (entry[0] == 0) return "no collective (its record ends there)";
  return fmt::format("{} of {} elements after {} scheduler events", zero::CollectiveOrder::kind_name(entry[0]),
                     entry[1], entry[2]);
}

}  // namespace

Result<std::string> find_collective_disagreement(comm::Communicator* comm, const CollectiveTrace& mine) {
  if (comm == nullptr || comm->world_size() == 1) return std::string();
  const auto world = static_cast<std::size_t>(comm->world_size());
  const auto rank = static_cast<std::size_t>(comm->rank());
  // The signatures, as two 32-bit halves in each rank's block (as find_order_disagreement's hashes).
  std::vector<double> signatures(2 * world, 0.0);
  signatures[2 * rank] = static_cast<double>(mine.signature >> 32);
  signatures[2 * rank + 1] = static_cast<double>(mine.signature & 0xffffffffULL);
  ZINF_RETURN_IF_ERROR(comm->all_reduce_host(signatures));
  const auto signature_of = [&](std::size_t r) {
    return (static_cast<std::uint64_t>(signatures[2 * r]) << 32) | static_cast<std::uint64_t>(signatures[2 * r + 1]);
  };
  std::size_t differing = 0;  // the first rank whose signature is not rank 0's
  for (std::size_t r = world; r-- > 1;) {
    if (signature_of(r) != signature_of(0)) differing = r;
  }
  if (differing == 0) return std::string();

  // The signatures differ (every rank knows it): exchange the records, the lengths first. Three
  // doubles per collective (a count is exact below 2^53); a kind of 0 reads as past the end.
  ZINF_ASSIGN_OR_RETURN(const std::vector<std::int64_t> lengths,
                        gather_integers(comm, static_cast<std::int64_t>(mine.records.size())));
  const auto longest = static_cast<std::size_t>(*std::max_element(lengths.begin(), lengths.end()));
  std::vector<double> all(3 * longest * world, 0.0);
  for (std::size_t i = 0; i < mine.records.size(); ++i) {
    const zero::CollectiveOrder::Record& record = mine.records[i];
    double* at = &all[3 * (rank * longest + i)];
    at[0] = static_cast<double>(record.kind);
    at[1] = static_cast<double>(record.count);
    at[2] = static_cast<double>(record.events);
  }
  ZINF_RETURN_IF_ERROR(comm->all_reduce_host(all));
  const auto entry = [&](std::size_t r, std::size_t position) {
    const double* at = &all[3 * (r * longest + position)];
    return std::array<std::uint64_t, 3>{static_cast<std::uint64_t>(std::llround(at[0])),
                                        static_cast<std::uint64_t>(std::llround(at[1])),
                                        static_cast<std::uint64_t>(std::llround(at[2]))};
  };
  for (std::size_t position = 0; position < longest; ++position) {
    for (std::size_t r = 1; r < world; ++r) {
      if (entry(r, position) == entry(0, position)) continue;
      return fmt::format(
          "the ranks issue different collectives (checked after the first step): collective {} of the run is {} on "
          "rank 0 but {} on rank {}; every rank must issue the same collectives at the same points, decided from "
          "program order and byte counts only",
          position + 1, collective_text(entry(0, position)), collective_text(entry(r, position)), r);
    }
  }
  // The records agree (or were not kept): the signatures are all there is to name.
  return fmt::format(
      "the ranks issue different collectives (checked after the first step): collective signature {:016x} on rank 0 "
      "but {:016x} on rank {}; every rank must issue the same collectives at the same points, decided from program "
      "order and byte counts only",
      signature_of(0), signature_of(differing), differing);
}

}  // namespace zinf::train
