// DeepSpeed configs in the planner: a resolved ds_config turned into a plan input (the family its
// stage selects, every kind of state pinned where the config puts it, its micro-batch, precision
// and checkpoint count), the settings in it that are wrong for the hardware (each with the value
// that would work), and a plan's placement written back out as a DeepSpeed config.
//
// Not a parser (spec/deepspeed_config.h reads the file) and not a second memory model: every
// figure here comes from the plan's footprint or from the config's own element counts.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/spec/deepspeed_config.h"
#include "planner/planner.h"

namespace zinf::planner {

// Sets input.strategy (stage 0: data parallel; 1-2: kDeepSpeedStage12; 3: kDeepSpeedStage3, or
// kDeepSpeedStage3NvmeOptimizer with the optimizer on NVMe), pins every kind (gradients are searched
// between CPU and NVMe when the optimizer is on NVMe), and sets training.micro_batch and training.precision from the
// config (the caller resolved "auto" against its own flags). number_checkpoints, when given, sets ckpt_interval to
// ceil(layers / number_checkpoints). The shape must be set first.
void apply_deepspeed(const spec::ResolvedDeepSpeed& resolved, PlanInput& input);

// A setting wrong for this hardware: "offload_param.buffer_size", what is wrong, what would work.
struct DsFinding {
  std::string key;         // dotted DeepSpeed key, no root
  std::string problem;     // one sentence with the figures
  std::string would_work;  // the value to write instead, as it would be written in the config
};

// Checks of the config against the plan's hardware and footprint: pinned NVMe parameter buffers
// (buffer_count x buffer_size) and max_in_cpu against the CPU memory one rank has left, buffers
// smaller than the largest parameter, the optimizer's NVMe swap buffers (buffer_count x
// sub_group_size) against it too, a prefetch bucket above the live-parameter budget, live
// parameters and reduce buckets against the GPU memory the placement leaves free, the engine's
// two-largest-parameters floor, and an aio block size the O_DIRECT path cannot use.
std::vector<DsFinding> check_deepspeed(const spec::ResolvedDeepSpeed& resolved, const Plan& plan);

// The plan's placement as a DeepSpeed config: the stage of its family, offload_param /
// offload_optimizer devices (NVMe at `nvme_path`), the batch sizes (train_batch_size = micro-batch
// x world size), bf16/fp16, activation checkpointing (cpu_checkpointing when checkpoints live in
// CPU memory; number_checkpoints when it gives back the plan's interval exactly) and the stage-3
// budgets. Reading it back with apply_deepspeed pins the same placement, so the plan is the same.
// Fails (InvalidArgument) when the placement has no DeepSpeed equivalent (gradients away from the
// optimizer, NVMe below stage 3, checkpoints on NVMe), saying which.
Result<nlohmann::json> deepspeed_config_for(const Plan& plan, const std::string& nvme_path);

// The record's "deepspeed" object: the resolved settings, every "auto" resolution, unused keys and
// findings.
nlohmann::json deepspeed_to_json(const spec::ResolvedDeepSpeed& resolved, const std::vector<DsFinding>& findings);

}  // namespace zinf::planner
