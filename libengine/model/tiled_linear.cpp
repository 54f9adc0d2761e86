#include "libengine/model/tiled_linear.h"

#include <fmt/format.h>

#include "libengine/core/check.h"

namespace zinf::model {

TiledLinear::TiledLinear(ParamTable& table, const std::string& prefix, std::int64_t in_features,
                         std::int64_t out_features, bool bias, std::int32_t group, float init_std, std::int64_t tiling)
    : out_features_(out_features) {
  ZINF_CHECK(tiling >= 1 && tiling <= out_features, "TiledLinear: tiling outside [1, out_features]");
  tiles_.reserve(static_cast<std::size_t>(tiling));
  for (std::int64_t k = 0; k < tiling; ++k) {
    const std::int64_t begin = k * out_features / tiling;
    const std::int64_t end = (k + 1) * out_features / tiling;
    const std::string suffix = tiling == 1 ? std::string() : fmt::format(".tile{}", k);
    tiles_.push_back({Linear(table, prefix + ".weight" + suffix, bias ? prefix + ".bias" + suffix : std::string(),
                             in_features, end - begin, group, init_std),
                      begin});
  }
}

TiledLinear TiledLinear::shared(const std::vector<ParamId>& weights, const std::vector<std::int64_t>& col_begins,
                                std::int64_t in_features, std::int64_t out_features) {
  ZINF_CHECK(!weights.empty() && weights.size() == col_begins.size(), "TiledLinear::shared: one begin per tile");
  TiledLinear layer(out_features);
  for (std::size_t k = 0; k < weights.size(); ++k) {
    const std::int64_t end = k + 1 < weights.size() ? col_begins[k + 1] : out_features;
    layer.tiles_.push_back({Linear::shared(weights[k], in_features, end - col_begins[k]), col_begins[k]});
  }
  return layer;
}

Status TiledLinear::forward(device::Ops& ops, ParamSource& params, Tensor out, Tensor inp) const {
  for (const Tile& tile : tiles_) ZINF_RETURN_IF_ERROR(tile.linear.forward(ops, params, out, tile.col_begin, inp));
  return Status::ok();
}

Status TiledLinear::backward(device::Ops& ops, ParamSource& params, GradSink& grads, Tensor dinp,
                             device::GradMode dinp_mode, Tensor dout, Tensor inp) const {
  device::GradMode mode = dinp_mode;
  for (const Tile& tile : tiles_) {
    ZINF_RETURN_IF_ERROR(tile.linear.backward(ops, params, grads, dinp, mode, dout, tile.col_begin, inp));
    mode = device::GradMode::kAccumulate;  // the later tiles add their share of dinp
  }
  return Status::ok();
}

}  // namespace zinf::model
