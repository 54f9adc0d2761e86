#include "libengine/model/param_table.h"

#include <algorithm>
#include <cmath>

namespace zinf::model {
namespace {

// splitmix64's finaliser: a counter-based generator, so element i's value needs no state from
// elements before it (a ZeRO rank initialising its slice gets the same numbers as a whole copy).
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double unit_open(std::uint64_t bits) {  // (0, 1]
  return (static_cast<double>(bits >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

}  // namespace

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
  const std::uint64_t stream = mix(seed ^ mix(static_cast<std::uint64_t>(info.whole_id) + 0x51ED2701ull));
  for (std::size_t i = 0; i < out.size(); ++i) {
    // Box-Muller on two counter-derived uniforms; one normal per element.
    const std::uint64_t index = static_cast<std::uint64_t>(info.whole_offset + begin) + i;
    const double u1 = unit_open(mix(stream ^ (2 * index)));
    const double u2 = unit_open(mix(stream ^ (2 * index + 1)));
    const double normal = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    out[i] = static_cast<float>(normal * info.init_std);
  }
}

}  // namespace zinf::model
