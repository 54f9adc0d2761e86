// Linear: nn.Linear (out = inp · weightᵀ + bias, weight [OC,C]) as a model module. Either owns its
// parameters (added to the ParamTable under the given names) or uses a weight another module owns
// (the tied output head reads `wte`): then it adds to that weight's gradient but never commits it,
// the owner does. It can write a column block of a wider output, which is how TiledLinear runs its
// tiles; a plain layer writes columns [0, OC).
#pragma once

#include <cstdint>
#include <string>

#include "libengine/core/status.h"
#include "libengine/device/ops.h"
#include "libengine/model/param_source.h"
#include "libengine/model/param_table.h"

namespace zinf::model {

class Linear {
 public:
  // Adds `weight_name` [out_features, in_features] (N(0, init_std), weight decay) and, when
  // bias_name is not empty, `bias_name` [out_features] (zeros, no decay), both in `group`.
  Linear(ParamTable& table, const std::string& weight_name, const std::string& bias_name, std::int64_t in_features,
         std::int64_t out_features, std::int32_t group, float init_std);
  // A bias-free layer over `weight` [out_features, in_features] owned by another module.
  static Linear shared(ParamId weight, std::int64_t in_features, std::int64_t out_features);

  std::int64_t in_features() const { return in_features_; }
  std::int64_t out_features() const { return out_features_; }

  // Writes columns [out_col_begin, out_col_begin + OC) of out [R, >=OC] from inp [R,C].
  // Acquires and releases the weight (and bias); fails only when acquiring does.
  Status forward(device::Ops& ops, ParamSource& params, Tensor out, std::int64_t out_col_begin, Tensor inp) const;
  // For the columns [dout_col_begin, +OC) of dout: dinp [R,C] receives dout·weight (dinp_mode),
  // the weight/bias gradients receive their parts (+=) and are committed when owned.
  Status backward(device::Ops& ops, ParamSource& params, GradSink& grads, Tensor dinp, device::GradMode dinp_mode,
                  Tensor dout, std::int64_t dout_col_begin, Tensor inp) const;

 private:
  Linear(ParamId weight, ParamId bias, std::int64_t in_features, std::int64_t out_features, bool owns_weight)
      : weight_(weight),
        bias_(bias),
        in_features_(in_features),
        out_features_(out_features),
        owns_weight_(owns_weight) {}

  static constexpr ParamId kNoBias = -1;
  ParamId weight_;
  ParamId bias_;
  std::int64_t in_features_;
  std::int64_t out_features_;
  bool owns_weight_;
};

}  // namespace zinf::model
