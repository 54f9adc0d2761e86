// Collective model: how long NCCL takes for the large all-gathers, reduce-scatters and all-reduces
// a ZeRO step runs over every GPU of the cluster, in nccl-tests' terms (doc/PERFORMANCE.md in
// NVIDIA/nccl-tests): for S bytes, algbw = S / t and busbw = algbw * 2(n-1)/n for all-reduce,
// algbw * (n-1)/n for all-gather and reduce-scatter. busbw is what a GPU's busiest link carries, so
// it is the figure a link bandwidth predicts:
//  * one node: rings over NVLink/NVSwitch; busbw = links.gpu_to_gpu (per GPU, per direction).
//  * several nodes: NCCL runs one ring per NIC, each ring crossing every node boundary once, so a
//    node's NICs together carry what one GPU sends along a ring: busbw = min(gpu_to_gpu, network)
//    with network the node's aggregate NIC bandwidth (not a GPU's share of it).
// All-gather and reduce-scatter always run as rings (ZeRO's collectives). All-reduce (plain data
// parallelism only) is modelled as a ring too, which is conservative where NCCL does better:
// NVLink SHARP inside an H100 node (~480 GB/s busbw against ~370 for rings, NVIDIA/nccl-tests#212)
// and the tree / NVLS-tree it may pick on two nodes, which sends each byte across the network once
// instead of 2(n-1)/n times (NVIDIA/nccl-tests#196). Older NCCL picked rings there (two HGX A100
// with 4x HDR: 91 GB/s busbw, NVIDIA/nccl-tests#100), so the ring is the figure every version reaches.
// tests/unit/planner/collective_model_test.cpp checks these against published nccl-tests figures.
#pragma once

#include <string_view>

#include "planner/hardware_profile.h"

namespace zinf::planner {

enum class Collective { kAllReduce, kAllGather, kReduceScatter };

// nccl-tests' bus factor for `ranks` ranks: 2(n-1)/n for all-reduce, (n-1)/n otherwise; 0 for one rank.
double bus_factor(Collective collective, double ranks);

struct CollectiveBandwidth {
  double bus_bandwidth = 0;    // bytes/s, nccl-tests busbw over all GPUs of the profile
  std::string_view algorithm;  // "ring over NVLink", "rings over NVLink and the NICs"
};

// Preconditions: validate(hardware) is ok.
CollectiveBandwidth collective_bandwidth(const HardwareProfile& hardware, Collective collective);

// Bytes one GPU's busiest link carries for a collective of `size` bytes (nccl-tests' size: the
// all-reduce buffer, the gathered output of an all-gather, the input of a reduce-scatter) over all
// GPUs: size * bus_factor. Time = bus_bytes / collective_bandwidth().bus_bandwidth.
double bus_bytes(const HardwareProfile& hardware, Collective collective, double size);

}  // namespace zinf::planner
