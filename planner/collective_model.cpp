#include "planner/collective_model.h"

#include <algorithm>

namespace zinf::planner {

double bus_factor(Collective collective, double ranks) {
  if (ranks <= 1) return 0.0;
  const double ring = (ranks - 1.0) / ranks;
  return collective == Collective::kAllReduce ? 2.0 * ring : ring;
}

CollectiveBandwidth collective_bandwidth(const HardwareProfile& hardware, Collective collective) {
  const NodeSpec& node = hardware.node;
  // Every collective is modelled as rings (see the header for what NCCL may do faster).
  static_cast<void>(collective);
  if (hardware.nodes <= 1) return {node.gpu_link_bandwidth, "ring over NVLink"};
  return {std::min(node.gpu_link_bandwidth, node.network_bandwidth), "rings over NVLink and the NICs"};
}

double bus_bytes(const HardwareProfile& hardware, Collective collective, double size) {
  return size * bus_factor(collective, static_cast<double>(hardware.total_gpus()));
}

}  // namespace zinf::planner
