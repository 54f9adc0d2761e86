// Collective model (collective_model.h) against nccl-tests' formulas (doc/PERFORMANCE.md in
// NVIDIA/nccl-tests) and against published nccl-tests figures for DGX-A100 / DGX-H100 class nodes.
// Each row says where the figure was published, what it measured, and what the model predicts from
// the built-in profile (adapted to the measured cluster's NIC count where it differs).
#include "planner/collective_model.h"

#include <cmath>
#include <string_view>
#include <vector>

#include "tests/catch.h"

namespace zinf::planner {
namespace {

TEST_CASE("bus factors are nccl-tests': 2(n-1)/n for all-reduce, (n-1)/n for all-gather and reduce-scatter") {
  CHECK(bus_factor(Collective::kAllReduce, 8) == Approx(2.0 * 7 / 8));
  CHECK(bus_factor(Collective::kAllGather, 8) == Approx(7.0 / 8));
  CHECK(bus_factor(Collective::kReduceScatter, 16) == Approx(15.0 / 16));
  CHECK(bus_factor(Collective::kAllReduce, 1) == 0.0);
  // Time = size * factor / busbw, i.e. algbw = size / time = busbw / factor.
  HardwareProfile hw = load_hardware_profile("dgx-h100").value();
  CHECK(bus_bytes(hw, Collective::kAllReduce, 1e9) == Approx(1e9 * 2.0 * 7 / 8));
  hw.nodes = 4;
  CHECK(bus_bytes(hw, Collective::kAllGather, 1e9) == Approx(1e9 * 31.0 / 32));
}

// Issue 24 §5: a GPU's collective bandwidth across nodes was the node's NICs divided by its GPUs
// (90 / 16 = 5.6 GB/s on a DGX-2); NCCL's rings put the whole node's NICs behind each ring step.
TEST_CASE("across nodes the busbw is the node's NIC bandwidth, not a GPU's share of it") {
  HardwareProfile dgx2 = load_hardware_profile("dgx2-v100").value();
  CHECK(collective_bandwidth(dgx2, Collective::kAllGather).bus_bandwidth == 120e9);  // NVLink
  dgx2.nodes = 2;
  CHECK(collective_bandwidth(dgx2, Collective::kAllGather).bus_bandwidth == 90e9);  // 8 x 100 Gb/s IB, sustained
  CHECK(collective_bandwidth(dgx2, Collective::kReduceScatter).bus_bandwidth == 90e9);
  CHECK(collective_bandwidth(dgx2, Collective::kAllReduce).bus_bandwidth == 90e9);
  // NICs faster than NVLink: NVLink is the limit.
  dgx2.node.network_bandwidth = 400e9;
  CHECK(collective_bandwidth(dgx2, Collective::kAllGather).bus_bandwidth == 120e9);
}

struct Published {
  std::string_view source;    // where the figure was published
  std::string_view measured;  // what was run
  double published_busbw;     // GB/s
  const char* profile;        // built-in profile the prediction starts from
  std::int64_t nodes;
  double network;  // GB/s per node; 0 = the profile's
  Collective collective;
  double predicted_busbw;  // GB/s, what the model gives (checked below)
};

// Published figures and what the model predicts (|predicted / published - 1| <= 15%).
const std::vector<Published>& published() {
  static const std::vector<Published> rows = {
      {"NVIDIA/nccl-tests#212, comment by sjeaugey (NCCL maintainer), 2024-05-06",
       "H100 SXM x8 on NVSwitch, rings (non-all-reduce operations or NCCL_ALGO=RING): ~370 GB/s busbw", 370, "dgx-h100",
       1, 0, Collective::kAllGather, 360},
      {"NVIDIA/nccl-tests#290, comment by AddyLaddy (NCCL maintainer), 2025-03-03",
       "2 H100 nodes, NCCL_ALGO=RING over NDR 400 Gb/s: 46-48 GB/s per NIC, 8 NICs per DGX H100: 368-384 GB/s", 376,
       "dgx-h100", 2, 0, Collective::kAllReduce, 360},
      {"NVIDIA/nccl-tests#149, 2023-06-27",
       "8x A100-SXM4-80GB on NVSwitch (HPE Apollo 6500), all_reduce_perf up to 1 GB, NCCL 2.18: ~200 GB/s busbw", 200,
       "dgx-a100-80g", 1, 0, Collective::kAllReduce, 230},
      {"NVIDIA/nccl-tests#100, 2022-01-17",
       "2 HGX A100 nodes with 4x ConnectX-6 HDR 200 Gb/s each, all_reduce_perf 1-8 GB: 91 GB/s busbw", 91,
       "dgx-a100-80g", 2, 90, Collective::kAllReduce, 90},
      {"NVIDIA/nccl-tests#119, 2022-11-17",
       "3 nodes of 8x A100-SXM4-40GB with 4x HDR 200 Gb/s each, all_reduce_perf up to 128 MB: peak ~96 GB/s busbw", 96,
       "dgx-a100-80g", 3, 90, Collective::kAllReduce, 90},
  };
  return rows;
}

TEST_CASE("the collective model is within 15% of published nccl-tests figures") {
  for (const Published& row : published()) {
    INFO(row.source << ": " << row.measured);
    HardwareProfile hw = load_hardware_profile(row.profile).value();
    hw.nodes = row.nodes;
    // 4 NICs instead of the DGX's 8, each at the profile's sustained per-NIC figure (180 / 8 = 22.5 GB/s).
    if (row.network > 0) hw.node.network_bandwidth = row.network * 1e9;
    const double predicted = collective_bandwidth(hw, row.collective).bus_bandwidth / 1e9;
    CHECK(predicted == Approx(row.predicted_busbw));
    // Exactly 15% on the A100 NVSwitch row: 1 GB messages are just short of the peak busbw.
    CHECK(std::fabs(predicted / row.published_busbw - 1.0) <= 0.15 + 1e-12);
  }
}

// What the model leaves out, and by how much it is conservative there (not checked against 15%):
// NVLink SHARP all-reduce inside an H100 node reaches ~480 GB/s busbw (NVIDIA/nccl-tests#212) where
// the model's ring gives 360; two H100 nodes with 8x 200 Gb/s NICs reached 338 GB/s all-reduce busbw
// at 8 GB with NCCL's tree/NVLS-tree (a GCP A3 Mega run published in the GitHub repository
// lessizzmore/create-a3mega-ztan-fork, file ztan-NCCL-test-result) where the ring gives at most the
// NICs' 200 line rate. Only plain data parallelism all-reduces; ZeRO's collectives are rings.
TEST_CASE("all-reduce is modelled as a ring, below NVLS and two-node tree figures") {
  const HardwareProfile h100 = load_hardware_profile("dgx-h100").value();
  CHECK(collective_bandwidth(h100, Collective::kAllReduce).bus_bandwidth / 1e9 < 480);
  CHECK(collective_bandwidth(h100, Collective::kAllReduce).algorithm == "ring over NVLink");
}

}  // namespace
}  // namespace zinf::planner
