// TiledLinear: memory-centric tiling (ZeRO-Infinity §5.1.3). A linear layer whose weight [OC,C]
// (and bias [OC]) is split along the output features into `tiling` separate parameters,
// `<prefix>.weight.tile{k}` [OC_k, C] and `<prefix>.bias.tile{k}` [OC_k], run one after another:
// each tile is acquired, used for its column block of the output and released before the next is
// acquired, so only one tile need be resident — an operator larger than device memory runs
// without model parallelism. Tile k covers output features [k·OC/tiling, (k+1)·OC/tiling)
// (integer division), so OC need not be a multiple of `tiling`. With tiling == 1 it is exactly a
// Linear named `<prefix>.weight` / `<prefix>.bias`. Results equal the untiled layer's up to fp32
// rounding (the input gradient sums the tiles' products one after another).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "libengine/core/status.h"
#include "libengine/device/ops.h"
#include "libengine/model/linear.h"
#include "libengine/model/param_source.h"
#include "libengine/model/param_table.h"

namespace zinf::model {

class TiledLinear {
 public:
  // Precondition: 1 <= tiling <= out_features (Gpt's validate() reports it otherwise).
  TiledLinear(ParamTable& table, const std::string& prefix, std::int64_t in_features, std::int64_t out_features,
              bool bias, std::int32_t group, float init_std, std::int64_t tiling);

  // A bias-free layer over weight tiles another module owns (the tied head over the token table's
  // tiles): tile k is `weights[k]` [rows, in_features] covering output features from
  // `col_begins[k]`; it adds to their gradients and never commits them.
  static TiledLinear shared(const std::vector<ParamId>& weights, const std::vector<std::int64_t>& col_begins,
                            std::int64_t in_features, std::int64_t out_features);

  std::int64_t tiling() const { return static_cast<std::int64_t>(tiles_.size()); }
  std::int64_t out_features() const { return out_features_; }

  // out [R,OC] = inp [R,C] · weightᵀ + bias, one tile at a time.
  Status forward(device::Ops& ops, ParamSource& params, Tensor out, Tensor inp) const;
  // dinp [R,C] receives dout·weight (dinp_mode for the first tile, += for the others); every
  // tile's gradients are added and committed right after that tile's backward.
  Status backward(device::Ops& ops, ParamSource& params, GradSink& grads, Tensor dinp, device::GradMode dinp_mode,
                  Tensor dout, Tensor inp) const;

 private:
  struct Tile {
    Linear linear;
    std::int64_t col_begin;
  };
  explicit TiledLinear(std::int64_t out_features) : out_features_(out_features) {}
  std::vector<Tile> tiles_;
  std::int64_t out_features_;
};

}  // namespace zinf::model
