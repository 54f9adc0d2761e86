#include "libengine/spec/sizing/model_flops.h"

#include <algorithm>

#include "libengine/spec/sizing/activation_layout.h"

namespace zinf::sizing {

ForwardFlops forward_flops(const spec::ModelShape& s, std::int64_t batch, std::int64_t seq) {
  const double b = static_cast<double>(batch), t = static_cast<double>(seq);
  const double c = static_cast<double>(s.hidden), f = static_cast<double>(s.ffn_hidden);
  const double v = static_cast<double>(s.vocab);
  const double q = static_cast<double>(qkv_width(s)), a = static_cast<double>(core_width(s));
  const double mlp_matrices = s.mlp == spec::MlpKind::kGated ? 3.0 : 2.0;
  const double attention = 2.0 * b * t * t * a;
  return {2.0 * b * t * (c * q + a * c + mlp_matrices * c * f) + attention, attention, 2.0 * b * t * v * c};
}

double model_flops_per_step(const spec::ModelShape& shape, std::int64_t batch, std::int64_t seq) {
  const ForwardFlops fwd = forward_flops(shape, batch, seq);
  return 3.0 * (static_cast<double>(shape.layers) * fwd.block + fwd.head);
}

double executed_flops_per_step(const spec::ModelShape& shape, std::int64_t batch, std::int64_t seq,
                               bool checkpointing) {
  const double layers = static_cast<double>(shape.layers);
  const double recompute = checkpointing ? std::max(0.0, layers - 1.0) * forward_flops(shape, batch, seq).block : 0.0;
  return model_flops_per_step(shape, batch, seq) + recompute;
}

}  // namespace zinf::sizing
