// The views of a `zinf bench peers` record (bench_peers.h): the side-by-side table "zinf | DeepSpeed |
// PyTorch" with each side's median and range, the reference (triad, fio), the zinf/peer ratios with
// their spread, the first steps' losses of each training item, the rounds and the peers' versions.
#pragma once

#include <nlohmann/json.hpp>

#include "apps/zinf/output.h"

namespace zinf::cli {

// Renders a record written by `zinf bench peers`. Reads only what the command writes; the record
// itself is carried unchanged into Rendered::record.
Rendered render_bench_peers(const nlohmann::json& record);

}  // namespace zinf::cli
