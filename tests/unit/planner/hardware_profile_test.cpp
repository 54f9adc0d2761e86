// Hardware profiles: every built-in loads and validates, a profile survives a JSON round trip, and
// each kind of bad profile fails with a message that names the source, the field and the problem.
#include "planner/hardware_profile.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "tests/catch.h"
#include "tests/temp_dir.h"

namespace zinf::planner {
namespace {

using testing::TempDir;

nlohmann::json dgx2_document() { return nlohmann::json::parse(builtin_profile_text("dgx2-v100").value()); }

// The message of a profile document that must fail to parse.
std::string error_of(const nlohmann::json& document) {
  const Result<HardwareProfile> profile = parse_hardware_profile(document, "x.json");
  REQUIRE_FALSE(profile.is_ok());
  CHECK(profile.status().code() == ErrorCode::kInvalidArgument);
  return profile.status().message();
}

void check_same(const HardwareProfile& a, const HardwareProfile& b) {
  CHECK(a.name == b.name);
  CHECK(a.description == b.description);
  CHECK(a.nodes == b.nodes);
  CHECK(a.node.gpus == b.node.gpus);
  CHECK(a.node.gpu.name == b.node.gpu.name);
  CHECK(a.node.gpu.memory_bytes == b.node.gpu.memory_bytes);
  CHECK(a.node.gpu.peak_flops == b.node.gpu.peak_flops);
  CHECK(a.node.gpu.achievable_flops == b.node.gpu.achievable_flops);
  CHECK(a.node.gpu.memory_bandwidth == b.node.gpu.memory_bandwidth);
  CHECK(a.node.cpu_memory_bytes == b.node.cpu_memory_bytes);
  CHECK(a.node.cpu_memory_bandwidth == b.node.cpu_memory_bandwidth);
  CHECK(a.node.nvme_capacity_bytes == b.node.nvme_capacity_bytes);
  CHECK(a.node.nvme_read_bandwidth == b.node.nvme_read_bandwidth);
  CHECK(a.node.nvme_write_bandwidth == b.node.nvme_write_bandwidth);
  CHECK(a.node.pcie_bandwidth_per_gpu == b.node.pcie_bandwidth_per_gpu);
  CHECK(a.node.gpu_link_bandwidth == b.node.gpu_link_bandwidth);
  CHECK(a.node.network_bandwidth == b.node.network_bandwidth);
}

TEST_CASE("every built-in profile loads and validates") {
  const auto names = builtin_profile_names();
  CHECK(names.size() == 9);
  for (std::string_view expected : {"cpu-only", "dgx-a100-80g", "dgx-b200", "dgx-h100", "dgx-h200", "dgx2-v100",
                                    "gh200", "h100-workstation", "mi300x"}) {
    CHECK(std::find(names.begin(), names.end(), expected) != names.end());
  }
  for (std::string_view name : names) {
    INFO(name);
    const Result<HardwareProfile> profile = load_hardware_profile(name);
    REQUIRE(profile.is_ok());
    CHECK(profile->name == name);
    CHECK(validate(*profile).is_ok());
    CHECK(profile->nodes == 1);
    for (MathMode mode : kAllMathModes)
      CHECK(profile->node.gpu.achievable_flops[mode] <= profile->node.gpu.peak_flops[mode]);
  }
}

TEST_CASE("the DGX-2 profile has the paper's figures in base units") {
  const HardwareProfile hw = load_hardware_profile("dgx2-v100").value();
  CHECK(hw.node.gpus == 16);
  CHECK(hw.total_gpus() == 16);
  CHECK(hw.node.gpu.memory_bytes == 32ULL << 30);                 // 32 GiB
  CHECK(hw.node.gpu.achievable_flops[MathMode::kFp16] == 70e12);  // the paper's peak_tp
  CHECK(hw.node.gpu.peak_flops[MathMode::kFp16] == 125e12);       // datasheet, tensor cores
  CHECK(hw.node.gpu.peak_flops[MathMode::kFp32] == 15.7e12);      // datasheet, CUDA cores
  CHECK_FALSE(hw.node.gpu.peak_flops.has(MathMode::kBf16));       // V100 has no bf16 tensor cores
  CHECK(hw.node.cpu_memory_bytes == 1'500'000'000'000ULL);        // 1.5 TB
  CHECK(hw.node.nvme_capacity_bytes == 28'000'000'000'000ULL);
  CHECK(hw.node.nvme_read_bandwidth == 25e9);
  CHECK(hw.node.pcie_bandwidth_per_gpu == 12e9);
  CHECK(hw.node.network_bandwidth == 90e9);
}

TEST_CASE("hardware_profile_to_json round-trips through parse_hardware_profile") {
  for (std::string_view name : builtin_profile_names()) {
    INFO(name);
    const HardwareProfile original = load_hardware_profile(name).value();
    const nlohmann::json document = hardware_profile_to_json(original);
    const Result<HardwareProfile> again = parse_hardware_profile(document, "round trip");
    REQUIRE(again.is_ok());
    check_same(original, *again);
    // And through text, as `zinf hw show NAME > my.json` would.
    const Result<HardwareProfile> from_text =
        parse_hardware_profile(nlohmann::json::parse(document.dump(2)), "round trip text");
    REQUIRE(from_text.is_ok());
    check_same(original, *from_text);
  }
  // A hand-made profile with awkward numbers and several nodes.
  HardwareProfile odd = load_hardware_profile("dgx-h100").value();
  odd.name = "odd";
  odd.nodes = 3;
  odd.node.gpu.memory_bytes = 81'559'502'848ULL;
  odd.node.pcie_bandwidth_per_gpu = 12.345e9;
  odd.node.nvme_capacity_bytes = 0;
  const Result<HardwareProfile> again = parse_hardware_profile(hardware_profile_to_json(odd), "odd");
  REQUIRE(again.is_ok());
  check_same(odd, *again);
}

TEST_CASE("an unknown profile name is NotFound listing the built-ins") {
  const Result<HardwareProfile> profile = load_hardware_profile("dgx3");
  REQUIRE_FALSE(profile.is_ok());
  CHECK(profile.status().code() == ErrorCode::kNotFound);
  CHECK(profile.status().message() ==
        "'dgx3' is not a built-in hardware profile or a .json file; built-in: cpu-only, dgx-a100-80g, dgx-b200, "
        "dgx-h100, dgx-h200, dgx2-v100, gh200, h100-workstation, mi300x");
}

TEST_CASE("a missing field is named with its dotted path") {
  nlohmann::json document = dgx2_document();
  document["node"]["nvme"].erase("read_bandwidth");
  CHECK(error_of(document) == "x.json: hw.node.nvme.read_bandwidth: required field is missing");
  document = dgx2_document();
  document.erase("node");
  CHECK(error_of(document) == "x.json: hw.node: required field is missing");
}

TEST_CASE("a typo in a key is an error with a suggestion") {
  nlohmann::json document = dgx2_document();
  document["node"]["nvme"]["read_bandwith"] = document["node"]["nvme"]["read_bandwidth"];
  document["node"]["nvme"].erase("read_bandwidth");
  CHECK(error_of(document) ==
        "x.json: hw.node.nvme.read_bandwith: unknown field (did you mean 'read_bandwidth'?); allowed: capacity, "
        "read_bandwidth, write_bandwidth");
  document = dgx2_document();
  document["node"]["gpu"]["colour"] = "green";
  CHECK(error_of(document) ==
        "x.json: hw.node.gpu.colour: unknown field; allowed: name, memory, peak_flops, achievable_flops, "
        "memory_bandwidth");
}

TEST_CASE("a wrong schema is rejected") {
  nlohmann::json document = dgx2_document();
  document["schema"] = "zinf.hardware/2";
  CHECK(error_of(document) == "x.json: hw.schema: 'zinf.hardware/2' is not supported; expected 'zinf.hardware/1'");
  document = nlohmann::json::array({1, 2});
  CHECK(error_of(document) == "x.json: hw: expected a JSON object, found [1,2] (array)");
}

TEST_CASE("negative or zero sizes are rejected") {
  nlohmann::json document = dgx2_document();
  document["node"]["gpu"]["memory"] = "-32GiB";
  CHECK(error_of(document).find("x.json: hw.node.gpu.memory: '-32GiB' is negative; expected a size") == 0);
  document = dgx2_document();
  document["node"]["links"]["pcie_per_gpu"] = -12e9;
  CHECK(error_of(document).find("x.json: hw.node.links.pcie_per_gpu: '-12000000000.0' is negative") == 0);
  document = dgx2_document();
  document["node"]["cpu"]["memory"] = 0;
  CHECK(error_of(document).find("x.json: hw.node.cpu.memory: '0' is zero") == 0);
  document = dgx2_document();
  document["node"]["gpus"] = 0;
  CHECK(error_of(document) == "x.json: hw.node.gpus: expected a positive integer, found 0 (number)");
  document = dgx2_document();
  document["nodes"] = -1;
  CHECK(error_of(document) == "x.json: hw.nodes: expected a positive integer, found -1 (number)");
  // No NVMe is allowed: capacity 0.
  document = dgx2_document();
  document["node"]["nvme"]["capacity"] = 0;
  CHECK(parse_hardware_profile(document, "x.json").is_ok());
}

TEST_CASE("achievable FLOP/s above the peak is rejected") {
  nlohmann::json document = dgx2_document();
  document["node"]["gpu"]["achievable_flops"]["fp16"] = "200TFLOPS";
  CHECK(error_of(document) ==
        "x.json: hw.node.gpu.achievable_flops.fp16: 2e+14 is above peak_flops.fp16 1.25e+14; achievable throughput "
        "cannot exceed the peak");
  // The same in a profile written before per-mode tables (one number each).
  document = dgx2_document();
  document["node"]["gpu"]["peak_flops"] = "125TFLOPS";
  document["node"]["gpu"]["achievable_flops"] = "200TFLOPS";
  CHECK(error_of(document) ==
        "x.json: hw.node.gpu.achievable_flops: 2e+14 is above peak_flops 1.25e+14; achievable throughput cannot "
        "exceed the peak");
}

// Issue 24 §5: one peak per GPU planned fp32 at the bf16 tensor-core rate. Peaks are per math mode.
TEST_CASE("peak and achievable FLOP/s are tables per math mode, datasheet figures dense") {
  const HardwareProfile h100 = load_hardware_profile("dgx-h100").value();
  CHECK(h100.node.gpu.peak_flops[MathMode::kFp32] == 67e12);
  CHECK(h100.node.gpu.peak_flops[MathMode::kTf32] == 494.7e12);
  CHECK(h100.node.gpu.peak_flops[MathMode::kBf16] == 989.4e12);
  CHECK(h100.node.gpu.peak_flops[MathMode::kFp16] == 989.4e12);
  CHECK(h100.node.gpu.peak_flops[MathMode::kFp8] == 1978.9e12);
  const HardwareProfile a100 = load_hardware_profile("dgx-a100-80g").value();
  CHECK(a100.node.gpu.peak_flops[MathMode::kFp32] == 19.5e12);
  CHECK(a100.node.gpu.peak_flops[MathMode::kTf32] == 156e12);
  CHECK(a100.node.gpu.peak_flops[MathMode::kBf16] == 312e12);
  CHECK_FALSE(a100.node.gpu.peak_flops.has(MathMode::kFp8));
  // The datasheet figures are labelled as such.
  for (const HardwareProfile* hw : {&h100, &a100}) {
    const auto entry = std::find_if(hw->provenance.begin(), hw->provenance.end(),
                                    [](const auto& p) { return p.first == "node.gpu.peak_flops"; });
    REQUIRE(entry != hw->provenance.end());
    CHECK(entry->second.rfind("datasheet, dense", 0) == 0);
  }

  // fp32 is planned at the fp32 rate; its achievable figure, absent from the file, is estimated at
  // the fraction the bf16 figures give (700 / 989.4) and the basis says so.
  const ComputeRate fp32 = gpu_compute_rate(h100, MathMode::kFp32).value();
  CHECK(fp32.mode == MathMode::kFp32);
  CHECK(fp32.peak_flops == 67e12);
  CHECK(fp32.achievable_flops == Approx(67e12 * 700 / 989.4));
  CHECK(fp32.peak_basis == "the profile's peak_flops.fp32");
  CHECK(fp32.achievable_basis ==
        "estimated: 71% of the fp32 peak, the achievable/peak fraction of the profile's bf16 figures");
  const ComputeRate bf16 = gpu_compute_rate(h100, MathMode::kBf16).value();
  CHECK(bf16.achievable_flops == 700e12);
  CHECK(bf16.achievable_basis == "the profile's achievable_flops.bf16");
  CHECK(gpu_compute_rate(h100, MathMode::kTf32)->peak_flops == 494.7e12);

  // V100 has no bf16: half precision is planned at its fp16 rate, and the basis says why.
  const ComputeRate v100 = gpu_compute_rate(load_hardware_profile("dgx2-v100").value(), MathMode::kBf16).value();
  CHECK(v100.mode == MathMode::kFp16);
  CHECK(v100.achievable_flops == 70e12);
  CHECK(v100.peak_basis.find("no bf16 rate") != std::string::npos);
  // A mode the GPU lacks is an error naming the field.
  const Result<ComputeRate> fp8 = gpu_compute_rate(a100, MathMode::kFp8);
  REQUIRE_FALSE(fp8.is_ok());
  CHECK(fp8.status().message() ==
        "hw.node.gpu.peak_flops.fp8: missing; a fp8 plan needs the GPU's fp8 rate (the profile gives fp32, tf32, "
        "bf16, fp16)");
}

// A profile a user wrote before the tables: one peak_flops and one achievable_flops number. They
// are read as the bf16/fp16 rate (what every built-in gave and what the planner defaulted to), and
// an fp32 plan on such a profile is an error, never the tensor-core rate.
TEST_CASE("a single peak_flops is the bf16/fp16 rate and gives no fp32 rate") {
  nlohmann::json document = dgx2_document();
  document["node"]["gpu"]["peak_flops"] = "989TFLOPS";
  document["node"]["gpu"]["achievable_flops"] = "700TFLOPS";
  const HardwareProfile hw = parse_hardware_profile(document, "old.json").value();
  CHECK(hw.node.gpu.single_rate);
  CHECK(hw.node.gpu.peak_flops[MathMode::kBf16] == 989e12);
  CHECK(hw.node.gpu.peak_flops[MathMode::kFp16] == 989e12);
  CHECK_FALSE(hw.node.gpu.peak_flops.has(MathMode::kFp32));
  const ComputeRate half = gpu_compute_rate(hw, MathMode::kBf16).value();
  CHECK(half.achievable_flops == 700e12);
  CHECK(half.peak_basis == "the profile's single peak_flops (read as the bf16 rate)");
  const Result<ComputeRate> fp32 = gpu_compute_rate(hw, MathMode::kFp32);
  REQUIRE_FALSE(fp32.is_ok());
  CHECK(fp32.status().message().rfind(
            "hw.node.gpu.peak_flops: the profile gives one number, read as the bf16/fp16 tensor-core rate, so it has "
            "no fp32 rate",
            0) == 0);
  // Written back as it was read.
  CHECK(hardware_profile_to_json(hw)["node"]["gpu"]["peak_flops"] == 989e12);
  // Mixing the two forms is refused.
  document["node"]["gpu"]["achievable_flops"] = {{"bf16", "700TFLOPS"}};
  CHECK(error_of(document).find("peak_flops and achievable_flops must both be single numbers") != std::string::npos);
}

TEST_CASE("a FLOP/s table refuses unknown modes and achievable figures without a peak") {
  nlohmann::json document = dgx2_document();
  document["node"]["gpu"]["peak_flops"]["bf61"] = "1TFLOPS";
  CHECK(error_of(document).find("hw.node.gpu.peak_flops.bf61: unknown field") != std::string::npos);
  document = dgx2_document();
  document["node"]["gpu"]["achievable_flops"]["tf32"] = "10TFLOPS";
  CHECK(error_of(document) ==
        "x.json: hw.node.gpu.achievable_flops.tf32: given without hw.node.gpu.peak_flops.tf32; the peak is the "
        "datasheet rate it is measured against");
}

TEST_CASE("validate checks a profile built in code") {
  HardwareProfile hw = load_hardware_profile("dgx2-v100").value();
  CHECK(validate(hw).is_ok());
  hw.nodes = 0;
  CHECK(validate(hw).message() == "hw.nodes: 0 is not a positive integer");
  hw = load_hardware_profile("dgx2-v100").value();
  hw.node.network_bandwidth = 0;
  CHECK(validate(hw).message() == "hw.node.links.network: 0 must be positive");
}

// Issue 15, defect 4: 1e-300 FLOP/s or B/s gave an infinite step time and "-nan%", printed with
// exit 0. Every figure has a physical range, checked for files and flags alike.
TEST_CASE("every figure must lie in its physical range") {
  nlohmann::json document = dgx2_document();
  document["node"]["gpu"]["achievable_flops"]["fp16"] = 1e-300;
  CHECK(error_of(document) ==
        "x.json: hw.node.gpu.achievable_flops.fp16: 1e-300 FLOP/s is outside 1 GFLOP/s to 10 "
        "EFLOP/s, the range this figure can take");
  for (const char* link : {"pcie_per_gpu", "gpu_to_gpu", "network"}) {
    document = dgx2_document();
    document["node"]["links"][link] = "1e-300GB/s";
    CHECK(error_of(document).find(fmt::format("hw.node.links.{}: 1e-291 B/s is outside 1 MB/s to 1 PB/s", link)) !=
          std::string::npos);
  }
  document = dgx2_document();
  document["node"]["nvme"]["read_bandwidth"] = "1e300GB/s";
  CHECK(error_of(document).find("hw.node.nvme.read_bandwidth: 1e+309") == std::string::npos);  // no inf shown
  CHECK(error_of(document).find("is too large") != std::string::npos);
  document = dgx2_document();
  document["node"]["cpu"]["memory_bandwidth"] = 1e20;
  CHECK(error_of(document).find("hw.node.cpu.memory_bandwidth: 1e+20 B/s is outside") != std::string::npos);
  document = dgx2_document();
  document["nodes"] = 100000;
  CHECK(error_of(document) == "x.json: hw.nodes: 100000 is too large (at most 65536)");
  document = dgx2_document();
  document["node"]["gpu"]["name"] = "V100\u001b[31m";
  CHECK(error_of(document).find("hw.node.gpu.name: ") != std::string::npos);
  CHECK(check_figure(2e9, "--gpu-flops", kFlopsRange).is_ok());
  CHECK(check_figure(std::numeric_limits<double>::infinity(), "--gpu-flops", kFlopsRange).message() ==
        "--gpu-flops: inf FLOP/s is outside 1 GFLOP/s to 10 EFLOP/s, the range this figure can take");
  CHECK(check_figure(std::nan(""), "--gpu-flops", kFlopsRange).message().find("is outside") != std::string::npos);
  // Every built-in profile lies inside the ranges.
  for (std::string_view name : builtin_profile_names()) CHECK(validate(load_hardware_profile(name).value()).is_ok());
}

TEST_CASE("profile files: good, malformed with its line, missing") {
  TempDir dir;
  const std::string good = dir.write("good.json", std::string(builtin_profile_text("dgx-h100").value()));
  const Result<HardwareProfile> loaded = load_hardware_profile(good);
  REQUIRE(loaded.is_ok());
  CHECK(loaded->name == "dgx-h100");

  // Line 3 has a value missing.
  const std::string bad = dir.write("bad.json", "{\n  \"schema\": \"zinf.hardware/1\",\n  \"name\": ,\n}\n");
  const Result<HardwareProfile> malformed = load_hardware_profile(bad);
  REQUIRE_FALSE(malformed.is_ok());
  CHECK(malformed.status().code() == ErrorCode::kInvalidArgument);
  CHECK(malformed.status().message().find(bad + ":3:") == 0);
  CHECK(malformed.status().message().find("malformed JSON") != std::string::npos);

  // A field error in a file names the file.
  nlohmann::json document = dgx2_document();
  document["node"]["nvme"].erase("read_bandwidth");
  const std::string partial = dir.write("partial.json", document.dump(2));
  CHECK(load_hardware_profile(partial).status().message() ==
        partial + ": hw.node.nvme.read_bandwidth: required field is missing");

  const Result<HardwareProfile> missing = load_hardware_profile(dir.write("x", "") + "-absent.json");
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == ErrorCode::kNotFound);
}

}  // namespace
}  // namespace zinf::planner
