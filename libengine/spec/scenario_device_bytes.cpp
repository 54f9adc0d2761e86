// one_layer_device_bytes (scenario.h): the device memory one transformer layer needs under a
// scenario's placement — the check behind "does even one layer fit the device budget".
#include <limits>

#include "libengine/spec/scenario.h"
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
  const double tokens = static_cast<double>(scenario.batch) * static_cast<double>(scenario.seq);
  const double values_per_token =
      18.0 * static_cast<double>(scenario.shape.hidden) + static_cast<double>(scenario.shape.heads) + 4.0;
  OneLayerDeviceBytes bytes;
  bytes.model_states = saturate(layer_params * per_param);
  bytes.activations = saturate(tokens * values_per_token * static_cast<double>(dtype_size_bytes(DType::kF32)));
  return bytes;
}

std::uint64_t one_layer_device_bytes(const Scenario& scenario) {
  return one_layer_device_bytes_breakdown(scenario).total();
}

}  // namespace zinf::spec
