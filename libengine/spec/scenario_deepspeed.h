// A scenario's "deepspeed" field: a DeepSpeed ds_config.json that sets the run's engine (the zero
// section: stage, tier of each state, NVMe paths, live-parameter and prefetch budgets, persistence
// threshold) and fills the training fields the scenario leaves out (micro-batch, precision, Adam's
// settings, gradient clipping, fp16 loss scaling). Fields given in both must agree, as the Hugging
// Face integration requires of its TrainingArguments; "auto" takes the scenario's value. Used by
// parse_scenario only; not a parser of its own (spec/deepspeed_config.h reads the file).
#pragma once

#include "libengine/spec/json_input.h"
#include "libengine/spec/scenario.h"

namespace zinf::spec {

// Reads the file named by root["deepspeed"] (a path relative to the working directory) and applies
// it to `out`, whose other fields are already parsed. Keys zinf does not use land in out.warnings
// (one line listing them); keys it cannot honour, and disagreements with the scenario, are one
// InvalidArgument line naming "scenario.deepspeed", the file and the key.
Status apply_scenario_deepspeed(const JsonObject& root, Scenario& out);

// `status` with zinf's names of the zero fields a DeepSpeed config set ("scenario.zero.max_live_bytes")
// replaced by the DeepSpeed key the user wrote ("scenario.deepspeed: ds.json:
// ds_config.zero_optimization.max_live_parameters"). Unchanged when ok or when the scenario has
// no "deepspeed" field. For errors found after parsing (the engine's budgets, operator tiling).
Status name_deepspeed_keys(const Status& status, const Scenario& scenario);

}  // namespace zinf::spec
