#include "probes/hw_profile_probe.h"

#include <sys/statvfs.h>

#include <algorithm>

#include <fmt/format.h>

#include "reports/record_fields.h"

namespace zinf::probes {
namespace {

using nlohmann::json;

std::optional<double> median_of(const json& suite, std::string_view figure, const char* side = "zinf") {
  const json* f = suite_figure(suite, figure);
  if (f == nullptr) return std::nullopt;
  return reports::number_at(*f, std::string(side) + ".median");
}

std::string measured(std::string_view figure, const json& suite) {
  const json* f = suite_figure(suite, figure);
  const std::size_t n = f == nullptr ? 0 : reports::numbers_at(*f, "zinf.samples").size();
  return fmt::format("measured: {} (median of {}, zinf bench suite {})", figure, n,
                     reports::string_at(suite, "created_at", "?"));
}

}  // namespace

const json* suite_figure(const json& record, std::string_view name) {
  if (!record.contains("figures")) return nullptr;
  for (const json& f : record.at("figures")) {
    if (f.value("name", std::string()) == name) return &f;
  }
  return nullptr;
}

Result<planner::HardwareProfile> profile_from_suite(const json& suite, const planner::HardwareProfile& base,
                                                    const std::vector<std::string>& nvme_paths,
                                                    const std::string& name) {
  planner::HardwareProfile hw = base;
  const std::string host = reports::string_at(suite, "host.hostname", "host");
  hw.name = name.empty() ? "probed-" + host : name;
  hw.description = fmt::format("measured by zinf hw probe on {} at {}; figures not measured come from '{}'", host,
                               reports::string_at(suite, "created_at", "?"), base.name);
  hw.provenance.clear();
  const std::string copied = fmt::format("copied from the base profile '{}' (not measurable here)", base.name);
  auto& p = hw.provenance;
  planner::NodeSpec& n = hw.node;
  p.emplace_back("nodes", copied);
  p.emplace_back("node.gpus", copied);
  p.emplace_back("node.gpu.memory", copied);

  const std::optional<double> triad = median_of(suite, "memory bandwidth");
  const std::optional<double> memcpy_gbps = median_of(suite, "memory bandwidth", "baseline");
  const json* cuda_peak = suite_figure(suite, "device bf16 matmul peak");
  if (cuda_peak != nullptr) {
    // Only the bf16 rate is measured: the other modes keep the base's figures (tables from now on).
    constexpr planner::MathMode kBf16 = planner::MathMode::kBf16;
    n.gpu.single_rate = false;
    n.gpu.achievable_flops[kBf16] = reports::number_at(*cuda_peak, "zinf.median").value_or(0) * 1e9;
    if (n.gpu.peak_flops.has(kBf16))
      n.gpu.achievable_flops[kBf16] = std::min(n.gpu.achievable_flops[kBf16], n.gpu.peak_flops[kBf16]);
    p.emplace_back("node.gpu.achievable_flops",
                   measured("device bf16 matmul peak", suite) + " for bf16; other modes " + copied);
    p.emplace_back("node.gpu.peak_flops", copied + " (datasheet)");
    p.emplace_back("node.gpu.name", copied);
    if (const auto bw = median_of(suite, "device memory bandwidth (copy)")) {
      n.gpu.memory_bandwidth = *bw * 1e9;
      p.emplace_back("node.gpu.memory_bandwidth", measured("device memory bandwidth (copy)", suite));
    }
    const auto h2d = median_of(suite, "host to device (pinned)");
    const auto d2h = median_of(suite, "device to host (pinned)");
    if (h2d && d2h) {
      n.pcie_bandwidth_per_gpu = std::min(*h2d, *d2h) * 1e9;
      p.emplace_back("node.links.pcie_per_gpu", "measured: the slower of host to device / device to host (pinned)");
    }
  } else {
    const json* mm = suite_figure(suite, "fp32 matmul peak");
    if (mm != nullptr) {
      const double achievable = reports::number_at(*mm, "zinf.median").value_or(0) * 1e9;
      double best = 0;
      for (const char* side : {"zinf.samples", "baseline.samples"}) {
        for (const double v : reports::numbers_at(*mm, side)) best = std::max(best, v);
      }
      // The CPU backend computes in fp32 whatever the storage precision, so the fp32 figure is the
      // rate of fp32, bf16 and fp16 training alike; it has no tf32 or fp8.
      n.gpu.single_rate = false;
      n.gpu.peak_flops = {};
      n.gpu.achievable_flops = {};
      for (planner::MathMode mode : {planner::MathMode::kFp32, planner::MathMode::kBf16, planner::MathMode::kFp16}) {
        n.gpu.achievable_flops[mode] = achievable;
        n.gpu.peak_flops[mode] = std::max(best * 1e9, achievable);
      }
      p.emplace_back("node.gpu.achievable_flops", measured("fp32 matmul peak", suite) +
                                                      "; also the bf16/fp16 rate (the CPU backend computes in fp32)");
      p.emplace_back("node.gpu.peak_flops", "measured: the best fp32 matmul sample of zinf and OpenBLAS");
    }
    n.gpu.name = reports::string_at(suite, "host.cpu_model", "CPU") + " (CPU backend)";
    p.emplace_back("node.gpu.name", "machine: /proc/cpuinfo");
    if (triad) {
      n.gpu.memory_bandwidth = *triad * 1e9;
      p.emplace_back("node.gpu.memory_bandwidth",
                     measured("memory bandwidth", suite) + "; the CPU device is host memory");
    }
    if (memcpy_gbps) {
      n.pcie_bandwidth_per_gpu = *memcpy_gbps / 2.0 * 1e9;
      p.emplace_back("node.links.pcie_per_gpu",
                     "measured: half the memcpy baseline of memory bandwidth (host<->device copies are memcpy here)");
    }
  }
  if (triad) {
    n.cpu_memory_bandwidth = *triad * 1e9;
    p.emplace_back("node.cpu.memory_bandwidth", measured("memory bandwidth", suite));
  }
  if (const std::optional<double> mem = reports::number_at(suite, "host.memory_bytes"); mem && *mem > 0) {
    n.cpu_memory_bytes = static_cast<std::uint64_t>(*mem / 4 * 3);
    p.emplace_back("node.cpu.memory", "machine: 3/4 of MemTotal (/proc/meminfo)");
  } else {
    p.emplace_back("node.cpu.memory", copied);
  }
  if (!nvme_paths.empty()) {
    const std::string label = nvme_paths.size() > 1 ? "striped" : nvme_paths.front();
    const auto read = median_of(suite, fmt::format("nvme read ({})", label));
    const auto write = median_of(suite, fmt::format("nvme write ({})", label));
    if (read && write) {
      n.nvme_read_bandwidth = *read * 1e9;
      n.nvme_write_bandwidth = *write * 1e9;
      p.emplace_back("node.nvme.read_bandwidth", measured(fmt::format("nvme read ({})", label), suite));
      p.emplace_back("node.nvme.write_bandwidth", measured(fmt::format("nvme write ({})", label), suite));
    }
    std::uint64_t free_bytes = 0;
    for (const std::string& path : nvme_paths) {
      struct statvfs fs {};
      if (::statvfs(path.c_str(), &fs) == 0) free_bytes += static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
    }
    if (free_bytes > 0) {
      n.nvme_capacity_bytes = free_bytes;
      p.emplace_back("node.nvme.capacity", "machine: free space of the --path directories (statvfs)");
    }
  } else {
    p.emplace_back("node.nvme", copied + "; give --path to measure NVMe");
  }
  p.emplace_back("node.links.gpu_to_gpu", copied);
  p.emplace_back("node.links.network", copied);
  if (Status valid = planner::validate(hw); !valid.is_ok()) return valid.with_context("zinf hw probe");
  return hw;
}

}  // namespace zinf::probes
