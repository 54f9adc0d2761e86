#include "libengine/train/rank_agreement.h"

#include <algorithm>
#include <cmath>

namespace zinf::train {

Result<std::vector<std::int64_t>> gather_integers(comm::Communicator* comm, std::int64_t mine) {
  if (comm == nullptr || comm->world_size() == 1) return std::vector<std::int64_t>{mine};
  std::vector<double> all(static_cast<std::size_t>(comm->world_size()), 0.0);
  all[static_cast<std::size_t>(comm->rank())] = static_cast<double>(mine);
  ZINF_RETURN_IF_ERROR(comm->all_reduce_host(all));
  std::vector<std::int64_t> out;
  out.reserve(all.size());
  for (const double value : all) out.push_back(static_cast<std::int64_t>(std::llround(value)));
  return out;
}

Result<std::vector<std::string>> gather_texts(comm::Communicator* comm, const std::string& mine) {
  std::string text = mine;
  if (text.size() > kMaxAgreedText) text = text.substr(0, kMaxAgreedText - 3) + "...";
  if (comm == nullptr || comm->world_size() == 1) return std::vector<std::string>{text};
  // The lengths first, so the second exchange is as long as the longest text, not kMaxAgreedText.
  ZINF_ASSIGN_OR_RETURN(const std::vector<std::int64_t> lengths,
                        gather_integers(comm, static_cast<std::int64_t>(text.size())));
  const auto longest = static_cast<std::size_t>(*std::max_element(lengths.begin(), lengths.end()));
  std::vector<std::string> out(lengths.size());
  if (longest == 0) return out;
  // One byte per double: a sum of one non-zero block per position is that byte exactly.
  std::vector<double> bytes(longest * lengths.size(), 0.0);
  const std::size_t base = longest * static_cast<std::size_t>(comm->rank());
  for (std::size_t i = 0; i < text.size(); ++i) bytes[base + i] = static_cast<unsigned char>(text[i]);
  ZINF_RETURN_IF_ERROR(comm->all_reduce_host(bytes));
  for (std::size_t rank = 0; rank < lengths.size(); ++rank) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(lengths[rank]); ++i) {
      out[rank].push_back(static_cast<char>(static_cast<unsigned char>(bytes[rank * longest + i])));
    }
  }
  return out;
}

}  // namespace zinf::train
