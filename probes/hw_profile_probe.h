// A hardware profile from a bench suite record (`zinf hw probe`): every figure the suite measured
// replaces the base profile's guess, the rest (GPU count and memory, GPU-to-GPU and network links,
// node count) is copied from the base profile, and the profile's "provenance" says which is which.
//
// Mapping (medians of the suite's samples; "zinf" side unless said):
//   gpu.achievable_flops   CUDA: the bf16 entry is the device bf16 matmul peak, other modes are the
//                          base's; CPU: fp32 matmul peak, also the bf16/fp16 entry (fp32 compute)
//   gpu.peak_flops         CUDA: the base's datasheet table (MFU's denominator); CPU: the best
//                          fp32 matmul sample of either side (no datasheet exists for a CPU arena)
//   gpu.memory_bandwidth   CUDA: device memory bandwidth (copy); CPU: memory bandwidth (triad)
//   gpu.name               CUDA: base; CPU: "<cpu model> (CPU backend)"
//   cpu.memory             3/4 of MemTotal (the rest for the OS and the process itself)
//   cpu.memory_bandwidth   memory bandwidth (triad)
//   links.pcie_per_gpu     CUDA: the slower of the pinned copies each way; CPU: half the memcpy
//                          figure (memcpy's GB/s counts the read and the write of each byte)
//   nvme.read/write        the striped figures (or the one path's); nvme.capacity: free space of
//                          the paths (statvfs). Without --path: the base's.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/core/status.h"
#include "planner/hardware_profile.h"

namespace zinf::probes {

// The figure named `name` in a zinf.bench-suite/1 record (an element of its "figures"), or nullptr;
// the pointer is into `record` and lives as long as it does.
const nlohmann::json* suite_figure(const nlohmann::json& record, std::string_view name);

// `suite` is a zinf.bench-suite/1 record; `nvme_paths` the directories its NVMe figures were measured
// on (empty: the base profile's NVMe figures are kept). Pure apart from statvfs on those paths; the
// inputs are not modified. Fails (InvalidArgument) only when a measured figure falls outside the
// planner's ranges, naming it.
Result<planner::HardwareProfile> profile_from_suite(const nlohmann::json& suite, const planner::HardwareProfile& base,
                                                    const std::vector<std::string>& nvme_paths,
                                                    const std::string& name);

}  // namespace zinf::probes
