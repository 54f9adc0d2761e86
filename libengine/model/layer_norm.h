// LayerNorm: the model's normalisation module, over the last dimension, in one of two kinds:
// - LayerNorm (nn.LayerNorm(C, eps)): `<prefix>.weight` (ones) and `<prefix>.bias` (zeros);
// - RMSNorm (HF's LlamaRMSNorm(C, eps)): `<prefix>.weight` (ones) only, no mean, no bias.
// Neither parameter is weight-decayed. The saved statistics (mean for LayerNorm, rstd for both)
// live in the caller's activation buffers, not here; RMSNorm leaves `mean` alone (it may be empty).
#pragma once

#include <cstdint>
#include <string>

#include "libengine/core/status.h"
#include "libengine/device/ops.h"
#include "libengine/model/param_source.h"
#include "libengine/model/param_table.h"
#include "libengine/spec/model_shape.h"

namespace zinf::model {

class LayerNorm {
 public:
  static constexpr float kEps = 1e-5f;

  // LayerNorm with bias and eps 1e-5 (GPT-2's).
  LayerNorm(ParamTable& table, const std::string& prefix, std::int64_t channels, std::int32_t group)
      : LayerNorm(table, prefix, channels, group, spec::NormKind::kLayerNorm, kEps) {}
  // The norm a ModelShape asks for: `kind` with `eps` (LayerNorm always has its bias here).
  LayerNorm(ParamTable& table, const std::string& prefix, std::int64_t channels, std::int32_t group,
            spec::NormKind kind, float eps);

  spec::NormKind kind() const { return kind_; }

  // out [R,C] = normalise(inp) * weight (+ bias); saves mean (LayerNorm only) and rstd [R]. Fails
  // only when acquiring does.
  Status forward(device::Ops& ops, ParamSource& params, Tensor out, Tensor mean, Tensor rstd, Tensor inp) const;
  // dinp [R,C] += the input gradient (so a residual stream's gradient can be passed directly);
  // adds to and commits the weight (and bias) gradients (this module is their only user).
  Status backward(device::Ops& ops, ParamSource& params, GradSink& grads, Tensor dinp, Tensor dout, Tensor inp,
                  Tensor mean, Tensor rstd) const;

 private:
  static constexpr ParamId kNone = -1;
  spec::NormKind kind_;
  float eps_;
  ParamId weight_;
  ParamId bias_ = kNone;
};

}  // namespace zinf::model
