// Issue 24 §5, the planner's arithmetic through the CLI: a plan computes at the rate of its
// precision (fp32 is not the bf16 tensor-core rate) and says which, and collectives across nodes
// are charged at the node's NIC bandwidth the way NCCL's rings use it, not at a GPU's share of it.
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/hardware_profile.h"
#include "tests/catch.h"
#include "tests/cli/cli_test_support.h"
#include "tests/temp_dir.h"

namespace zinf::cli {
namespace {

using test_support::Outcome;

nlohmann::json plan_json(const std::vector<std::string>& args) {
  std::vector<std::string> all{"plan"};
  all.insert(all.end(), args.begin(), args.end());
  all.insert(all.end(), {"--format", "json"});
  const Outcome o = test_support::run_zinf(all);
  INFO("stderr: " << o.err);
  REQUIRE(o.code == 0);
  return nlohmann::json::parse(o.out);
}

// Before: 461 TFLOP/s per GPU for an fp32 plan on H100 (the bf16 rate), and fp32 faster than bf16.
TEST_CASE("plan: fp32 runs at the fp32 rate, slower than bf16, and the plan names the rate") {
  const nlohmann::json bf16 = plan_json({"--params", "7B", "--hw", "dgx-h100"});
  const nlohmann::json fp32 = plan_json({"--params", "7B", "--hw", "dgx-h100", "--precision", "fp32"});
  CHECK(bf16["compute_rate"]["math_mode"] == "bf16");
  CHECK(bf16["compute_rate"]["peak_flops"] == 989.4e12);
  CHECK(fp32["compute_rate"]["math_mode"] == "fp32");
  CHECK(fp32["compute_rate"]["peak_flops"] == 67e12);  // H100 SXM datasheet, CUDA cores
  CHECK(fp32["compute_rate"]["peak_basis"] == "the profile's peak_flops.fp32");
  // No fp32 GEMM can beat the fp32 peak, and fp32 is slower than bf16.
  CHECK(fp32["prediction"]["achieved_flops_per_gpu"].get<double>() <= 67e12);
  CHECK(fp32["prediction"]["step_seconds"].get<double>() > bf16["prediction"]["step_seconds"].get<double>());
  // MFU is measured against the peak of the plan's own mode, so it stays a fraction.
  CHECK(fp32["prediction"]["mfu"].get<double>() <= 1.0);

  // fp32 training with TF32 matmuls (PyTorch's allow_tf32) is opt-in: the TF32 tensor-core rate.
  const nlohmann::json tf32 = plan_json({"--params", "7B", "--hw", "dgx-h100", "--precision", "tf32"});
  CHECK(tf32["compute_rate"]["math_mode"] == "tf32");
  CHECK(tf32["compute_rate"]["peak_flops"] == 494.7e12);
  CHECK(tf32["input"]["training"]["precision"] == "fp32");  // fp32 storage, 16 B/param
  CHECK(tf32["input"]["fp32_matmul_tf32"] == true);
  const double tf32_step = tf32["prediction"]["step_seconds"].get<double>();
  CHECK(tf32_step < fp32["prediction"]["step_seconds"].get<double>());
  CHECK(tf32_step > bf16["prediction"]["step_seconds"].get<double>());

  // The table view says which rate and where it came from.
  const Outcome table = test_support::run_zinf({"plan", "--params", "7B", "--hw", "dgx-h100", "--precision", "fp32"});
  REQUIRE(table.code == 0);
  CHECK(table.out.find("fp32 matmuls: peak 67") != std::string::npos);
}

// A profile written before per-mode tables: one peak_flops and one achievable_flops number.
TEST_CASE("plan: a profile with one peak_flops number is the bf16 rate and has no fp32 rate") {
  const testing::TempDir dir;
  const std::string path = dir.path() + "/old.json";
  nlohmann::json old = nlohmann::json::parse(std::string(planner::builtin_profile_text("dgx-h100").value()));
  old["node"]["gpu"]["peak_flops"] = "989TFLOPS";
  old["node"]["gpu"]["achievable_flops"] = "700TFLOPS";
  std::ofstream(path) << old.dump(2);
  const nlohmann::json bf16 = plan_json({"--params", "7B", "--hw", path});
  CHECK(bf16["compute_rate"]["math_mode"] == "bf16");
  CHECK(bf16["compute_rate"]["peak_basis"] == "the profile's single peak_flops (read as the bf16 rate)");
  // fp32 on it is a one-line error naming the field, never the tensor-core rate.
  test_support::check_usage_error(
      test_support::run_zinf({"plan", "--params", "7B", "--hw", path, "--precision", "fp32"}),
      "hw.node.gpu.peak_flops: the profile gives one number, read as the bf16/fp16 "
      "tensor-core rate, so it has no fp32 rate");
  // --gpu-peak-flops/--gpu-flops set the plan's own mode: with them the fp32 plan has its rate.
  const nlohmann::json fp32 = plan_json({"--params", "7B", "--hw", path, "--precision", "fp32", "--gpu-peak-flops",
                                         "67TFLOPS", "--gpu-flops", "50TFLOPS"});
  CHECK(fp32["compute_rate"]["math_mode"] == "fp32");
  CHECK(fp32["compute_rate"]["achievable_flops"] == 50e12);
}

// Before: collectives across nodes were charged at a GPU's share of the node's NICs, so a 1B model
// was predicted 6x slower on two DGX-2 than on one, and `auto` fled to ZeRO-Offload.
TEST_CASE("plan: 1B on one and two DGX-2 nodes, two are not several times slower and stay on the GPU") {
  const nlohmann::json sweep = plan_json({"--params", "1B", "--hw", "dgx2-v100", "--nodes", "1,2"});
  const nlohmann::json& points = sweep["rows"];
  REQUIRE(points.size() == 2);
  const double one = points[0]["prediction"]["step_seconds"].get<double>();
  const double two = points[1]["prediction"]["step_seconds"].get<double>();
  // Per GPU the work is the same; collectives cross the NICs at min(NVLink 120, NICs 90) GB/s busbw
  // instead of NVLink's 120, so a step can grow by at most 120/90 of its collective time.
  CHECK(two <= one * 120.0 / 90.0 * 1.0001);
  // The model fits on the GPUs: nothing is offloaded.
  for (const nlohmann::json& point : points) {
    INFO(point.dump());
    for (const char* kind : {"params", "grads", "optimizer"}) CHECK(point["placement"][kind] == "gpu");
  }
  const nlohmann::json plan = plan_json({"--params", "1B", "--hw", "dgx2-v100", "--nodes", "2"});
  CHECK(plan["placement"]["optimizer"] == "gpu");
  CHECK(plan["family"].get<std::string>().find("Offload") == std::string::npos);
}

}  // namespace
}  // namespace zinf::cli
