// HardwareProfile: the machine a plan is for — one node's GPUs, CPU memory, NVMe and links, and
// how many such nodes. Every figure is in base units (bytes, bytes/s, FLOP/s).
//
// Profiles are JSON files a user can write (schema "zinf.hardware/1", documented in
// planner/profiles/README.md); the built-in ones are such files compiled into the binary, so
// `zinf hw show NAME` prints a template. Bandwidths are achievable figures, not datasheet peaks,
// except gpu.peak_flops, which holds datasheet figures (dense, per math mode) that MFU is measured
// against.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/core/status.h"
#include "planner/compute_rate.h"

namespace zinf::planner {

struct GpuSpec {
  std::string name;
  std::uint64_t memory_bytes = 0;  // device memory per GPU
  // Per math mode (fp32, tf32, bf16, fp16, fp8); 0 = not given. peak: datasheet dense FLOP/s (the
  // MFU denominator). achievable: sustained FLOP/s of large GEMMs, the paper's peak_tp (70T on V100
  // in fp16); a mode without one is estimated from its peak (compute_rate()).
  FlopsTable peak_flops;
  FlopsTable achievable_flops;
  // The file gave peak_flops and achievable_flops as single numbers (profiles written before the
  // per-mode tables): they are the bf16 and fp16 rate, and no other mode has one.
  bool single_rate = false;
  double memory_bandwidth = 0;  // HBM bytes/s (an optimizer step on the GPU streams its states)
};

struct NodeSpec {
  std::int64_t gpus = 0;  // GPUs per node
  GpuSpec gpu;
  std::uint64_t cpu_memory_bytes = 0;     // CPU memory usable for training states
  double cpu_memory_bandwidth = 0;        // node aggregate, bytes/s
  std::uint64_t nvme_capacity_bytes = 0;  // usable NVMe per node; 0 when there is none
  double nvme_read_bandwidth = 0;         // node aggregate over all drives, bytes/s
  double nvme_write_bandwidth = 0;
  double pcie_bandwidth_per_gpu = 0;  // host<->GPU per direction per GPU, bytes/s
  double gpu_link_bandwidth = 0;      // GPU<->GPU inside a node per direction per GPU (NVLink/NVSwitch)
  double network_bandwidth = 0;       // between nodes per direction per node (all NICs), bytes/s
};

struct HardwareProfile {
  std::string name;
  std::string description;
  std::int64_t nodes = 1;
  NodeSpec node;
  // Where each figure came from, for measured profiles (`zinf hw probe`): figure path
  // ("node.gpu.achievable_flops") -> "measured: fp32 matmul peak, median of 5" or "copied from the
  // base profile cpu-only". Optional in the file ("provenance" object of strings, at most 64); the
  // planner does not read it.
  std::vector<std::pair<std::string, std::string>> provenance;

  std::int64_t total_gpus() const { return nodes * node.gpus; }
};

// Parses a profile document; `source` names it in errors, field errors read
// "<source>: hw.node.nvme.read_bandwidth: ...". Unknown fields are errors (typos must not
// silently fall back to a default).
Result<HardwareProfile> parse_hardware_profile(const nlohmann::json& document, std::string_view source);

// The profile as a document parse_hardware_profile() accepts (sizes as numbers in base units).
nlohmann::json hardware_profile_to_json(const HardwareProfile& profile);

// Built-in profiles, by name ("dgx2-v100", "dgx-a100-80g", "dgx-h100", "h100-workstation", "cpu-only").
std::vector<std::string_view> builtin_profile_names();
// The JSON text of a built-in profile as shipped (with units and comments in "description").
Result<std::string_view> builtin_profile_text(std::string_view name);

// `name_or_path`: a built-in name, or a path to a JSON file (anything containing '/' or ending in
// ".json"). NotFound lists the built-in names.
Result<HardwareProfile> load_hardware_profile(std::string_view name_or_path);

// The physically meaningful range of each kind of figure. Outside it the model's arithmetic stops
// meaning anything (1e-300 FLOP/s gives an infinite step time), so profiles and the CLI's per-field
// overrides are both checked against these, and nothing non-finite can reach a printed plan.
struct FigureRange {
  double min;
  double max;
  std::string_view unit;     // printed after the value: "FLOP/s", "B/s", "B"
  std::string_view allowed;  // "1 GFLOP/s to 10 EFLOP/s"
};
inline constexpr FigureRange kFlopsRange{1e9, 1e19, "FLOP/s", "1 GFLOP/s to 10 EFLOP/s"};
inline constexpr FigureRange kBandwidthRange{1e6, 1e15, "B/s", "1 MB/s to 1 PB/s"};
inline constexpr FigureRange kGpuMemoryRange{1048576.0, 1125899906842624.0, "B", "1 MiB to 1 PiB"};
inline constexpr FigureRange kHostBytesRange{1048576.0, 1152921504606846976.0, "B", "1 MiB to 1 EiB"};
inline constexpr std::int64_t kMaxGpusPerNode = 1 << 16;
inline constexpr std::int64_t kMaxNodes = 1 << 16;

// `value` lies in `range` (and is finite); otherwise InvalidArgument
// "<field>: 1e-300 FLOP/s is outside 1 GFLOP/s to 10 EFLOP/s, the range this figure can take".
Status check_figure(double value, std::string_view field, const FigureRange& range);

// Consistency checks beyond types: every figure within its FigureRange (NVMe capacity may also be 0),
// GPU and node counts within 1..65536, per math mode achievable <= peak FLOP/s and no achievable
// figure without a peak, at least one mode with both.
Status validate(const HardwareProfile& profile);

// The GPU's rate in `mode` (compute_rate() over the profile's tables).
Result<ComputeRate> gpu_compute_rate(const HardwareProfile& profile, MathMode mode);

}  // namespace zinf::planner
