// The model a checkpoint is of, recorded in its meta.extra["model"] so that tools that have no
// scenario (`zinf export`) can read the parameters by name and shape: the ModelShape in the
// scenario's arch form (spec::decoder_model_json, read back by spec::parse_decoder_model — one
// serialisation of a shape for scenarios and checkpoints) and the parameter table's names and
// shapes in table order (which fixes the checkpoint's array layout, the partition of every set and
// the tiles of each tiled parameter).
//
//   "model": {"shape": {"arch": "llama", "name", "layers", "hidden", ..., "norm", "norm_eps", "mlp",
//                       "position", "rope_theta", "rope_scaling", "partial_rotary_factor", ...},
//             "params": [["wte", [50257, 768]], ["wpe", [1024, 768]], ...]}
//
// Records written by earlier zinf versions ({"norm", "mlp": "gated", "rope": {...}}) still read.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "libengine/core/status.h"
#include "libengine/model/param_table.h"
#include "libengine/spec/model_shape.h"

namespace zinf::train {

struct CheckpointModel {
  spec::ModelShape shape;
  model::ParamTable table;  // names and shapes only: the init fields are the ParamInfo defaults
};

nlohmann::json checkpoint_model_json(const spec::ModelShape& shape, const model::ParamTable& table);

// Reads extra["model"] of the checkpoint `file` (named in errors). InvalidArgument naming the file
// when it is absent (a checkpoint written before zinf recorded it) or malformed.
Result<CheckpointModel> read_checkpoint_model(const nlohmann::json& extra, const std::string& file);

}  // namespace zinf::train
