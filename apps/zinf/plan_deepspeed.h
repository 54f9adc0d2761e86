// `zinf plan --ds-config FILE` and `--emit-ds-config FILE`: the CLI side of DeepSpeed configs —
// reading one against the plan's flags (they are what "auto" resolves from, as the Hugging Face
// Trainer's arguments are), showing what it does and what in it is wrong for the hardware, and
// writing a plan's placement back out as one. The config itself is spec/deepspeed_config.h, the
// planning is planner/deepspeed_plan.h; this file only wires flags, views and files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "apps/zinf/output.h"
#include "libengine/core/dtype.h"
#include "libengine/spec/deepspeed_config.h"
#include "planner/deepspeed_plan.h"
#include "planner/planner.h"

namespace zinf::cli {

// The plan flags a DeepSpeed config meets: set when the user gave them.
struct DsPlanFlags {
  std::optional<std::int64_t> micro_batch;    // --micro-batch
  std::optional<DType> precision;             // --precision
  std::optional<std::int64_t> ckpt_interval;  // --ckpt-interval
  bool accounting_given = false;              // --accounting
};

// Loads `path`, resolves "auto" against `flags`, the model (input.shape) and the cluster
// (input.hardware), and applies it to `input` (strategy family, pinned placement, micro-batch,
// precision, checkpoint interval; accounting follows the precision unless --accounting was
// given). Errors name "--ds-config" and the key.
Result<spec::ResolvedDeepSpeed> apply_ds_config(const std::string& path, const DsPlanFlags& flags,
                                                planner::PlanInput& input);

// How plan errors name the placement when a DeepSpeed config pinned it.
std::string ds_plan_flag_for(std::string_view field);

// Adds what the config does to a rendered plan: a "DeepSpeed config" section (resolved settings,
// every "auto" and where it came from, settings wrong for this hardware with the value that would
// work, keys zinf does not use) and the record's "deepspeed" object. `planned_grads`: where the plan
// put gradients; with the optimizer on NVMe the config does not decide it (DeepSpeed's optimizer
// swapper can swap gradients to NVMe too), so the section shows the plan's tier, not a guess.
void add_deepspeed_view(const std::string& path, const spec::ResolvedDeepSpeed& resolved,
                        const std::vector<planner::DsFinding>& findings, spec::Tier planned_grads, Rendered& out);

// Writes the plan's placement as a DeepSpeed config to `path` (atomically, as --out does). An
// infeasible plan writes nothing and fails with kInfeasible; a placement DeepSpeed cannot express
// is InvalidArgument naming --emit-ds-config.
Status emit_ds_config(const planner::Plan& plan, const std::string& path, const Io& io);

}  // namespace zinf::cli
