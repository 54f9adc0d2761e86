// DeviceKind: which compute backend a Device is. A header of its own, with no dependencies, so
// that the scenario (spec/, which builds nothing) names the backend with the same enum the device
// factory takes: one set of values, no translation at the composition root.
#pragma once

#include <string_view>

namespace zinf::device {

enum class DeviceKind { kCpu, kCuda };

// "cpu", "cuda": the names a scenario's "device" field takes.
constexpr std::string_view device_kind_name(DeviceKind kind) { return kind == DeviceKind::kCuda ? "cuda" : "cpu"; }

}  // namespace zinf::device
