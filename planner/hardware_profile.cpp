#include "planner/hardware_profile.h"

#include <cmath>
#include <tuple>

#include <fmt/format.h>

#include "libengine/core/quote.h"
#include "libengine/spec/json_input.h"
#include "planner/builtin_profiles.h"

namespace zinf::planner {
namespace {

using spec::JsonObject;

constexpr std::string_view kSchema = "zinf.hardware/1";

// A table of FLOP/s per math mode: {"fp32": "67TFLOPS", "bf16": "989.4TFLOPS"}; modes may be left out.
Result<FlopsTable> parse_flops_table(const JsonObject& gpu, std::string_view key) {
  ZINF_ASSIGN_OR_RETURN(const JsonObject table, gpu.object(key));
  std::vector<std::string_view> modes;
  for (MathMode mode : kAllMathModes) modes.push_back(math_mode_name(mode));
  ZINF_RETURN_IF_ERROR(table.reject_unknown_keys(modes));
  FlopsTable out;
  for (MathMode mode : kAllMathModes) {
    if (!table.has(math_mode_name(mode))) continue;
    ZINF_ASSIGN_OR_RETURN(out[mode], table.flops(math_mode_name(mode)));
  }
  return out;
}

// peak_flops and achievable_flops are either both single numbers (the format before per-mode
// tables: the bf16/fp16 rate) or both tables.
Status parse_gpu_flops(const JsonObject& gpu, GpuSpec& spec) {
  const bool peak_is_table = gpu.has("peak_flops") && gpu.raw().at("peak_flops").is_object();
  const bool achievable_is_table = gpu.has("achievable_flops") && gpu.raw().at("achievable_flops").is_object();
  if (peak_is_table != achievable_is_table) {
    return Status::invalid_argument(
        fmt::format("{}: peak_flops and achievable_flops must both be single numbers (the bf16/fp16 rate) or both "
                    "tables per math mode (fp32, tf32, bf16, fp16, fp8)",
                    gpu.path()));
  }
  if (peak_is_table) {
    ZINF_ASSIGN_OR_RETURN(spec.peak_flops, parse_flops_table(gpu, "peak_flops"));
    ZINF_ASSIGN_OR_RETURN(spec.achievable_flops, parse_flops_table(gpu, "achievable_flops"));
    return Status::ok();
  }
  ZINF_ASSIGN_OR_RETURN(const double peak, gpu.flops("peak_flops"));
  ZINF_ASSIGN_OR_RETURN(const double achievable, gpu.flops("achievable_flops"));
  spec.single_rate = true;
  for (MathMode mode : {MathMode::kBf16, MathMode::kFp16}) {
    spec.peak_flops[mode] = peak;
    spec.achievable_flops[mode] = achievable;
  }
  return Status::ok();
}

Result<GpuSpec> parse_gpu(const JsonObject& gpu) {
  ZINF_RETURN_IF_ERROR(
      gpu.reject_unknown_keys({"name", "memory", "peak_flops", "achievable_flops", "memory_bandwidth"}));
  GpuSpec spec;
  ZINF_ASSIGN_OR_RETURN(spec.name, gpu.printable_string("name"));
  ZINF_ASSIGN_OR_RETURN(spec.memory_bytes, gpu.bytes("memory"));
  ZINF_RETURN_IF_ERROR(parse_gpu_flops(gpu, spec));
  ZINF_ASSIGN_OR_RETURN(spec.memory_bandwidth, gpu.bandwidth("memory_bandwidth"));
  return spec;
}

Result<NodeSpec> parse_node(const JsonObject& node) {
  ZINF_RETURN_IF_ERROR(node.reject_unknown_keys({"gpus", "gpu", "cpu", "nvme", "links"}));
  NodeSpec spec;
  ZINF_ASSIGN_OR_RETURN(spec.gpus, node.positive_int("gpus"));
  ZINF_ASSIGN_OR_RETURN(const JsonObject gpu, node.object("gpu"));
  ZINF_ASSIGN_OR_RETURN(spec.gpu, parse_gpu(gpu));

  ZINF_ASSIGN_OR_RETURN(const JsonObject cpu, node.object("cpu"));
  ZINF_RETURN_IF_ERROR(cpu.reject_unknown_keys({"memory", "memory_bandwidth"}));
  ZINF_ASSIGN_OR_RETURN(spec.cpu_memory_bytes, cpu.bytes("memory"));
  ZINF_ASSIGN_OR_RETURN(spec.cpu_memory_bandwidth, cpu.bandwidth("memory_bandwidth"));

  ZINF_ASSIGN_OR_RETURN(const JsonObject nvme, node.object("nvme"));
  ZINF_RETURN_IF_ERROR(nvme.reject_unknown_keys({"capacity", "read_bandwidth", "write_bandwidth"}));
  ZINF_ASSIGN_OR_RETURN(spec.nvme_capacity_bytes, nvme.bytes("capacity", /*zero_allowed=*/true));
  ZINF_ASSIGN_OR_RETURN(spec.nvme_read_bandwidth, nvme.bandwidth("read_bandwidth"));
  ZINF_ASSIGN_OR_RETURN(spec.nvme_write_bandwidth, nvme.bandwidth("write_bandwidth"));

  ZINF_ASSIGN_OR_RETURN(const JsonObject links, node.object("links"));
  ZINF_RETURN_IF_ERROR(links.reject_unknown_keys({"pcie_per_gpu", "gpu_to_gpu", "network"}));
  ZINF_ASSIGN_OR_RETURN(spec.pcie_bandwidth_per_gpu, links.bandwidth("pcie_per_gpu"));
  ZINF_ASSIGN_OR_RETURN(spec.gpu_link_bandwidth, links.bandwidth("gpu_to_gpu"));
  ZINF_ASSIGN_OR_RETURN(spec.network_bandwidth, links.bandwidth("network"));
  return spec;
}

Result<HardwareProfile> parse_profile_object(const nlohmann::json& document) {
  ZINF_ASSIGN_OR_RETURN(const JsonObject root, JsonObject::wrap(document, "hw"));
  ZINF_RETURN_IF_ERROR(root.reject_unknown_keys({"schema", "name", "description", "nodes", "node", "provenance"}));
  ZINF_ASSIGN_OR_RETURN(const std::string schema, root.string("schema"));
  if (schema != kSchema) {
    return Status::invalid_argument(
        fmt::format("hw.schema: {} is not supported; expected '{}'", zinf::quoted(schema), kSchema));
  }
  HardwareProfile profile;
  ZINF_ASSIGN_OR_RETURN(profile.name, root.printable_string("name"));
  ZINF_ASSIGN_OR_RETURN(const auto description, root.optional_printable_string("description"));
  profile.description = description.value_or("");
  ZINF_ASSIGN_OR_RETURN(const auto nodes, root.optional_positive_int("nodes"));
  profile.nodes = nodes.value_or(1);
  ZINF_ASSIGN_OR_RETURN(const JsonObject node, root.object("node"));
  ZINF_ASSIGN_OR_RETURN(profile.node, parse_node(node));
  if (root.has("provenance")) {
    ZINF_ASSIGN_OR_RETURN(const JsonObject provenance, root.object("provenance"));
    const nlohmann::json& entries = document.at("provenance");
    if (entries.size() > 64) {
      return Status::invalid_argument(
          fmt::format("hw.provenance: {} entries; at most 64 (one per figure)", entries.size()));
    }
    for (const auto& [key, value] : entries.items()) {
      ZINF_ASSIGN_OR_RETURN(std::string text, provenance.printable_string(key));
      profile.provenance.emplace_back(key, std::move(text));
    }
  }
  ZINF_RETURN_IF_ERROR(validate(profile));
  return profile;
}

// A single-rate profile names its fields without a mode, as the file did.
std::string flops_field(const GpuSpec& gpu, std::string_view table, MathMode mode) {
  if (gpu.single_rate) return fmt::format("hw.node.gpu.{}", table);
  return fmt::format("hw.node.gpu.{}.{}", table, math_mode_name(mode));
}

Status validate_flops(const GpuSpec& gpu) {
  bool any_pair = false;
  for (MathMode mode : kAllMathModes) {
    const double peak = gpu.peak_flops[mode];
    const double achievable = gpu.achievable_flops[mode];
    // 0 is "not given" in a table; anything else (negative, NaN, 1e-300) must be a real rate. A
    // single-rate profile gives exactly the bf16 and fp16 entries.
    const bool single_mode = mode == MathMode::kBf16 || mode == MathMode::kFp16;
    if (gpu.single_rate && !single_mode) continue;
    if (peak != 0 || gpu.single_rate) {
      ZINF_RETURN_IF_ERROR(check_figure(peak, flops_field(gpu, "peak_flops", mode), kFlopsRange));
    }
    if (achievable != 0 || gpu.single_rate) {
      ZINF_RETURN_IF_ERROR(check_figure(achievable, flops_field(gpu, "achievable_flops", mode), kFlopsRange));
    }
    if (achievable > 0 && peak <= 0) {
      return Status::invalid_argument(
          fmt::format("{}: given without {}; the peak is the datasheet rate it is measured "
                      "against",
                      flops_field(gpu, "achievable_flops", mode), flops_field(gpu, "peak_flops", mode)));
    }
    if (achievable > peak) {
      return Status::invalid_argument(
          fmt::format("{}: {:g} is above {} {:g}; achievable throughput cannot exceed the peak",
                      flops_field(gpu, "achievable_flops", mode), achievable,
                      gpu.single_rate ? "peak_flops" : fmt::format("peak_flops.{}", math_mode_name(mode)), peak));
    }
    any_pair = any_pair || (peak > 0 && achievable > 0);
  }
  if (!any_pair) {
    return Status::invalid_argument(
        "hw.node.gpu.achievable_flops: no math mode has both a peak and an achievable rate; give at least one pair "
        "(the others are estimated from it)");
  }
  return Status::ok();
}

}  // namespace

Result<HardwareProfile> parse_hardware_profile(const nlohmann::json& document, std::string_view source) {
  Result<HardwareProfile> profile = parse_profile_object(document);
  if (!profile.is_ok()) return profile.status().with_context(source);
  return profile;
}

Status check_figure(double value, std::string_view field, const FigureRange& range) {
  if (std::isfinite(value) && value >= range.min && value <= range.max) return Status::ok();
  if (std::isfinite(value) && value <= 0)
    return Status::invalid_argument(fmt::format("{}: {:g} must be positive", field, value));
  return Status::invalid_argument(fmt::format("{}: {:g} {} is outside {}, the range this figure can take", field, value,
                                              range.unit, range.allowed));
}

Status validate(const HardwareProfile& profile) {
  const NodeSpec& node = profile.node;
  if (profile.nodes <= 0)
    return Status::invalid_argument(fmt::format("hw.nodes: {} is not a positive integer", profile.nodes));
  if (profile.nodes > kMaxNodes) {
    return Status::invalid_argument(fmt::format("hw.nodes: {} is too large (at most {})", profile.nodes, kMaxNodes));
  }
  if (node.gpus <= 0)
    return Status::invalid_argument(fmt::format("hw.node.gpus: {} is not a positive integer", node.gpus));
  if (node.gpus > kMaxGpusPerNode) {
    return Status::invalid_argument(
        fmt::format("hw.node.gpus: {} is too large (at most {})", node.gpus, kMaxGpusPerNode));
  }
  for (auto [field, value, range] :
       {std::tuple{"gpu.memory", static_cast<double>(node.gpu.memory_bytes), kGpuMemoryRange},
        std::tuple{"gpu.memory_bandwidth", node.gpu.memory_bandwidth, kBandwidthRange},
        std::tuple{"cpu.memory", static_cast<double>(node.cpu_memory_bytes), kHostBytesRange},
        std::tuple{"cpu.memory_bandwidth", node.cpu_memory_bandwidth, kBandwidthRange},
        std::tuple{"nvme.read_bandwidth", node.nvme_read_bandwidth, kBandwidthRange},
        std::tuple{"nvme.write_bandwidth", node.nvme_write_bandwidth, kBandwidthRange},
        std::tuple{"links.pcie_per_gpu", node.pcie_bandwidth_per_gpu, kBandwidthRange},
        std::tuple{"links.gpu_to_gpu", node.gpu_link_bandwidth, kBandwidthRange},
        std::tuple{"links.network", node.network_bandwidth, kBandwidthRange}}) {
    ZINF_RETURN_IF_ERROR(check_figure(value, fmt::format("hw.node.{}", field), range));
  }
  if (node.nvme_capacity_bytes != 0) {
    ZINF_RETURN_IF_ERROR(
        check_figure(static_cast<double>(node.nvme_capacity_bytes), "hw.node.nvme.capacity", kHostBytesRange));
  }
  return validate_flops(node.gpu);
}

Result<ComputeRate> gpu_compute_rate(const HardwareProfile& profile, MathMode mode) {
  const GpuSpec& gpu = profile.node.gpu;
  return compute_rate(gpu.peak_flops, gpu.achievable_flops, gpu.single_rate, mode);
}

namespace {

// A single-rate profile is written back as it was read: one number (its bf16 entry).
nlohmann::json flops_json(const GpuSpec& gpu, const FlopsTable& table) {
  if (gpu.single_rate) return table[MathMode::kBf16];
  nlohmann::json out = nlohmann::json::object();
  for (MathMode mode : kAllMathModes) {
    if (table.has(mode)) out[std::string(math_mode_name(mode))] = table[mode];
  }
  return out;
}

}  // namespace

nlohmann::json hardware_profile_to_json(const HardwareProfile& profile) {
  const NodeSpec& node = profile.node;
  nlohmann::json out = {
      {"schema", kSchema},
      {"name", profile.name},
      {"description", profile.description},
      {"nodes", profile.nodes},
      {"node",
       {{"gpus", node.gpus},
        {"gpu",
         {{"name", node.gpu.name},
          {"memory", node.gpu.memory_bytes},
          {"peak_flops", flops_json(node.gpu, node.gpu.peak_flops)},
          {"achievable_flops", flops_json(node.gpu, node.gpu.achievable_flops)},
          {"memory_bandwidth", node.gpu.memory_bandwidth}}},
        {"cpu", {{"memory", node.cpu_memory_bytes}, {"memory_bandwidth", node.cpu_memory_bandwidth}}},
        {"nvme",
         {{"capacity", node.nvme_capacity_bytes},
          {"read_bandwidth", node.nvme_read_bandwidth},
          {"write_bandwidth", node.nvme_write_bandwidth}}},
        {"links",
         {{"pcie_per_gpu", node.pcie_bandwidth_per_gpu},
          {"gpu_to_gpu", node.gpu_link_bandwidth},
          {"network", node.network_bandwidth}}}}},
  };
  if (!profile.provenance.empty()) {
    nlohmann::json provenance = nlohmann::json::object();
    for (const auto& [key, value] : profile.provenance) provenance[key] = value;
    out["provenance"] = std::move(provenance);
  }
  return out;
}

std::vector<std::string_view> builtin_profile_names() {
  std::vector<std::string_view> names;
  for (const BuiltinProfile& builtin : builtin_profiles()) names.push_back(builtin.name);
  return names;
}

Result<std::string_view> builtin_profile_text(std::string_view name) {
  for (const BuiltinProfile& builtin : builtin_profiles()) {
    if (builtin.name == name) return builtin.json_text;
  }
  std::string known;
  for (std::string_view builtin : builtin_profile_names())
    known += fmt::format("{}{}", known.empty() ? "" : ", ", builtin);
  return Status::not_found(
      fmt::format("{} is not a built-in hardware profile or a .json file; built-in: {}", zinf::quoted(name), known));
}

Result<HardwareProfile> load_hardware_profile(std::string_view name_or_path) {
  const bool is_path = name_or_path.find('/') != std::string_view::npos ||
                       (name_or_path.size() > 5 && name_or_path.substr(name_or_path.size() - 5) == ".json");
  if (is_path) {
    const std::string path(name_or_path);
    ZINF_ASSIGN_OR_RETURN(const nlohmann::json document, spec::read_json_file(path));
    return parse_hardware_profile(document, path);
  }
  ZINF_ASSIGN_OR_RETURN(const std::string_view text, builtin_profile_text(name_or_path));
  const std::string source = fmt::format("built-in profile {}", name_or_path);
  ZINF_ASSIGN_OR_RETURN(const nlohmann::json document, spec::parse_json_text(text, source));
  return parse_hardware_profile(document, source);
}

}  // namespace zinf::planner
