// one_layer_device_bytes (scenario.h): the device memory one transformer layer needs under a
// scenario's placement — the check behind "does even one layer fit the device budget".
#include <algorithm>
#include <limits>

#include "libengine/spec/scenario.h"
#include "libengine/spec/sizing/activation_layout.h"
#include "libengine/spec/training_spec.h"

namespace zinf::spec {
namespace {

std::uint64_t saturate(double bytes) {
  constexpr double kMax = 1.8e19;  // just below 2^64
  return bytes >= kMax ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(bytes);
}

}  // namespace

OneLayerDeviceBytes one_layer_device_bytes_breakdown(const Scenario& scenario) {
  const StateAccounting accounting =
      scenario.precision == DType::kF32 ? StateAccounting::kFp32 : StateAccounting::kZero;
  const StateBytesPerParam state_bytes = state_bytes_per_param(accounting);
  // Only the kinds of state that live on the device count against it.
  double per_param = 0;
  if (scenario.zero.params == Tier::kDevice) per_param += state_bytes.params;
  if (scenario.zero.grads == Tier::kDevice) per_param += state_bytes.grads;
  if (scenario.zero.optimizer == Tier::kDevice) per_param += state_bytes.optimizer();
  const double layer_params = static_cast<double>(count_parameters(scenario.shape).per_layer);
  // One block's activations and backward scratch as the model carves them (sizing/activation_layout.h),
  // in the compute dtype: fp32 on the CPU backend, the storage precision on a GPU.
  const std::size_t compute_bytes = scenario.device == device::DeviceKind::kCpu ? dtype_size_bytes(DType::kF32)
                                                                                : dtype_size_bytes(scenario.precision);
  OneLayerDeviceBytes bytes;
  bytes.model_states = saturate(layer_params * per_param);
  // The layout counts elements in 64 bits: a shape whose tensors could not be counted there saturates
  // (an upper bound of every tensor's elements, in doubles, decides; absurd shapes must not wrap).
  const ModelShape& s = scenario.shape;
  const double widest = static_cast<double>(
      std::max({s.hidden, s.ffn_hidden, (s.heads + 2 * s.kv_heads) * s.head_dim, s.heads * s.head_dim, s.heads}));
  const double bound = static_cast<double>(scenario.batch) * static_cast<double>(scenario.seq) * widest * 32.0;
  bytes.activations = bound >= 9e18
                          ? std::numeric_limits<std::uint64_t>::max()
                          : sizing::one_block_activation_bytes(s, scenario.batch, scenario.seq, compute_bytes);
  return bytes;
}

std::uint64_t one_layer_device_bytes(const Scenario& scenario) {
  return one_layer_device_bytes_breakdown(scenario).total();
}

}  // namespace zinf::spec
