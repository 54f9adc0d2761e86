#include "libengine/model/param_table.h"

#include <algorithm>

#include "kernels/random.h"

namespace zinf::model {

ParamId ParamTable::add(ParamInfo info) {
  info.numel = info.shape.numel();
  const std::size_t tile = info.name.find(".tile");
  const std::string whole = tile == std::string::npos ? info.name : info.name.substr(0, tile);
  const auto found = std::find_if(wholes_.begin(), wholes_.end(), [&](const Whole& w) { return w.name == whole; });
  if (found == wholes_.end() || tile == std::string::npos) {
    info.whole_id = static_cast<ParamId>(wholes_.size());
    info.whole_offset = 0;
    wholes_.push_back({whole, info.numel});
  } else {
    info.whole_id = static_cast<ParamId>(found - wholes_.begin());
    info.whole_offset = found->next_offset;
    found->next_offset += info.numel;
  }
  total_numel_ += info.numel;
  params_.push_back(std::move(info));
  return static_cast<ParamId>(params_.size() - 1);
}

void ParamTable::init_values(std::uint64_t seed, ParamId id, std::int64_t begin, std::span<float> out) const {
  const ParamInfo& info = (*this)[id];
  switch (info.init) {
    case ParamInit::kOnes:
      for (float& x : out) x = 1.0f;
      return;
    case ParamInit::kZeros:
      for (float& x : out) x = 0.0f;
      return;
    case ParamInit::kNormal:
      break;
  }
  // Counter-based (kernels/random.h): element i's value needs no state from the elements before it,
  // so a ZeRO rank initialising its slice, or a tile, gets the same numbers as a whole copy.
  const std::uint64_t stream = kernels::cpu::counter_mix(
      seed ^ kernels::cpu::counter_mix(static_cast<std::uint64_t>(info.whole_id) + 0x51ED2701ull));
  kernels::cpu::counter_normal_fill(out.data(), out.size(), stream,
                                    static_cast<std::uint64_t>(info.whole_offset + begin), info.init_std);
}

}  // namespace zinf::model
