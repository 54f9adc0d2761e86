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

Result<GpuSpec> parse_gpu(const JsonObject& gpu) {
  ZINF_RETURN_IF_ERROR(
      gpu.reject_unknown_keys({"name", "memory", "peak_flops", "achievable_flops", "memory_bandwidth"}));
  GpuSpec spec;
  ZINF_ASSIGN_OR_RETURN(spec.name, gpu.printable_string("name"));
  ZINF_ASSIGN_OR_RETURN(spec.memory_bytes, gpu.bytes("memory"));
  ZINF_ASSIGN_OR_RETURN(spec.peak_flops, gpu.flops("peak_flops"));
  ZINF_ASSIGN_OR_RETURN(spec.achievable_flops, gpu.flops("achievable_flops"));
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
        std::tuple{"gpu.peak_flops", node.gpu.peak_flops, kFlopsRange},
        std::tuple{"gpu.achievable_flops", node.gpu.achievable_flops, kFlopsRange},
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
  if (node.gpu.achievable_flops > node.gpu.peak_flops) {
    return Status::invalid_argument(fmt::format(
        "hw.node.gpu.achievable_flops: {:g} is above peak_flops {:g}; achievable throughput cannot exceed the peak",
        node.gpu.achievable_flops, node.gpu.peak_flops));
  }
  return Status::ok();
}

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
          {"peak_flops", node.gpu.peak_flops},
          {"achievable_flops", node.gpu.achievable_flops},
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
