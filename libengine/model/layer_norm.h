// LayerNorm: nn.LayerNorm(C, eps=1e-5) with weight and bias over the last dimension, as a model
// module: owns `<prefix>.weight` (ones) and `<prefix>.bias` (zeros), neither weight-decayed.
// The saved statistics (mean, rstd) live in the caller's activation buffers, not here.
#pragma once

#include <cstdint>
#include <string>

#include "libengine/core/status.h"
#include "libengine/device/ops.h"
#include "libengine/model/param_source.h"
#include "libengine/model/param_table.h"

namespace zinf::model {

class LayerNorm {
 public:
  static constexpr float kEps = 1e-5f;

  LayerNorm(ParamTable& table, const std::string& prefix, std::int64_t channels, std::int32_t group);

  // out [R,C] = normalise(inp) * weight + bias; saves mean, rstd [R]. Fails only when acquiring does.
  Status forward(device::Ops& ops, ParamSource& params, Tensor out, Tensor mean, Tensor rstd, Tensor inp) const;
  // dinp [R,C] += the input gradient (so a residual stream's gradient can be passed directly);
  // adds to and commits the weight and bias gradients (this module is their only user).
  Status backward(device::Ops& ops, ParamSource& params, GradSink& grads, Tensor dinp, Tensor dout, Tensor inp,
                  Tensor mean, Tensor rstd) const;

 private:
  ParamId weight_;
  ParamId bias_;
};

}  // namespace zinf::model
