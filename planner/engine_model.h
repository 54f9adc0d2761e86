// Engine model: what `zinf train` will allocate and move for a scenario on this machine, and how
// long its step will take — the prediction the train record puts next to what it measured.
//
// It follows the partitioned engine (libengine/zero) as a pure function of the scenario and a few
// measured figures, at one rank. Its byte and FLOP rules are the engine's own, from
// libengine/spec/sizing/ (activation layout, budgets, bytes per state element, model FLOPs) and
// spec/optimizer_pipeline_shape.h; tests/unit/sizing checks the bytes against built sessions:
//  - budgets resolved as the engine resolves them: zero.max_live_bytes (0: min(max(offloaded
//    params, 2x largest), max(4x largest, 256 MiB))), zero.prefetch_bytes (0 with NVMe params: 2x
//    max_live), and with the optimizer on NVMe the three pipeline sets sized from what the host
//    budget leaves (sub-groups of at most 1/8 of the model, at least the largest parameter);
//  - device memory: the model's activation buffers (block inputs, one block's activations with
//    checkpointing or every block's without, final norm, logits, backward workspace, in the compute
//    dtype, 64-byte aligned), device-resident states, persistent small parameters, gathered
//    parameters up to max_live_bytes, the fp32 gradients of one block (or of the largest parameter)
//    with their rounded copies on their way down, and fp32 views of one block's half-precision
//    parameters (fp32 compute over bf16/fp16 storage);
//  - host memory: offloaded activation checkpoints, host-resident states, the new-parameter
//    staging, the optimizer pipeline and the NVMe read staging (up to prefetch_bytes); NVMe:
//    parameters and 12 bytes per element of optimizer states (only when the optimizer is on NVMe);
//  - traffic per step: each offloaded parameter crosses host->device once for the forward pass and
//    once for the backward pass (the recompute reuses the backward's copy), less what is still live
//    at the turn (max_live_bytes); gradients cross device->host once; NVMe optimizer states are read
//    and written once (12 bytes per element each way), NVMe parameters read as they are fetched and
//    written after the step;
//  - time: compute = the model's FLOPs (forward, backward, and the recompute of layers - 1 blocks) at the measured
//    matmul peak, or with the block's other kernels measured, its matmuls' FLOPs at that peak plus
//    those kernels' times (forward, recompute and backward per block); CPU Adam streams 28 bytes per element at the
//    measured memory bandwidth (on the CPU backend it shares the compute cores); copies at memory bandwidth (CPU
//    backend, where they take the compute cores: charged to compute) or PCIe; on the CPU backend with half-precision
//    parameters, the fp32 view every acquire converts (6 bytes per element at memory bandwidth,
//    forward: every parameter; backward: every parameter and the recomputed blocks'); NVMe at
//    the measured drive bandwidth. The phases follow schedule_model.h (zinf's schedule when
//    zero.overlap_optimizer, DeepSpeed's otherwise); when the step needs the gradient norm first,
//    only the optimizer reads the three pipeline sets hold run ahead of it, the rest is read
//    between the updates.
// Not modelled: several ranks (collectives), the CUDA context and allocator slack, fragmentation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "libengine/spec/scenario.h"
#include "libengine/spec/sizing/model_flops.h"
#include "planner/schedule_model.h"

namespace zinf::planner {

// Figures of the machine the run is on, measured in the run or read from a profile.
struct EngineHardware {
  double compute_flops = 0;          // FLOP/s of the model's matmuls (the run's matmul peak probe)
  double memory_bandwidth = 0;       // host memory B/s (triad)
  double host_device_bandwidth = 0;  // B/s per direction (CPU backend: memcpy, half the triad's)
  double nvme_read_bandwidth = 0;    // B/s of the scenario's nvme_paths (0 when no state is on NVMe)
  double nvme_write_bandwidth = 0;
  // B/s of reads and writes running at once, both counted (the optimizer pipeline reads ahead while
  // it writes behind); 0: not measured, reads and writes then take their own rates one after the other.
  double nvme_mixed_bandwidth = 0;
  bool compute_on_host = true;  // the CPU backend: the "device" is the host's cores
  // One block's kernels other than its four matmuls (layer norms, attention, residuals, GELU), timed
  // on the model's shapes; both 0: not measured (a profile, a GPU), attention's FLOPs then run at
  // compute_flops and the rest is not charged.
  double block_kernel_forward_seconds = 0;
  double block_kernel_backward_seconds = 0;
};

struct MemoryItem {
  std::string what;
  double bytes = 0;
  // Taken as the steps run, up to a budget (gathered parameters, gradient buffers, NVMe read
  // staging); false: allocated when the engine is built.
  bool transient = false;
};

// Bytes of the items allocated when the engine is built (what its tiers hold before step 1).
double setup_bytes(const std::vector<MemoryItem>& items);

struct EnginePrediction {
  ScheduledStep step;  // forward / backward / optimizer phases and the step
  double compute_seconds =
      0;  // the model's FLOPs at compute_flops (matmuls only, plus the measured block kernels, when measured)
  double conversion_seconds = 0;  // CPU backend, half-precision parameters: the fp32 views per step
  // Peak bytes per tier and what they hold.
  double device_peak_bytes = 0;
  double host_peak_bytes = 0;
  double nvme_peak_bytes = 0;
  std::vector<MemoryItem> device_items, host_items, nvme_items;
  // Bytes per step per link.
  double host_to_device_bytes = 0;
  double device_to_host_bytes = 0;
  double nvme_read_bytes = 0;
  double nvme_write_bytes = 0;
  // Resolved budgets.
  std::uint64_t max_live_bytes = 0;
  std::uint64_t prefetch_bytes = 0;
  std::int64_t sub_groups = 0;
  // Optimizer states on NVMe: the share of their reads the host pipeline sets take before the first
  // update (the first min(3, sub_groups) sub-groups of the overlapped order); 1 otherwise.
  double optimizer_read_ahead = 1.0;
  double activation_bytes = 0;
};

// Parameter element counts in the engine's table order, untiled (wte, wpe with learned positions,
// per block: ln1, qkv, proj, ln2, (gate,) fc, proj — each weight then its bias when it has one —
// the final norm, and head.weight when untied).
std::vector<std::int64_t> parameter_numels(const spec::ModelShape& shape);

// Parameter elements of one block.
double block_elements(const spec::ModelShape& shape);

// Bytes of the model's activation buffers on the device (spec/sizing/activation_layout.h).
double model_activation_bytes(const spec::Scenario& scenario, std::size_t compute_dtype_bytes);

// FLOPs (2 per multiply-accumulate) of one forward pass (spec/sizing/model_flops.h).
using ForwardFlops = sizing::ForwardFlops;
ForwardFlops scenario_forward_flops(const spec::Scenario& scenario);

// FLOPs of one step: 3x the forward's (forward, backward = 2x), plus with activation checkpointing
// the recompute of every block but the last (the model keeps the last block's activations from the
// forward pass and never recomputes the head).
double scenario_flops_per_step(const spec::Scenario& scenario);

EnginePrediction predict_engine(const spec::Scenario& scenario, const EngineHardware& hardware);

}  // namespace zinf::planner
